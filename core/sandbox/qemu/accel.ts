import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { access, open, readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import { runTool } from '../../common/run-tool';
import { hostToolCwd } from '../../common/host-tool-env';
import { debugLog } from '../../common/debug-log';
import { writeDurably } from '../../common/stored-file';

/** How QEMU executes the guest: hardware virtualization (KVM, HVF) or software emulation (TCG). */
export type VmAccel = 'kvm' | 'hvf' | 'tcg';

/** What the user asked for: `auto` (probe) or a fixed accelerator. */
export type VmAccelChoice = 'auto' | VmAccel;

export interface AccelProbe {
  accel: VmAccel;
  /** Why hardware acceleration is not used, or why this accelerator was chosen (empty when nothing to say). */
  reason: string;
  /** How the choice was made. */
  source?: 'override' | 'device' | 'probe' | 'cache' | 'platform';
}

/** Outcome of booting the probe guest under KVM. */
export type BootVerdict =
  | { outcome: 'ok'; ms: number }
  | { outcome: 'abort'; ms: number; detail: string }
  | { outcome: 'hang'; ms: number; detail: string }
  | { outcome: 'no-marker'; ms: number; detail: string };

/**
 * Software emulation against KVM for this workload: the cold kernel boot of the sandbox image took
 * 7.1 s under TCG against well under 1 s under KVM on comparable machines (issue 13), and
 * CPU-bound work in the guest lands in the same range.
 */
export const TCG_SLOWDOWN = 10;

/** The probe guest must print its marker within this long; a working KVM boots it in well under 1 s. */
export const PROBE_DEADLINE_MS = 10_000;

const ACCEL_ENV = 'AIRLOCK_VM_ACCEL';

/**
 * The accelerator forced by `AIRLOCK_VM_ACCEL` (wins) or the `vmAccel` setting; `auto` when neither.
 * Throws INVALID_INPUT for a value that is not `auto`, `kvm`, `hvf` or `tcg`.
 */
export function accelOverride(env: NodeJS.ProcessEnv, setting?: VmAccelChoice): VmAccelChoice {
  const raw = env[ACCEL_ENV]?.trim().toLowerCase();
  if (raw) {
    if (raw === 'auto' || raw === 'kvm' || raw === 'hvf' || raw === 'tcg') return raw;
    throw new AirlockError('INVALID_INPUT', `${ACCEL_ENV}='${env[ACCEL_ENV]}' is not an accelerator: use kvm, tcg (software emulation), hvf (macOS) or auto (probe).`);
  }
  return setting ?? 'auto';
}

export interface DetectAccelOptions {
  /** The host's environment (`AIRLOCK_VM_ACCEL`; QEMU runs with it), from the root. */
  env: NodeJS.ProcessEnv;
  platform?: NodeJS.Platform;
  /** The `vmAccel` setting (the environment variable wins over it). */
  setting?: VmAccelChoice;
  /** Default `qemu-system-x86_64`. */
  qemuBinary?: string;
  /** Kernel and initramfs booted by the probe; without them the KVM probe is skipped (device check only). */
  kernel?: string;
  initramfs?: string;
  /** Where the verdict is remembered; default: none. */
  cacheFile?: string;
  /** Default `/dev/kvm` (tests point it elsewhere). */
  kvmDevice?: string;
  deadlineMs?: number;
}

const slower = `using software emulation, about ${TCG_SLOWDOWN}× slower`;
/** What a user can do about a failed probe. */
const recheck = `Updating QEMU or the host kernel runs this check again; ${ACCEL_ENV}=kvm or tcg overrides it`;

/**
 * KVM (HVF on macOS) or TCG, and why. An override (`AIRLOCK_VM_ACCEL`, then the setting) is taken
 * as is. On Linux, `/dev/kvm` must open read-write, and then a tiny guest (the prepared kernel and
 * initramfs, running one shell command) must boot under KVM to a per-probe marker within
 * `deadlineMs`: on some machines the device opens but QEMU aborts (`failed to set MSR 0x10a`) or the
 * guest hangs. The verdict is remembered in `cacheFile`, keyed by QEMU's version, the host kernel
 * and the guest kernel/initramfs, so the probe is paid once.
 */
export async function detectAccel(opts: DetectAccelOptions): Promise<AccelProbe> {
  const platform = opts.platform ?? process.platform;
  const choice = accelOverride(opts.env, opts.setting);
  if (choice !== 'auto') {
    const where = opts.env[ACCEL_ENV] ? ACCEL_ENV : 'the vmAccel setting';
    return { accel: choice, reason: choice === 'tcg' ? `software emulation chosen by ${where}` : `chosen by ${where}, not probed`, source: 'override' };
  }
  if (platform === 'linux') {
    const device = opts.kvmDevice ?? '/dev/kvm';
    try {
      await access(device, constants.F_OK);
    } catch {
      return { accel: 'tcg', reason: `${device} does not exist (no hardware virtualization exposed to this machine): ${slower}`, source: 'device' };
    }
    try {
      const fh = await open(device, 'r+');
      await fh.close();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      return { accel: 'tcg', reason: `${device} cannot be opened (${code}; add your user to the 'kvm' group): ${slower}`, source: 'device' };
    }
    if (!opts.kernel || !opts.initramfs) return { accel: 'kvm', reason: '', source: 'device' };
    return probeKvmCached({ ...opts, kernel: opts.kernel, initramfs: opts.initramfs });
  }
  if (platform === 'darwin') {
    const r = await runTool('sysctl', ['-n', 'kern.hv_support'], { timeoutMs: 5000, env: opts.env }).catch(() => undefined); // no sysctl: no HVF, said below
    if (r && r.code === 0 && r.stdout.toString().trim() === '1') return { accel: 'hvf', reason: '', source: 'platform' };
    return { accel: 'tcg', reason: `the macOS Hypervisor framework is not available: ${slower}`, source: 'platform' };
  }
  return { accel: 'tcg', reason: `no hardware acceleration support for ${platform} in Airlock's QEMU driver`, source: 'platform' };
}

/** The cache keeps the verdict, not its wording: the reason is written from it on every read. */
interface CacheEntry {
  key: string;
  verdict: BootVerdict;
  checkedAt: string;
}

function isVerdict(v: unknown): v is BootVerdict {
  const o = v as Partial<Record<'outcome' | 'detail' | 'ms', unknown>> | undefined;
  return !!o && typeof o.ms === 'number' && (o.outcome === 'ok' || ((o.outcome === 'abort' || o.outcome === 'hang' || o.outcome === 'no-marker') && typeof o.detail === 'string'));
}

async function fileStamp(file: string): Promise<string> {
  const st = await stat(file).catch(() => undefined); // a missing file stamps as missing
  return st ? `${st.size}:${Math.floor(st.mtimeMs)}` : 'missing';
}

/** What the verdict depends on: QEMU's build, the host kernel (KVM lives there) and the guest kernel. */
async function cacheKey(qemu: string, kernel: string, initramfs: string, env: NodeJS.ProcessEnv): Promise<string> {
  const v = await runTool(qemu, ['--version'], { timeoutMs: 15_000, env }).catch(() => undefined); // no answer: version unknown, probed again
  const version = v?.code === 0 ? (v.stdout.toString('utf8').split('\n')[0] ?? '').trim() : 'unknown';
  return JSON.stringify({ qemu, version, host: os.release(), kernel: await fileStamp(kernel), initramfs: await fileStamp(initramfs) });
}

async function probeKvmCached(opts: DetectAccelOptions & { kernel: string; initramfs: string }): Promise<AccelProbe> {
  const qemu = opts.qemuBinary ?? 'qemu-system-x86_64';
  const key = opts.cacheFile ? await cacheKey(qemu, opts.kernel, opts.initramfs, opts.env) : '';
  if (opts.cacheFile) {
    const cached = await readFile(opts.cacheFile, 'utf8')
      .then((t) => JSON.parse(t) as Partial<CacheEntry>)
      .catch(() => undefined); // no or damaged cache: probe again
    if (cached?.key === key && isVerdict(cached.verdict)) return { ...verdictToAccel(cached.verdict), source: 'cache' };
  }
  const verdict = await probeKvmBoot({ qemuBinary: qemu, kernel: opts.kernel, initramfs: opts.initramfs, deadlineMs: opts.deadlineMs });
  const result: AccelProbe = { ...verdictToAccel(verdict), source: 'probe' };
  if (opts.cacheFile) {
    // Best effort: an unwritable cache only means probing again next time.
    const entry: CacheEntry = { key, verdict, checkedAt: new Date().toISOString() };
    await writeDurably(opts.cacheFile, `${JSON.stringify(entry, null, 2)}\n`).catch(debugLog.swallow('accel.cache'));
  }
  return result;
}

/** The user-facing accelerator choice for a boot verdict. */
export function verdictToAccel(v: BootVerdict): { accel: VmAccel; reason: string } {
  switch (v.outcome) {
    case 'ok':
      return { accel: 'kvm', reason: '' };
    case 'abort':
      return { accel: 'tcg', reason: `KVM is present but cannot run guests here (QEMU: ${v.detail}): ${slower}. ${recheck}` };
    case 'hang':
      return { accel: 'tcg', reason: `KVM is present but a test guest did not boot under it within ${Math.round(v.ms / 1000)} s (${v.detail}): ${slower}. ${recheck}` };
    case 'no-marker':
      return { accel: 'tcg', reason: `KVM is present but a test guest stopped without starting under it (${v.detail}): ${slower}. ${recheck}` };
  }
}

/** The most telling line of QEMU's stderr: its own error line, else the last non-empty line. */
function qemuError(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean);
  const own = lines.find((l) => /^qemu-system-[\w-]+: /.test(l)) ?? lines[lines.length - 1] ?? '';
  return own
    .replace(/^qemu-system-[\w-]+: /, '')
    .replace(/^error: /, '')
    .slice(0, 300);
}

export interface ProbeBootOptions {
  qemuBinary: string;
  /** Default `kvm`; `tcg` checks that software emulation boots the same guest (tests). */
  accel?: 'kvm' | 'tcg';
  kernel: string;
  initramfs: string;
  deadlineMs?: number;
}

/**
 * Boots the prepared kernel + initramfs under KVM (or `accel`) with a one-line init (`rdinit=/bin/busybox sh -c
 * 'echo MARKER; poweroff'`, serial console on stdout) and classifies what happened: the marker
 * (ok), QEMU exiting first (abort when it failed or was killed by a signal, no-marker when it exited
 * cleanly), or nothing by the deadline (hang: QEMU is killed).
 */
export function probeKvmBoot(o: ProbeBootOptions): Promise<BootVerdict> {
  const deadlineMs = o.deadlineMs ?? PROBE_DEADLINE_MS;
  const marker = `AIRLOCK-PROBE-${randomBytes(6).toString('hex')}`;
  const append = [
    'console=ttyS0',
    'quiet',
    'loglevel=3',
    'panic=-1',
    'nokaslr',
    'rdinit=/bin/busybox',
    '--',
    'sh',
    '-c',
    // No '=' in the quoted command: the kernel would split the argument there.
    `"echo ${marker}; /bin/busybox poweroff -f"`,
  ].join(' ');
  const machine = o.accel === 'tcg' ? ['-machine', 'q35', '-accel', 'tcg', '-cpu', 'max'] : ['-machine', 'q35,accel=kvm', '-cpu', 'host'];
  const args = ['-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', ...machine, '-smp', '1', '-m', '128M', '-kernel', o.kernel, '-initrd', o.initramfs, '-append', append, '-serial', 'stdio'];
  const t0 = performance.now();
  return new Promise((resolve) => {
    let out = '';
    let err = '';
    let settled = false;
    const child = spawn(o.qemuBinary, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: hostToolCwd() });
    const finish = (v: BootVerdict) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      resolve(v);
    };
    const ms = () => Math.round(performance.now() - t0);
    const timer = setTimeout(() => {
      const said = qemuError(err);
      finish({ outcome: 'hang', ms: ms(), detail: said ? `QEMU: ${said}` : out.trim() ? 'the guest stopped printing' : 'the guest printed nothing' });
    }, deadlineMs);
    child.stdout.on('data', (c: Buffer) => {
      out = (out + c.toString('utf8')).slice(-8192);
      if (out.includes(marker)) finish({ outcome: 'ok', ms: ms() });
    });
    child.stderr.on('data', (c: Buffer) => {
      err = (err + c.toString('utf8')).slice(-8192);
    });
    child.on('error', (e) => finish({ outcome: 'abort', ms: ms(), detail: `could not start ${o.qemuBinary}: ${e.message}` }));
    child.on('close', (code, signal) => {
      if (settled) return;
      if (out.includes(marker)) return finish({ outcome: 'ok', ms: ms() });
      const said = qemuError(err);
      if (signal || code !== 0) {
        finish({ outcome: 'abort', ms: ms(), detail: said || `exited with ${signal ?? `code ${code}`}` });
      } else {
        const last = out.trim().split('\n').pop()?.trim().slice(0, 200);
        finish({ outcome: 'no-marker', ms: ms(), detail: `QEMU exited without the guest's answer${said ? `: ${said}` : last ? `; last console line: ${last}` : ''}` });
      }
    });
  });
}

/** Where the probe's verdict is remembered: next to the kernel it booted. */
export function accelCacheFile(assetsDir: string): string {
  return path.join(assetsDir, 'accel-probe.json');
}
