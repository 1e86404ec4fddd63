/**
 * The accelerator probe for real, on this machine: whatever it decides (KVM where a guest boots under
 * it; TCG where /dev/kvm is missing or, as on Airlock's CI machines, opens but QEMU aborts with
 * "failed to set MSR 0x10a"), the chosen accelerator really boots a guest, doctor's probe says the
 * same, and a VM that fails to start under KVM is started again under TCG and records that it was.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, chmod, mkdtemp, open, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accelCacheFile, detectAccel, probeKvmBoot, type AccelProbe } from '../../core/sandbox/qemu/accel';
import { probeIsolation } from '../../core/sandbox/probe-isolation';
import { QemuDriver } from '../../core/sandbox/qemu/qemu-driver';
import { vmPaths } from '../../core/sandbox/qemu/vm-paths';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { SandboxManager } from '../../core/sandbox/sandbox';
import { requirePrerequisite } from '../support/prerequisites';
import { testEngine } from './sandbox-support';

const qemu = await requirePrerequisite('qemu');
const docker = qemu.ok ? await requirePrerequisite('docker') : qemu;

async function kvmOpens(): Promise<boolean> {
  try {
    await access('/dev/kvm', constants.F_OK);
    await (await open('/dev/kvm', 'r+')).close();
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(!qemu.ok)('VM accelerator probe on this machine', () => {
  const paths = vmPaths(process.env);
  let dir: string;
  let verdict: AccelProbe;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-accel-it-'));
    // Under CI missing assets fail here (scripts/prepare-vm-assets.sh prepares them).
    await new QemuDriver({ env: process.env, engine: testEngine }).checkAvailable();
    verdict = await detectAccel({ env: {}, kernel: paths.kernel, initramfs: paths.initramfs, cacheFile: path.join(dir, 'accel.json') });
    console.log(`[accel] ${verdict.accel} (${verdict.source})${verdict.reason ? `: ${verdict.reason}` : ''}`);
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('chooses an accelerator that really boots a guest, and says why when it is not KVM', async () => {
    expect(verdict.source).toBe((await kvmOpens()) ? 'probe' : 'device');
    if (verdict.accel === 'tcg') {
      expect(verdict.reason).toMatch(/software emulation, about \d+× slower/);
      if (await kvmOpens()) expect(verdict.reason).toMatch(/^KVM is present but /);
    }
    const boot = await probeKvmBoot({ qemuBinary: 'qemu-system-x86_64', kernel: paths.kernel, initramfs: paths.initramfs, accel: verdict.accel === 'kvm' ? 'kvm' : 'tcg', deadlineMs: 120_000 });
    expect(boot).toMatchObject({ outcome: 'ok' });
  });

  it('is remembered: the second answer comes from the cache, with the same reason', async () => {
    const again = await detectAccel({ env: {}, kernel: paths.kernel, initramfs: paths.initramfs, cacheFile: path.join(dir, 'accel.json') });
    expect(again).toMatchObject({ accel: verdict.accel, reason: verdict.reason });
    if (await kvmOpens()) expect(again.source).toBe('cache');
  });

  it('is what doctor reports for QEMU', async () => {
    const probe = (await probeIsolation({ env: { ...process.env, AIRLOCK_VM_ACCEL: '' } })).find((p) => p.kind === 'qemu');
    expect(probe).toMatchObject({ available: true, accel: verdict.accel });
    if (verdict.accel === 'tcg') expect(probe?.reason).toBe(verdict.reason);
    await access(accelCacheFile(paths.assetsDir)).catch(() => {
      if (verdict.source !== 'device') throw new Error('the doctor probe did not remember its verdict');
    });
  });

  describe.skipIf(!docker.ok)('a VM that fails under KVM', () => {
    let runsDir: string;
    let manager: SandboxManager | undefined;
    let driver: QemuDriver | undefined;

    beforeAll(async () => {
      runsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-accel-runs-'));
    });
    afterAll(async () => {
      await manager?.shutdown().catch(() => undefined);
      driver?.dispose();
      await rm(runsDir, { recursive: true, force: true });
    });

    it('is started again under TCG, works, records the retry, and is wiped', async () => {
      // Where KVM is broken or absent, the real QEMU fails under it. Where it works, a wrapper makes
      // QEMU fail under KVM as it does on a broken machine (and runs the real QEMU otherwise).
      let qemuBinary = 'qemu-system-x86_64';
      if (verdict.accel === 'kvm') {
        qemuBinary = path.join(dir, 'qemu-broken-kvm');
        await writeFile(qemuBinary, `#!/bin/sh\nfor a in "$@"; do case "$a" in *accel=kvm*) echo 'qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69' >&2; exit 1;; esac; done\nexec qemu-system-x86_64 "$@"\n`);
        await chmod(qemuBinary, 0o755);
      }
      const { ref } = await ensureSandboxImage({ env: process.env, engine: testEngine() });
      driver = new QemuDriver({ engine: testEngine, env: { ...process.env, AIRLOCK_VM_ACCEL: 'kvm' }, qemuBinary, paths: { runsDir }, diskBytes: 1024 ** 3 });
      manager = new SandboxManager(driver);
      const runId = `r-accel-${randomBytes(4).toString('hex')}`;
      const sandbox = await manager.create({ runId, image: ref, limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
      const info = sandbox.info as { accel?: string; accelRetry?: string };
      expect(info.accel).toBe('tcg');
      expect(info.accelRetry).toMatch(/did not start under KVM .*started again under software emulation/);
      expect((await driver.list()).find((s) => s.runId === runId)?.accelRetry).toBe(info.accelRetry);
      const r = await sandbox.channel.run({ argv: ['echo', 'under-tcg'] });
      expect(r.stdout.toString().trim()).toBe('under-tcg');
      // Later VMs of this driver go straight to TCG.
      expect((await driver.accel()).accel).toBe('tcg');
      const proof = await sandbox.destroy();
      expect(proof.leftovers).toEqual([]);
    });
  });
});
