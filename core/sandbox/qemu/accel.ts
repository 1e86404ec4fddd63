import { constants } from 'node:fs';
import { access, open } from 'node:fs/promises';
import { runTool } from './run-tool';

/** How QEMU executes the guest: hardware virtualization (KVM, HVF) or software emulation (TCG). */
export type VmAccel = 'kvm' | 'hvf' | 'tcg';

export interface AccelProbe {
  accel: VmAccel;
  /** Why hardware acceleration is not used (empty when it is). */
  reason: string;
}

/**
 * KVM when `/dev/kvm` opens read-write (exists and this user may use it), HVF on macOS when the
 * hypervisor framework is supported; TCG otherwise, with the reason.
 */
export async function detectAccel(platform: NodeJS.Platform = process.platform): Promise<AccelProbe> {
  if (platform === 'linux') {
    try {
      await access('/dev/kvm', constants.F_OK);
    } catch {
      return { accel: 'tcg', reason: '/dev/kvm does not exist (no hardware virtualization exposed to this machine): software emulation, much slower' };
    }
    try {
      const fh = await open('/dev/kvm', 'r+');
      await fh.close();
      return { accel: 'kvm', reason: '' };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      return { accel: 'tcg', reason: `/dev/kvm cannot be opened (${code}; add your user to the 'kvm' group): software emulation, much slower` };
    }
  }
  if (platform === 'darwin') {
    const r = await runTool('sysctl', ['-n', 'kern.hv_support'], { timeoutMs: 5000 }).catch(() => undefined);
    if (r && r.code === 0 && r.stdout.toString().trim() === '1') return { accel: 'hvf', reason: '' };
    return { accel: 'tcg', reason: 'the macOS Hypervisor framework is not available: software emulation' };
  }
  return { accel: 'tcg', reason: `no hardware acceleration support for ${platform} in Airlock's QEMU driver` };
}
