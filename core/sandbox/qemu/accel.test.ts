/**
 * The accelerator probe's verdicts against stand-in QEMU processes (shell scripts that abort like
 * QEMU on a broken KVM, hang, exit without the guest's marker, or echo the marker the probe put on
 * the kernel command line), its cache and its overrides. The real fallback on this machine is in
 * test/integration/vm-accel.test.ts.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accelOverride, detectAccel, probeKvmBoot } from './accel';

const STANDINS = {
  abort: `echo 'qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69' >&2
echo "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion failed." >&2
kill -ABRT $$`,
  hang: 'exec sleep 60',
  noMarker: `echo '[    0.000000] Linux version 6.1.0'
echo 'something else'
exit 0`,
  // Echoes the marker found on the -append argument, as the real guest's `echo` would on ttyS0.
  ok: `echo boot >> "$(dirname "$0")/boots"
for a in "$@"; do
  case "$a" in *AIRLOCK-PROBE-*) printf '%s\\n' "$a" | grep -o 'AIRLOCK-PROBE-[0-9a-f]*' ;; esac
done
exit 0`,
  // Prints the wrong marker (an earlier probe's, say): not an answer to this probe.
  staleMarker: `echo AIRLOCK-PROBE-000000000000
exit 0`,
} as const;

describe('accelerator probe', () => {
  let dir: string;
  let kvm: string;
  const bin: Record<keyof typeof STANDINS, string> = { abort: '', hang: '', noMarker: '', ok: '', staleMarker: '' };
  const assets = { kernel: '', initramfs: '' };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-accel-'));
    for (const [name, body] of Object.entries(STANDINS) as Array<[keyof typeof STANDINS, string]>) {
      const file = path.join(dir, `qemu-${name}`);
      // `--version` answers from a file, so a test can "update QEMU".
      await writeFile(file, `#!/bin/sh\nif [ "$1" = --version ]; then cat "$(dirname "$0")/version"; exit 0; fi\n${body}\n`);
      await chmod(file, 0o755);
      bin[name] = file;
    }
    await writeFile(path.join(dir, 'version'), 'QEMU emulator version 7.2.0 (stand-in)\n');
    // Any file that opens read-write stands in for a /dev/kvm that opens.
    kvm = path.join(dir, 'kvm');
    await writeFile(kvm, '');
    assets.kernel = path.join(dir, 'vmlinuz');
    assets.initramfs = path.join(dir, 'initramfs.img');
    await writeFile(assets.kernel, 'kernel');
    await writeFile(assets.initramfs, 'initramfs');
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const boot = (qemuBinary: string, deadlineMs = 5000) => probeKvmBoot({ qemuBinary, ...assets, deadlineMs });

  it('classifies a QEMU that aborts as abort, quoting its error', async () => {
    const v = await boot(bin.abort);
    expect(v).toMatchObject({ outcome: 'abort', detail: 'failed to set MSR 0x10a to 0x69' });
  });

  it('classifies a guest that never answers as hang and kills QEMU at the deadline', async () => {
    const v = await boot(bin.hang, 400);
    expect(v).toMatchObject({ outcome: 'hang', detail: 'the guest printed nothing' });
  });

  it('classifies a clean exit without this probe’s marker as no-marker', async () => {
    expect(await boot(bin.noMarker)).toMatchObject({ outcome: 'no-marker', detail: expect.stringContaining('something else') });
    expect(await boot(bin.staleMarker)).toMatchObject({ outcome: 'no-marker' });
  });

  it('classifies the marker as ok', async () => {
    expect(await boot(bin.ok)).toMatchObject({ outcome: 'ok' });
  });

  it('says why it falls back to TCG in words a user can act on', async () => {
    const abort = await detectAccel({ platform: 'linux', env: {}, qemuBinary: bin.abort, kvmDevice: kvm, ...assets });
    expect(abort).toMatchObject({ accel: 'tcg', source: 'probe' });
    expect(abort.reason).toMatch(/^KVM is present but cannot run guests here \(QEMU: failed to set MSR 0x10a to 0x69\): using software emulation, about \d+× slower\./);
    expect(abort.reason).toContain('AIRLOCK_VM_ACCEL');
    const hang = await detectAccel({ platform: 'linux', env: {}, qemuBinary: bin.hang, kvmDevice: kvm, deadlineMs: 400, ...assets });
    expect(hang).toMatchObject({ accel: 'tcg', reason: expect.stringMatching(/did not boot under it .*software emulation/) });
    expect(await detectAccel({ platform: 'linux', env: {}, qemuBinary: bin.ok, kvmDevice: kvm, ...assets })).toMatchObject({ accel: 'kvm', reason: '' });
  });

  it('does not boot anything when the device is missing', async () => {
    const r = await detectAccel({ platform: 'linux', env: {}, qemuBinary: bin.abort, kvmDevice: path.join(dir, 'no-such-kvm'), ...assets });
    expect(r).toMatchObject({ accel: 'tcg', source: 'device', reason: expect.stringMatching(/does not exist.*software emulation/) });
  });

  it('remembers the verdict per QEMU version, and probes again when QEMU changes', async () => {
    const cacheFile = path.join(dir, 'cache', 'accel-probe.json');
    const boots = path.join(dir, 'boots');
    await rm(boots, { force: true });
    const opts = { platform: 'linux' as const, env: {}, qemuBinary: bin.ok, kvmDevice: kvm, cacheFile, ...assets };
    expect(await detectAccel(opts)).toMatchObject({ accel: 'kvm', source: 'probe' });
    expect(await detectAccel(opts)).toMatchObject({ accel: 'kvm', source: 'cache' });
    expect((await readFile(boots, 'utf8')).trim().split('\n')).toHaveLength(1);
    await writeFile(path.join(dir, 'version'), 'QEMU emulator version 9.0.0 (stand-in)\n');
    expect(await detectAccel(opts)).toMatchObject({ accel: 'kvm', source: 'probe' });
    expect((await readFile(boots, 'utf8')).trim().split('\n')).toHaveLength(2);
    // A different guest kernel is a different question too.
    await writeFile(assets.kernel, 'another kernel');
    expect(await detectAccel(opts)).toMatchObject({ source: 'probe' });
    // A verdict of TCG is remembered the same way (the abort stand-in is never run twice).
    const tcgCache = path.join(dir, 'cache', 'tcg.json');
    expect(await detectAccel({ ...opts, qemuBinary: bin.abort, cacheFile: tcgCache })).toMatchObject({ accel: 'tcg', source: 'probe' });
    expect(await detectAccel({ ...opts, qemuBinary: bin.abort, cacheFile: tcgCache })).toMatchObject({ accel: 'tcg', source: 'cache', reason: expect.stringContaining('MSR 0x10a') });
  });

  it('takes AIRLOCK_VM_ACCEL over the setting over the probe, and refuses other values', async () => {
    const base = { platform: 'linux' as const, qemuBinary: bin.abort, kvmDevice: kvm, ...assets };
    expect(await detectAccel({ ...base, env: { AIRLOCK_VM_ACCEL: 'kvm' } })).toMatchObject({ accel: 'kvm', source: 'override' });
    expect(await detectAccel({ ...base, env: {}, setting: 'tcg' })).toMatchObject({ accel: 'tcg', source: 'override', reason: expect.stringContaining('vmAccel setting') });
    expect(await detectAccel({ ...base, env: { AIRLOCK_VM_ACCEL: 'kvm' }, setting: 'tcg' })).toMatchObject({ accel: 'kvm' });
    expect(accelOverride({ AIRLOCK_VM_ACCEL: ' TCG ' })).toBe('tcg');
    expect(() => accelOverride({ AIRLOCK_VM_ACCEL: 'fast' })).toThrow(expect.objectContaining({ kind: 'INVALID_INPUT', message: expect.stringContaining('kvm, tcg') }));
  });
});
