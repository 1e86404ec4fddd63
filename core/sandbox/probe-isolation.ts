import type { IsolationKind } from './driver';
import { accelCacheFile, detectAccel, type VmAccel, type VmAccelChoice } from './qemu/accel';
import { runTool } from '../common/run-tool';
import { vmPaths } from './qemu/vm-paths';
import { pathExists } from '../common/path-exists';

/** One isolation level and whether this machine can use it. */
export interface IsolationProbe {
  kind: IsolationKind;
  available: boolean;
  /** Why not (or, when available, a caveat such as software emulation); empty when nothing to say. */
  reason: string;
  /** QEMU only: how the guest would run. */
  accel?: VmAccel;
}

export interface ProbeIsolationOptions {
  /** The host's environment (the probed tools run with it), from the root. */
  env: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  arch?: string;
  /** Docker check (default: none, `docker` is omitted); `airlock doctor` passes the engine check. */
  docker?: () => Promise<{ ok: boolean; reason: string }>;
  /** The user's `vmAccel` setting (`AIRLOCK_VM_ACCEL` wins over it). */
  accelSetting?: VmAccelChoice;
}

async function answers(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ ok: boolean; out: string }> {
  const r = await runTool(cmd, args, { timeoutMs: 15_000, env }).catch(() => undefined); // a tool that does not run is the answer: not available
  return { ok: r?.code === 0, out: r ? `${r.stdout.toString('utf8')}${r.stderr}`.trim() : '' };
}


async function probeQemu(o: ProbeIsolationOptions): Promise<IsolationProbe> {
  const platform = o.platform ?? process.platform;
  const arch = o.arch ?? process.arch;
  if (platform !== 'linux' || arch !== 'x64') {
    return { kind: 'qemu', available: false, reason: `the QEMU driver runs on Linux x86-64 (this is ${platform}/${arch}); use ${platform === 'darwin' ? 'Lima' : platform === 'win32' ? 'WSL2' : 'Docker'} instead` };
  }
  const [qemu, img] = await Promise.all([answers('qemu-system-x86_64', ['--version'], o.env), answers('qemu-img', ['--version'], o.env)]);
  if (!qemu.ok || !img.ok) {
    return { kind: 'qemu', available: false, reason: 'QEMU is not installed: run scripts/prepare-vm-assets.sh (or apt-get install qemu-system-x86 qemu-utils busybox-static)' };
  }
  const paths = vmPaths(o.env);
  for (const f of [paths.kernel, paths.initramfs, paths.busybox]) {
    if (!(await pathExists(f))) return { kind: 'qemu', available: false, reason: `the VM kernel/initramfs are not prepared (${f} missing): run scripts/prepare-vm-assets.sh` };
  }
  try {
    // Boots a tiny guest under KVM once per QEMU/kernel version (remembered next to the assets).
    const accel = await detectAccel({ env: o.env, platform, setting: o.accelSetting, kernel: paths.kernel, initramfs: paths.initramfs, cacheFile: accelCacheFile(paths.assetsDir) });
    const why = accel.accel === 'tcg' ? accel.reason : accel.reason || `hardware virtualization (${accel.accel.toUpperCase()}) boots guests here`;
    return { kind: 'qemu', available: true, reason: why, accel: accel.accel };
  } catch (err) {
    return { kind: 'qemu', available: false, reason: err instanceof Error ? err.message : String(err) };
  }
}

async function probeLima(o: ProbeIsolationOptions): Promise<IsolationProbe> {
  const platform = o.platform ?? process.platform;
  if (platform !== 'darwin') return { kind: 'lima', available: false, reason: 'the Lima driver is for macOS' };
  const v = await answers('limactl', ['--version'], o.env);
  if (!v.ok) return { kind: 'lima', available: false, reason: 'Lima is not installed: brew install lima' };
  return { kind: 'lima', available: true, reason: `${v.out.split('\n')[0] ?? 'limactl'} (not verified on a real Mac by Airlock's CI; see resources/vm/README.md)` };
}

async function probeWsl(o: ProbeIsolationOptions): Promise<IsolationProbe> {
  const platform = o.platform ?? process.platform;
  if (platform !== 'win32') return { kind: 'wsl', available: false, reason: 'the WSL2 driver is for Windows' };
  const env = o.env;
  const v = await answers('wsl.exe', ['--status'], { ...env, WSL_UTF8: '1' });
  if (!v.ok) return { kind: 'wsl', available: false, reason: 'WSL2 is not installed or not enabled: run `wsl --install` as administrator' };
  // `wsl --status` exits 0 even when WSL2 cannot start (it only prints a localized note:
  // microsoft/WSL src/windows/common/WslClient.cpp). Ask what it asks, without its words: is the
  // vmcompute service there (sc.exe exits 1060 when not), and is a hypervisor running (firmware virtualization on)?
  const vmcompute = await answers('sc.exe', ['query', 'vmcompute'], env);
  const hypervisor = await answers('powershell.exe', ['-NoProfile', '-NonInteractive', '-Command', '(Get-CimInstance -ClassName Win32_ComputerSystem).HypervisorPresent'], env);
  if (!vmcompute.ok || hypervisor.out.split('\n').pop()?.trim() !== 'True') {
    return {
      kind: 'wsl',
      available: false,
      reason: `WSL2 cannot start VMs here (${!vmcompute.ok ? 'the Virtual Machine Platform is not installed' : 'no hypervisor is running: virtualization is off in the firmware, or the Virtual Machine Platform is off'}). Run \`wsl.exe --install --no-distribution\` as administrator, turn on virtualization in the firmware settings, and restart.`,
    };
  }
  return { kind: 'wsl', available: true, reason: "not verified on a real Windows machine by Airlock's CI; see resources/vm/README.md" };
}

/**
 * Which isolation levels this machine supports, and why not (for `airlock doctor`): QEMU micro-VMs
 * (with the accelerator they would use), Lima on macOS, WSL2 on Windows; Docker when a check is given.
 * Never throws; each probe is bounded in time.
 */
export async function probeIsolation(opts: ProbeIsolationOptions): Promise<IsolationProbe[]> {
  const probes: Array<Promise<IsolationProbe>> = [];
  if (opts.docker) {
    const check = opts.docker;
    probes.push(
      check().then(
        (d) => ({ kind: 'docker' as const, available: d.ok, reason: d.reason }),
        (err: unknown) => ({ kind: 'docker' as const, available: false, reason: err instanceof Error ? err.message : String(err) }),
      ),
    );
  }
  probes.push(probeQemu(opts), probeLima(opts), probeWsl(opts));
  return Promise.all(probes);
}
