import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { PROCESS_OWNER } from '../../common/process-alive';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { AirlockError } from '../../../contracts/errors';
import { ChannelClient } from '../../channel/channel-client';
import { Emitter, type Event } from '../../common/disposable';
import type { ChannelStream, IsolationKind, SandboxDriver, SandboxEvent, SandboxInfo, SandboxSpec, WipeProof } from '../driver';
import { accelCacheFile, detectAccel, type AccelProbe, type VmAccel, type VmAccelChoice } from './accel';
import { ensureBaseDisk } from './base-disk';
import { keepCappedLog, type CappedLog } from './capped-log';
import { buildQemuArgs, configSocketOf } from './qemu-args';
import { qmpCommand } from './qmp';
import { runTool, runToolOk } from '../../common/run-tool';
import { isAlive, isRunQemu, processesMentioning, readPidfile, waitGone } from './vm-process';
import { isSafeRunId, MAX_SOCKET_PATH, runFiles, vmPaths, type RunFiles, type VmPaths } from './vm-paths';
import { configureGuest, loadVmState, readOneFrame, saveVmState, snapshotFiles, snapshotKey, type SnapshotFiles } from './vm-snapshot';
import { pathExists } from '../../common/path-exists';
import { readVmRunRecord, type VmRunRecord } from './vm-run-record';

export interface QemuDriverOptions {
  env?: NodeJS.ProcessEnv;
  /** Overrides of the asset / run directories (tests). */
  paths?: Partial<VmPaths>;
  /** Default `qemu-system-x86_64`. */
  qemuBinary?: string;
  /** The host's CPU architecture; default `process.arch`. Only x64 is supported (kernel, machine type, console). */
  hostArch?: string;
  /** Size of the per-run scratch disk holding /workspace, /airlock, /tmp and $HOME. Default 8 GiB (sparse). */
  diskBytes?: number;
  /** Wall clock limit of a VM; QEMU is killed after it (and the guest powers off by itself). Default 4 h; 0 = none. */
  wallClockMs?: number;
  /** How long create() waits for the helper's first bytes. Default 60 s with KVM/HVF, 240 s under emulation. */
  bootTimeoutMs?: number;
  /** Force an accelerator (tests); default: detected. */
  accel?: VmAccel;
  /** The user's `vmAccel` setting (`AIRLOCK_VM_ACCEL` in `env` wins over it); default `auto`: probe by booting. */
  accelSetting?: VmAccelChoice;
  /** Progress of the one-time base disk build. */
  onProgress?: (message: string) => void;
  /**
   * Start VMs by restoring a snapshot of a booted guest (made once per image version and VM shape)
   * instead of booting a kernel. Default true; `AIRLOCK_VM_SNAPSHOT=0` in `env` turns it off.
   */
  snapshots?: boolean;
}

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

interface LiveVm {
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
interface VmShape {
  accel: VmAccel;
  cpus: number;
  memoryMiB: number;
  diskBytes: number;
  seccomp: boolean;
  basePath: string;
}

const ID_PREFIX = 'qemu-';
const delay = (ms: number) => new Promise((r) => setTimeout(r, ms));


async function tail(file: string, bytes = 2000): Promise<string> {
  const fh = await open(file, 'r').catch(() => undefined);
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
async function createScratchDisk(file: string, bytes: number): Promise<void> {
  const fh = await open(file, 'wx', 0o600);
  await fh.truncate(bytes);
  await fh.close();
  // Lazy init: formatting a sparse file of any size takes ~0.1 s and writes a few MB.
  await runToolOk('mke2fs', ['-q', '-F', '-t', 'ext4', '-O', '^has_journal', '-m', '0', '-E', 'lazy_itable_init=1,nodiscard', '-L', 'airlock-scratch', file], 'Could not format the VM scratch disk', { timeoutMs: 60_000 });
}

/**
 * How many commands the helper runs before its state is saved (see warmHelper): over its first few
 * commands the guest's V8 compiles and optimises the helper's spawn and output paths, and under TCG
 * each new piece of machine code is translated again; with one `true` (format 3) a restored VM's
 * first command took 0.43–0.51 s, with these 0.28–0.36 s (its later ones ~0.09 s).
 */
const WARM_COMMANDS = 8;

/**
 * Runs a few commands (`true`, and `echo`, whose output takes the helper's stdout path) through the
 * helper on a connection whose hello was already read, then lets go of the client without ending
 * the connection: the helper stays connected and idle, as the snapshot needs.
 */
async function warmHelper(socket: net.Socket, hello: Buffer, timeoutMs: number): Promise<void> {
  const readable = new PassThrough();
  readable.write(hello);
  socket.pipe(readable);
  const writable = new PassThrough();
  writable.pipe(socket, { end: false });
  const client = await ChannelClient.connect({ readable, writable, close: () => undefined }, { helloTimeoutMs: timeoutMs });
  try {
    const timer = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`the helper did not run its warm-up commands within ${timeoutMs} ms`)), timeoutMs).unref());
    for (let i = 0; i < WARM_COMMANDS; i++) {
      const r = await Promise.race([client.run({ argv: i % 2 ? ['echo', 'warm'] : ['true'] }), timer]);
      if (r.exitCode !== 0) throw new Error(`the helper's warm-up command ${i + 1} failed (exit ${String(r.exitCode)})`);
    }
  } finally {
    writable.unpipe(socket);
    socket.unpipe(readable);
    client.dispose();
  }
}

/** Keeps the `keep` newest snapshots (by their metadata's age); older image versions' go. */
async function pruneSnapshots(root: string, keep: number): Promise<void> {
  const names = (await readdir(root).catch(() => [] as string[])).filter((n) => /^[0-9a-f]{20}$/.test(n));
  const aged = await Promise.all(names.map(async (n) => ({ n, t: (await stat(path.join(root, n, 'snapshot.json')).catch(() => undefined))?.mtimeMs ?? 0 })));
  aged.sort((a, b) => b.t - a.t);
  for (const { n } of aged.slice(keep)) await rm(path.join(root, n), { recursive: true, force: true });
}

/**
 * SandboxDriver that runs each sandbox in its own QEMU micro-VM (Linux; docs/architecture.md §4, issue 6).
 *
 * Per run, in `<runsDir>/<runId>/`: a qcow2 overlay over the image's read-only base disk (root, mounted
 * read-only in the guest), a scratch disk for everything writable, the channel socket, pidfile and
 * logs. The guest has no NIC; the channel (virtio-serial) carries everything, TCP forwards included.
 * `destroy` kills QEMU, deletes the directory and verifies that no process and no file remain.
 */
export class QemuDriver implements SandboxDriver {
  readonly kind: IsolationKind = 'qemu';
  private readonly emitter = new Emitter<SandboxEvent>();
  readonly onDidEvent: Event<SandboxEvent> = this.emitter.event;
  readonly paths: VmPaths;
  private readonly qemu: string;
  private readonly live = new Map<string, LiveVm>();
  private accelProbe: Promise<AccelProbe> | undefined;
  private seccompProbe: Promise<boolean> | undefined;
  private versionProbe: Promise<string> | undefined;
  private readonly snapshots = new Map<string, Promise<SnapshotFiles>>();

  constructor(private readonly opts: QemuDriverOptions = {}) {
    this.paths = vmPaths(opts.env, opts.paths);
    this.qemu = opts.qemuBinary ?? 'qemu-system-x86_64';
  }

  /** KVM/HVF or TCG, and why (cached). */
  accel(): Promise<AccelProbe> {
    if (this.opts.accel) return Promise.resolve({ accel: this.opts.accel, reason: this.opts.accel === 'tcg' ? 'software emulation chosen explicitly' : '' });
    this.accelProbe ??= detectAccel({
      env: this.opts.env ?? process.env,
      setting: this.opts.accelSetting,
      qemuBinary: this.qemu,
      kernel: this.paths.kernel,
      initramfs: this.paths.initramfs,
      cacheFile: accelCacheFile(this.paths.assetsDir),
    });
    return this.accelProbe;
  }

  private seccomp(): Promise<boolean> {
    this.seccompProbe ??= runTool(this.qemu, ['-help'], { timeoutMs: 15_000 }).then(
      (r) => r.stdout.toString().includes('-sandbox'),
      () => false,
    );
    return this.seccompProbe;
  }

  /** Throws VM_UNAVAILABLE naming what to install when QEMU or the assets are missing. */
  async checkAvailable(): Promise<void> {
    const hostArch = this.opts.hostArch ?? process.arch;
    if (hostArch !== 'x64') {
      // The assets (Debian's cloud-amd64 kernel), the q35 machine and the ttyS0 console are x86-64 only.
      throw new AirlockError(
        'VM_UNAVAILABLE',
        `VM isolation with QEMU needs an x86-64 Linux host; this one is ${hostArch}. Use container isolation (with gVisor where the engine has it) on this machine (docs/architecture.md §4).`,
      );
    }
    const r = await runTool(this.qemu, ['--version'], { timeoutMs: 15_000 }).catch(() => undefined);
    if (!r || r.code !== 0) {
      throw new AirlockError('VM_UNAVAILABLE', `QEMU (${this.qemu}) is not installed: run scripts/prepare-vm-assets.sh, or apt-get install qemu-system-x86 qemu-utils.`);
    }
    for (const f of [this.paths.kernel, this.paths.initramfs, this.paths.busybox]) {
      if (!(await pathExists(f))) {
        throw new AirlockError('VM_UNAVAILABLE', `The VM kernel/initramfs are not prepared (${f} is missing): run scripts/prepare-vm-assets.sh.`);
      }
    }
  }

  async create(spec: SandboxSpec): Promise<QemuSandboxInfo> {
    if (!isSafeRunId(spec.runId)) {
      throw new AirlockError('INVALID_INPUT', `run id '${spec.runId}' must be letters, digits, '.', '_' or '-' (at most 64).`);
    }
    if (spec.network !== 'none') {
      // QEMU's user-mode network would hand the guest the host's own loopback services (10.0.2.2 →
      // 127.0.0.1), which a container's 'open' network does not: refuse rather than widen quietly.
      throw new AirlockError('INVALID_INPUT', `VM isolation has no '${spec.network}' network: its guest has no network card, and QEMU's user-mode network would expose the host's loopback services. Use the 'none' or 'allowlist' policy with a VM, or container isolation for 'open'.`);
    }
    const files = runFiles(this.paths.runsDir, spec.runId);
    if (Buffer.byteLength(files.channelSocket) > MAX_SOCKET_PATH) {
      throw new AirlockError('INVALID_INPUT', `The VM run directory path is too long for a Unix socket (${files.channelSocket}); set AIRLOCK_VM_RUNS to a shorter directory.`);
    }
    if (this.live.has(spec.runId) || (await pathExists(files.dir))) {
      throw new AirlockError('CONFLICT', `A VM for run ${spec.runId} already exists; destroy it first.`);
    }
    await this.checkAvailable();
    const [probe, seccomp, base] = await Promise.all([this.accel(), this.seccomp(), ensureBaseDisk(spec.image, this.paths, this.opts.onProgress)]);
    try {
      return await this.boot(spec, files, probe, seccomp, base.path);
    } catch (err) {
      if (probe.accel === 'tcg' || !(err instanceof AirlockError) || err.kind !== 'SANDBOX_FAILED') throw err;
      // The probe's guest booted, yet this VM did not: try once more under emulation, and say so.
      const first = (err.message.split('\n')[0] ?? '').slice(0, 300);
      const retry = `the VM did not start under ${probe.accel.toUpperCase()} (${first}); started again under software emulation`;
      this.opts.onProgress?.(retry);
      // Later VMs of this process go straight to TCG.
      this.accelProbe = Promise.resolve({ accel: 'tcg', reason: `${probe.accel.toUpperCase()} failed to start a VM in this session: software emulation`, source: 'probe' });
      return this.boot(spec, files, { accel: 'tcg', reason: retry }, seccomp, base.path, retry);
    }
  }

  private async boot(spec: SandboxSpec, files: RunFiles, probe: AccelProbe, seccomp: boolean, basePath: string, accelRetry?: string): Promise<QemuSandboxInfo> {
    const diskBytes = this.opts.diskBytes ?? 8 * 1024 ** 3;
    const shape = { accel: probe.accel, cpus: Math.max(1, Math.floor(spec.limits.cpus)), memoryMiB: Math.floor(spec.limits.memoryBytes / (1024 * 1024)), diskBytes, seccomp, basePath };
    let snapshot: SnapshotFiles | undefined;
    let snapshotNote: string | undefined;
    if (this.snapshotsOn()) {
      snapshot = await this.snapshot(shape).catch((err: unknown) => {
        snapshotNote = `no VM snapshot (${err instanceof Error ? err.message.split('\n')[0] : String(err)}): booted cold`;
        this.opts.onProgress?.(snapshotNote);
        return undefined;
      });
    }
    await mkdir(files.dir, { recursive: true, mode: 0o700 });
    const createdAt = new Date().toISOString();
    const owner = PROCESS_OWNER;
    const record: VmRunRecord = { runId: spec.runId, image: spec.image, createdAt, accel: probe.accel, ...(accelRetry ? { accelRetry } : {}), owner };
    const id = `${ID_PREFIX}${spec.runId}`;
    const info: QemuSandboxInfo = {
      id,
      runId: spec.runId,
      kind: 'qemu',
      state: 'starting',
      createdAt,
      accel: probe.accel,
      accelReason: probe.reason,
      ...(accelRetry ? { accelRetry } : {}),
      startedFrom: snapshot ? 'snapshot' : 'boot',
      ...(snapshotNote ? { snapshotNote } : {}),
      owner,
    };
    let vm: LiveVm | undefined;
    try {
      await writeFile(files.record, JSON.stringify(record, null, 2), { mode: 0o600 });
      await Promise.all([
        runToolOk('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', basePath, '-F', 'raw', files.overlay], 'Could not create the VM overlay disk', { timeoutMs: 30_000 }),
        // Restored: the guest already has its scratch file system mounted; the run writes to its own overlay over it.
        snapshot
          ? runToolOk('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', snapshot.scratch, '-F', 'raw', files.scratch], 'Could not create the VM scratch overlay', { timeoutMs: 30_000 })
          : createScratchDisk(files.scratch, diskBytes),
      ]);
      const wallClockMs = this.opts.wallClockMs ?? 4 * 3600_000;
      vm = this.spawnVm(spec.runId, files, info, shape, !!snapshot);
      this.live.set(spec.runId, vm);
      this.emitter.fire({ type: 'created', runId: spec.runId, id });
      if (wallClockMs > 0) {
        const child = vm.child;
        vm.wallClock = setTimeout(() => child.kill('SIGKILL'), wallClockMs);
        vm.wallClock.unref();
      }
      const timeoutMs = this.opts.bootTimeoutMs ?? (probe.accel === 'tcg' ? 240_000 : 60_000);
      const deadline = Date.now() + timeoutMs;
      // Both connections exist before a restored guest runs, as they did when its state was saved:
      // the guest sees no disconnect, and its helper carries on where the snapshot left it.
      const [channel, config] = await Promise.all([this.connectWhenListening(vm, files.channelSocket, deadline), this.connectWhenListening(vm, configSocketOf(files), deadline)]);
      vm.configSocket = config;
      if (snapshot) {
        vm.firstSocket = channel;
        vm.hello = await readFile(snapshot.hello);
        // The log port too was connected when the state was saved.
        await vm.helperLog?.connected;
        await loadVmState(files.qmpSocket, snapshot.state, files.dir, Math.max(1000, deadline - Date.now()));
      } else {
        vm.firstSocket = await this.waitForHelper(vm, channel, deadline);
      }
      // The run's own seed (the guest kernel reseeds its RNG from it), deadline and id, after boot or restore.
      await configureGuest(config, { seed: randomBytes(32).toString('hex'), deadlineSeconds: wallClockMs > 0 ? Math.ceil(wallClockMs / 1000) + 60 : 0, runId: spec.runId }, Math.max(1000, deadline - Date.now()));
      config.destroy();
      vm.configSocket = undefined;
    } catch (err) {
      const detail = vm ? await this.bootDiagnostics(vm) : '';
      await this.destroy(spec.runId).catch(() => undefined);
      if (err instanceof AirlockError && err.kind !== 'SANDBOX_FAILED' && err.kind !== 'COMMAND_TIMEOUT') throw err;
      const msg = err instanceof Error ? err.message : String(err);
      throw new AirlockError('SANDBOX_FAILED', `The VM for run ${spec.runId} did not start: ${msg}${detail ? `\n${detail}` : ''}`, { cause: err });
    }
    info.state = 'running';
    this.emitter.fire({ type: 'started', runId: spec.runId, id });
    return { ...info };
  }

  private snapshotsOn(): boolean {
    const env = (this.opts.env ?? process.env).AIRLOCK_VM_SNAPSHOT;
    if (env !== undefined && env !== '') return env !== '0' && env.toLowerCase() !== 'false';
    return this.opts.snapshots ?? true;
  }

  private spawnVm(runId: string, files: RunFiles, info: QemuSandboxInfo, shape: VmShape, incoming: boolean): LiveVm {
    const args = buildQemuArgs({
      runId,
      accel: shape.accel,
      cpus: shape.cpus,
      memoryMiB: shape.memoryMiB,
      kernel: this.paths.kernel,
      initramfs: this.paths.initramfs,
      files,
      // The guest's own wall clock backstop arrives with the run's configuration (after a restore too).
      deadlineSeconds: 0,
      seccomp: shape.seccomp,
      scratchFormat: incoming ? 'qcow2' : 'raw',
      incoming,
    });
    const child = spawn(this.qemu, args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: files.dir });
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

  private qemuVersion(): Promise<string> {
    this.versionProbe ??= runTool(this.qemu, ['--version'], { timeoutMs: 15_000 }).then(
      (r) => (r.stdout.toString('utf8').split('\n')[0] ?? '').trim(),
      () => 'unknown',
    );
    return this.versionProbe;
  }

  /** The snapshot for this VM shape, made on first use (once per image version, shape and QEMU build). */
  private async snapshot(shape: VmShape): Promise<SnapshotFiles> {
    const key = await snapshotKey({ ...shape, kernel: this.paths.kernel, initramfs: this.paths.initramfs, qemuVersion: await this.qemuVersion() });
    let made = this.snapshots.get(key);
    if (!made) {
      made = this.makeSnapshot(key, shape);
      this.snapshots.set(key, made);
      made.catch(() => this.snapshots.delete(key));
    }
    return made;
  }

  /**
   * Boots a VM of this shape to the helper's hello (no run, no configuration yet: the guest waits for
   * it), saves its state, and keeps what runs need: the state, the scratch disk the guest has
   * mounted, and the hello. Made in a private directory, then renamed into place.
   */
  private async makeSnapshot(key: string, shape: VmShape): Promise<SnapshotFiles> {
    const root = path.join(this.paths.assetsDir, 'snapshots');
    const final = snapshotFiles(path.join(root, key));
    if (await pathExists(final.meta)) return final;
    this.opts.onProgress?.('making the VM snapshot (once per image version)');
    const t0 = performance.now();
    const buildId = `b-${randomBytes(4).toString('hex')}`;
    const files = runFiles(root, buildId);
    const info: QemuSandboxInfo = { id: buildId, runId: buildId, kind: 'qemu', state: 'starting', createdAt: new Date().toISOString(), accel: shape.accel, accelReason: '' };
    await mkdir(files.dir, { recursive: true, mode: 0o700 });
    let vm: LiveVm | undefined;
    const sockets: net.Socket[] = [];
    try {
      await Promise.all([
        runToolOk('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', shape.basePath, '-F', 'raw', files.overlay], 'Could not create the VM overlay disk', { timeoutMs: 30_000 }),
        createScratchDisk(files.scratch, shape.diskBytes),
      ]);
      vm = this.spawnVm(buildId, files, info, shape, false);
      const deadline = Date.now() + (this.opts.bootTimeoutMs ?? (shape.accel === 'tcg' ? 240_000 : 60_000));
      const [channel, config] = await Promise.all([this.connectWhenListening(vm, files.channelSocket, deadline), this.connectWhenListening(vm, configSocketOf(files), deadline)]);
      sockets.push(channel, config);
      const hello = await readOneFrame(channel, Math.max(1000, deadline - Date.now()));
      // Commands before saving: the helper loads what it loads lazily (process handling, output) and
      // its JIT warms up once here instead of in every restored run's first commands (WARM_COMMANDS).
      await warmHelper(channel, hello, Math.max(1000, deadline - Date.now()));
      await vm.helperLog?.connected;
      await saveVmState(files.qmpSocket, path.join(files.dir, 'vm.state'), files.dir);
      vm.child.kill('SIGKILL');
      await vm.exited;
      vm.helperLog?.dispose();
      await writeFile(path.join(files.dir, 'hello.bin'), hello, { mode: 0o400 });
      // Only the state, the scratch disk, the hello and the metadata stay.
      for (const f of [files.overlay, files.channelSocket, files.qmpSocket, configSocketOf(files), files.pidfile, files.helperLog, files.helperLogSocket, files.console, path.join(files.dir, 'mig.sock')]) await rm(f, { force: true });
      await writeFile(path.join(files.dir, 'snapshot.json'), JSON.stringify({ key, ...shape, madeAt: new Date().toISOString(), bootMs: Math.round(performance.now() - t0) }, null, 2), { mode: 0o400 });
      await mkdir(root, { recursive: true });
      await rename(files.dir, final.dir).catch(async (err: NodeJS.ErrnoException) => {
        // Another process made it meanwhile: use theirs.
        if (!(await pathExists(final.meta))) throw err;
        await rm(files.dir, { recursive: true, force: true });
      });
      await pruneSnapshots(root, 3);
      return final;
    } catch (err) {
      const detail = vm ? await this.bootDiagnostics(vm) : '';
      vm?.child.kill('SIGKILL');
      await vm?.exited;
      vm?.helperLog?.dispose();
      await rm(files.dir, { recursive: true, force: true });
      throw new AirlockError('SANDBOX_FAILED', `Could not make the VM snapshot: ${err instanceof Error ? err.message : String(err)}${detail ? `\n${detail}` : ''}`, { cause: err });
    } finally {
      for (const s of sockets) s.destroy();
    }
  }

  /** Connects to a Unix socket QEMU creates while it initialises; retries until then or the deadline. */
  private async connectWhenListening(vm: LiveVm, socketPath: string, deadline: number): Promise<net.Socket> {
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
  private async waitForHelper(vm: LiveVm, socket: net.Socket, deadline: number): Promise<net.Socket> {
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

  private async bootDiagnostics(vm: LiveVm): Promise<string> {
    const [consoleTail, helperTail] = await Promise.all([tail(vm.files.console), tail(vm.files.helperLog)]);
    const parts: string[] = [];
    if (consoleTail.trim()) parts.push(`guest console (last lines):\n${consoleTail.trim()}`);
    if (helperTail.trim()) parts.push(`helper stderr (last lines):\n${helperTail.trim()}`);
    if (vm.stderrTail.trim()) parts.push(`qemu: ${vm.stderrTail.trim()}`);
    return parts.join('\n');
  }

  async openChannel(sandboxId: string): Promise<ChannelStream> {
    const runId = sandboxId.startsWith(ID_PREFIX) ? sandboxId.slice(ID_PREFIX.length) : sandboxId;
    if (!isSafeRunId(runId)) throw new AirlockError('INVALID_INPUT', `'${sandboxId}' is not a QEMU sandbox id.`);
    const vm = this.live.get(runId);
    let socket = vm?.firstSocket;
    if (vm) vm.firstSocket = undefined;
    if (!socket) {
      // A later connection (after the first channel closed, or from another process): the guest
      // starts a fresh helper for it within a second.
      const files = runFiles(this.paths.runsDir, runId);
      const pid = vm?.child.pid ?? (await readPidfile(files.pidfile));
      if (!pid || !isAlive(pid)) {
        throw new AirlockError('SANDBOX_FAILED', `The VM of run ${runId} is not running; create a new sandbox.`);
      }
      socket = await new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect(files.channelSocket);
        s.once('connect', () => resolve(s));
        s.once('error', (e) => reject(new AirlockError('CHANNEL_CLOSED', `Could not connect to the VM of run ${runId}: ${e.message}`, { cause: e })));
      });
    }
    const s = socket;
    s.setNoDelay(true);
    let closed = false;
    // A restored guest's helper said hello before the snapshot was taken: replay it, then the socket.
    let readable: NodeJS.ReadableStream = s;
    const hello = vm?.hello;
    if (vm && hello) {
      vm.hello = undefined;
      const replay = new PassThrough();
      replay.write(hello);
      s.pipe(replay);
      s.once('close', () => replay.end());
      readable = replay;
    }
    return {
      readable,
      writable: s,
      close: () => {
        if (closed) return;
        closed = true;
        s.end();
        s.destroy();
      },
    };
  }

  /** The last bytes of the helper's stderr and the guest console (diagnostics; never part of the channel). */
  async logs(runId: string): Promise<{ console: string; helper: string }> {
    const files = runFiles(this.paths.runsDir, runId);
    const [c, h] = await Promise.all([tail(files.console, 8000), tail(files.helperLog, 8000)]);
    return { console: c, helper: h };
  }

  /** The per-run files (disks, sockets, logs) of a run, e.g. for a leak scan before the wipe. */
  runFiles(runId: string): RunFiles {
    if (!isSafeRunId(runId)) throw new AirlockError('INVALID_INPUT', `'${runId}' is not a run id.`);
    return runFiles(this.paths.runsDir, runId);
  }

  /**
   * Writes the guest's whole RAM to `outFile` (ELF core, QMP `dump-guest-memory`), for the key canary
   * test: what the VM holds in memory can be searched like its disks. The VM keeps running.
   */
  async dumpGuestMemory(runId: string, outFile: string): Promise<void> {
    const files = this.runFiles(runId);
    await qmpCommand(files.qmpSocket, 'dump-guest-memory', { paging: false, protocol: `file:${outFile}` }, 10 * 60_000);
  }

  async destroy(runId: string): Promise<WipeProof> {
    const t0 = performance.now();
    if (!isSafeRunId(runId)) throw new AirlockError('INVALID_INPUT', `'${runId}' is not a run id.`);
    const files = runFiles(this.paths.runsDir, runId);
    const removed: string[] = [];
    const vm = this.live.get(runId);
    if (vm) {
      if (vm.wallClock) clearTimeout(vm.wallClock);
      vm.firstSocket?.destroy();
      vm.helperLog?.dispose();
      vm.configSocket?.destroy();
      if (vm.child.exitCode === null && vm.child.signalCode === null && vm.child.pid) {
        vm.child.kill('SIGKILL');
        removed.push(`process:${vm.child.pid}`);
      }
      await vm.exited;
    }
    // Not started by this process (a crash, another host process): find QEMU by its pidfile.
    const pid = await readPidfile(files.pidfile);
    if (pid && pid !== vm?.child.pid && (await isRunQemu(pid, files.dir))) {
      try {
        process.kill(pid, 'SIGKILL');
        removed.push(`process:${pid}`);
      } catch {
        // Already gone.
      }
      await waitGone(pid, 10_000);
    }
    if (await pathExists(files.dir)) {
      const names = await readdir(files.dir).catch(() => [] as string[]);
      await rm(files.dir, { recursive: true, force: true, maxRetries: 3 });
      removed.push(...names.map((n) => `file:${runId}/${n}`), `dir:${files.dir}`);
    }
    this.live.delete(runId);
    const leftovers = await this.leftovers(runId);
    const proof: WipeProof = { runId, removed, leftovers, durationMs: performance.now() - t0, verifiedAt: new Date().toISOString() };
    this.emitter.fire({ type: 'destroyed', runId, proof });
    return proof;
  }

  /** What of the run still exists: its directory, or any process naming it. Empty = verified gone. */
  async leftovers(runId: string): Promise<string[]> {
    const files = runFiles(this.paths.runsDir, runId);
    const out: string[] = [];
    if (await pathExists(files.dir)) out.push(`dir:${files.dir}`);
    for (const pid of await processesMentioning(`${files.dir}/`)) out.push(`process:${pid}`);
    return out;
  }

  async list(): Promise<QemuSandboxInfo[]> {
    const names = await readdir(this.paths.runsDir).catch(() => [] as string[]);
    const out: QemuSandboxInfo[] = [];
    for (const runId of names) {
      if (!isSafeRunId(runId)) continue;
      const files = runFiles(this.paths.runsDir, runId);
      const st = await stat(files.dir).catch(() => undefined);
      if (!st?.isDirectory()) continue;
      const { record, problem } = await readVmRunRecord(files.record);
      const pid = await readPidfile(files.pidfile);
      const running = pid !== undefined && (await isRunQemu(pid, files.dir));
      const live = this.live.get(runId);
      out.push({
        id: `${ID_PREFIX}${runId}`,
        runId,
        kind: 'qemu',
        state: live?.info.state === 'starting' ? 'starting' : running ? 'running' : 'exited',
        createdAt: record?.createdAt ?? st.mtime.toISOString(),
        accel: record?.accel ?? 'tcg',
        accelReason: live?.info.accelReason ?? '',
        ...(record?.accelRetry ? { accelRetry: record.accelRetry } : {}),
        ...(record?.owner ? { owner: record.owner } : {}),
        ...(problem ? { recordProblem: problem } : {}),
      });
    }
    return out;
  }

  /**
   * Crash reaping (like the Docker reaper): destroys every VM of this driver that this process did
   * not start and that `isLive` does not claim, e.g. left by a crashed app. Returns the wipe proofs.
   */
  async reap(isLive: (runId: string) => boolean = () => false): Promise<WipeProof[]> {
    const proofs: WipeProof[] = [];
    for (const sb of await this.list()) {
      if (this.live.has(sb.runId) || isLive(sb.runId)) continue;
      const proof = await this.destroy(sb.runId);
      this.emitter.fire({ type: 'reaped', runId: sb.runId, id: sb.id });
      proofs.push(proof);
    }
    return proofs;
  }

  /** Kills every VM this process started (app quit); files are left for destroy()/reap(). */
  dispose(): void {
    for (const vm of this.live.values()) {
      if (vm.wallClock) clearTimeout(vm.wallClock);
      vm.firstSocket?.destroy();
      vm.helperLog?.dispose();
      vm.child.kill('SIGKILL');
    }
    this.emitter.dispose();
  }
}
