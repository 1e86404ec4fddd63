import { spawn, type ChildProcess } from 'node:child_process';
import { open } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { runToolOk } from '../../common/run-tool';
import type { SandboxInfo } from '../driver';
import type { VmAccel } from './accel';
import { keepCappedLog, type CappedLog } from './capped-log';
import { buildQemuArgs } from './qemu-args';
import type { RunFiles, VmPaths } from './vm-paths';

/**
 * Starting a QEMU process and waiting for its guest (docs/architecture.md §4, "The QEMU driver's parts"): the
 * scratch disk, the command line, the sockets QEMU opens, the helper's first bytes, and what to show
 * when a boot fails. The driver decides what to boot (cold or restored); this module boots it.
 */

/** A QEMU sandbox also says how it runs the guest. */
export interface QemuSandboxInfo extends SandboxInfo {
  kind: 'qemu';
  /** `kvm`/`hvf`: hardware virtualization; `tcg`: software emulation (much slower). */
  accel: VmAccel;
  accelReason: string;
  /** Set when the VM failed to start under KVM/HVF and was started again under TCG: why. */
  accelRetry?: string;
  /** `snapshot`: restored from the image's VM snapshot; `boot`: a cold kernel boot. */
  startedFrom?: 'snapshot' | 'boot';
  /** Why a VM booted cold although snapshots are on (the snapshot could not be made). */
  snapshotNote?: string;
  /** `<hostname>:<pid>` of the process that started the VM (reaper safety). */
  owner?: string;
}

/** A VM this process started. */
export interface LiveVm {
  runId: string;
  files: RunFiles;
  child: ChildProcess;
  exited: Promise<void>;
  /** The channel connection made during boot, handed to the first openChannel(). */
  firstSocket?: net.Socket;
  /** Restored VMs: the helper's hello, said before the snapshot was taken, replayed to the first channel. */
  hello?: Buffer;
  configSocket?: net.Socket;
  wallClock?: NodeJS.Timeout;
  stderrTail: string;
  info: QemuSandboxInfo;
  /** The helper's stderr, read from its socket into a capped file. */
  helperLog?: CappedLog;
}

/** What a VM snapshot must match: QEMU's command line and the disks under the overlays. */
export interface VmShape {
  accel: VmAccel;
  cpus: number;
  memoryMiB: number;
  diskBytes: number;
  seccomp: boolean;
  basePath: string;
}

const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How long a boot may take to the helper's first bytes: emulation is several times slower. */
export function defaultBootTimeoutMs(accel: VmAccel): number {
  return accel === 'tcg' ? 240_000 : 60_000;
}

/** The last `bytes` of a file, or '' when it is missing (diagnostics). */
export async function fileTail(file: string, bytes = 2000): Promise<string> {
  const fh = await open(file, 'r').catch(() => undefined); // no file yet: no tail
  if (!fh) return '';
  try {
    const { size } = await fh.stat();
    const start = Math.max(0, size - bytes);
    const buf = Buffer.alloc(size - start);
    await fh.read(buf, 0, buf.length, start);
    return buf.toString('utf8');
  } finally {
    await fh.close();
  }
}

/** A sparse ext4 scratch disk of `bytes` (holds /workspace, /airlock, /tmp and $HOME). */
export async function createScratchDisk(file: string, bytes: number, env: NodeJS.ProcessEnv): Promise<void> {
  const fh = await open(file, 'wx', 0o600);
  await fh.truncate(bytes);
  await fh.close();
  // Lazy init: formatting a sparse file of any size takes ~0.1 s and writes a few MB.
  await runToolOk('mke2fs', ['-q', '-F', '-t', 'ext4', '-O', '^has_journal', '-m', '0', '-E', 'lazy_itable_init=1,nodiscard', '-L', 'airlock-scratch', file], 'Could not format the VM scratch disk', { timeoutMs: 60_000, env });
}

/** The qcow2 overlay of a run over a read-only raw disk (the base disk, or a snapshot's scratch disk). */
export function createOverlay(backing: string, file: string, what: string, env: NodeJS.ProcessEnv): Promise<unknown> {
  return runToolOk('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', backing, '-F', 'raw', file], `Could not create the VM ${what}`, { timeoutMs: 30_000, env });
}

/**
 * Starts QEMU for a VM of `shape` (`incoming`: waiting for a saved state instead of booting). Its
 * stderr is kept as a bounded tail, the helper's log port copied into a capped file.
 */
export function spawnVm(qemu: string, paths: Pick<VmPaths, 'kernel' | 'initramfs'>, runId: string, files: RunFiles, info: QemuSandboxInfo, shape: VmShape, incoming: boolean): LiveVm {
  const args = buildQemuArgs({
    runId,
    accel: shape.accel,
    cpus: shape.cpus,
    memoryMiB: shape.memoryMiB,
    kernel: paths.kernel,
    initramfs: paths.initramfs,
    files,
    // The guest's own wall clock backstop arrives with the run's configuration (after a restore too).
    deadlineSeconds: 0,
    seccomp: shape.seccomp,
    scratchFormat: incoming ? 'qcow2' : 'raw',
    incoming,
  });
  const child = spawn(qemu, args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: files.dir });
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  const vm: LiveVm = { runId, files, child, exited, stderrTail: '', info, helperLog: keepCappedLog(files.helperLogSocket, files.helperLog) };
  child.stderr?.on('data', (c: Buffer) => {
    vm.stderrTail = (vm.stderrTail + c.toString('utf8')).slice(-4000);
  });
  child.once('error', (e) => {
    vm.stderrTail += `\n${e.message}`;
  });
  return vm;
}

/** Connects to a Unix socket QEMU creates while it initialises; retries until then or the deadline. */
export async function connectWhenListening(vm: LiveVm, socketPath: string, deadline: number): Promise<net.Socket> {
  for (;;) {
    if (vm.child.exitCode !== null || vm.child.signalCode !== null) {
      throw new Error(`QEMU exited early (code ${vm.child.exitCode ?? vm.child.signalCode}): ${vm.stderrTail.trim() || 'no error output'}`);
    }
    if (Date.now() > deadline) throw new Error(`QEMU did not open ${path.basename(socketPath)} in time`);
    const socket = await new Promise<net.Socket | undefined>((resolve) => {
      const s = net.connect(socketPath);
      s.once('connect', () => resolve(s));
      s.once('error', () => {
        s.destroy();
        resolve(undefined);
      });
    });
    if (socket) return socket;
    await delay(25);
  }
}

/** Waits on the connected channel for the helper's first bytes (its hello), without consuming them. */
export async function waitForHelper(vm: LiveVm, socket: net.Socket, deadline: number): Promise<net.Socket> {
  const timeoutMs = Math.max(0, deadline - Date.now());
  const s = socket;
  // Wait for buffered bytes without consuming them ('readable', not 'data'), so the socket is
  // handed over untouched: once the listener is gone, the next 'data' listener starts the flow.
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`the helper did not answer within ${timeoutMs} ms (boot too slow? raise bootTimeoutMs)`)), Math.max(0, deadline - Date.now()));
    const onReadable = () => {
      if (s.readableLength > 0) finish();
    };
    const onClose = () => finish(new Error('the channel closed before the helper answered'));
    const onExit = () => finish(new Error(`the VM powered off during boot (QEMU exit ${vm.child.exitCode ?? vm.child.signalCode})`));
    function finish(err?: Error) {
      clearTimeout(timer);
      s.off('readable', onReadable);
      s.off('close', onClose);
      vm.child.off('exit', onExit);
      if (err) reject(err);
      else resolve();
    }
    s.on('readable', onReadable);
    s.once('close', onClose);
    vm.child.once('exit', onExit);
  }).catch((err: unknown) => {
    s.destroy();
    throw err;
  });
  // Let the stream leave paused mode (Node resets it on the next tick after the listener is removed).
  await new Promise((r) => setImmediate(r));
  return s;
}

/** The guest console's, the helper's and QEMU's last words, for a boot that failed. */
export async function bootDiagnostics(vm: LiveVm): Promise<string> {
  const [consoleTail, helperTail] = await Promise.all([fileTail(vm.files.console), fileTail(vm.files.helperLog)]);
  const parts: string[] = [];
  if (consoleTail.trim()) parts.push(`guest console (last lines):\n${consoleTail.trim()}`);
  if (helperTail.trim()) parts.push(`helper stderr (last lines):\n${helperTail.trim()}`);
  if (vm.stderrTail.trim()) parts.push(`qemu: ${vm.stderrTail.trim()}`);
  return parts.join('\n');
}

/** Kills a VM's QEMU (if still running) and waits for it; releases what this process held of it. */
export async function stopVm(vm: LiveVm): Promise<number | undefined> {
  if (vm.wallClock) clearTimeout(vm.wallClock);
  vm.firstSocket?.destroy();
  vm.helperLog?.dispose();
  vm.configSocket?.destroy();
  let killed: number | undefined;
  if (vm.child.exitCode === null && vm.child.signalCode === null && vm.child.pid) {
    vm.child.kill('SIGKILL');
    killed = vm.child.pid;
  }
  await vm.exited;
  return killed;
}
