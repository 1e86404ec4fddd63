import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { PROCESS_OWNER } from '../../common/process-alive';
import { AirlockError } from '../../../contracts/errors';
import { Emitter, type Event } from '../../common/disposable';
import type { ChannelStream, IsolationKind, SandboxDriver, SandboxEvent, SandboxSpec, WipeProof } from '../driver';
import { accelCacheFile, detectAccel, type AccelProbe, type VmAccel, type VmAccelChoice } from './accel';
import type { Engine } from '../docker/engine';
import { ensureBaseDisk } from './base-disk';
import { configSocketOf } from './qemu-args';
import { qmpCommand } from './qmp';
import { runTool } from '../../common/run-tool';
import { isSafeRunId, MAX_SOCKET_PATH, runFiles, vmPaths, type RunFiles, type VmPaths } from './vm-paths';
import { configureGuest, loadVmState, type SnapshotFiles } from './vm-snapshot';
import { pathExists } from '../../common/path-exists';
import type { VmRunRecord } from './vm-run-record';
import { bootDiagnostics, connectWhenListening, createOverlay, createScratchDisk, defaultBootTimeoutMs, fileTail, spawnVm, stopVm, waitForHelper, type LiveVm, type QemuSandboxInfo, type VmShape } from './vm-boot';
import { VmSnapshotStore } from './vm-snapshot-store';
import { openVmChannel } from './vm-channel';
import { listVms, QEMU_ID_PREFIX, removeVmRun, vmLeftovers } from './vm-inventory';
import { debugLog } from '../../common/debug-log';

export type { QemuSandboxInfo } from './vm-boot';

export interface QemuDriverOptions {
  /** The engine that holds the sandbox images (the one the settings chose): each base disk is exported from it. */
  engine: () => Promise<Engine>;
  /** The host's environment (QEMU and its tools run with it; `AIRLOCK_VM_*`), from the root. */
  env: NodeJS.ProcessEnv;
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

/**
 * SandboxDriver that runs each sandbox in its own QEMU micro-VM (Linux; docs/architecture.md §4, issue 6).
 *
 * Per run, in `<runsDir>/<runId>/`: a qcow2 overlay over the image's read-only base disk (root, mounted
 * read-only in the guest; Airlock's image or a project environment's derived image, §16), a scratch
 * disk for everything writable, the channel socket, pidfile and logs. The guest has no NIC; the
 * channel (virtio-serial) carries everything, TCP forwards included. `destroy` kills QEMU, deletes
 * the directory and verifies that no process and no file remain. This class decides what to start
 * and when to wipe; booting, snapshots, the channel and the inventory are its own modules (§4,
 * "The QEMU driver's parts").
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
  private readonly snapshots: VmSnapshotStore;

  constructor(private readonly opts: QemuDriverOptions) {
    this.paths = vmPaths(opts.env, opts.paths);
    this.qemu = opts.qemuBinary ?? 'qemu-system-x86_64';
    this.snapshots = new VmSnapshotStore({ qemu: this.qemu, env: opts.env, paths: this.paths, qemuVersion: () => this.qemuVersion(), ...(opts.bootTimeoutMs !== undefined ? { bootTimeoutMs: opts.bootTimeoutMs } : {}), ...(opts.onProgress ? { onProgress: opts.onProgress } : {}) });
  }

  /** KVM/HVF or TCG, and why (cached). */
  accel(): Promise<AccelProbe> {
    if (this.opts.accel) return Promise.resolve({ accel: this.opts.accel, reason: this.opts.accel === 'tcg' ? 'software emulation chosen explicitly' : '' });
    this.accelProbe ??= detectAccel({
      env: this.opts.env,
      setting: this.opts.accelSetting,
      qemuBinary: this.qemu,
      kernel: this.paths.kernel,
      initramfs: this.paths.initramfs,
      cacheFile: accelCacheFile(this.paths.assetsDir),
    });
    return this.accelProbe;
  }

  private seccomp(): Promise<boolean> {
    this.seccompProbe ??= runTool(this.qemu, ['-help'], { timeoutMs: 15_000, env: this.opts.env }).then(
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
    const r = await runTool(this.qemu, ['--version'], { timeoutMs: 15_000, env: this.opts.env }).catch(() => undefined); // a missing QEMU is the error thrown below
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
    const [probe, seccomp, base] = await Promise.all([this.accel(), this.seccomp(), this.opts.engine().then((engine) => ensureBaseDisk(spec.image, this.paths, engine, this.opts.env, this.opts.onProgress))]);
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
    const shape: VmShape = { accel: probe.accel, cpus: Math.max(1, Math.floor(spec.limits.cpus)), memoryMiB: Math.floor(spec.limits.memoryBytes / (1024 * 1024)), diskBytes, seccomp, basePath };
    let snapshot: SnapshotFiles | undefined;
    let snapshotNote: string | undefined;
    if (this.snapshotsOn()) {
      snapshot = await this.snapshots.get(shape).catch((err: unknown) => {
        snapshotNote = `no VM snapshot (${err instanceof Error ? err.message.split('\n')[0] : String(err)}): booted cold`;
        this.opts.onProgress?.(snapshotNote);
        return undefined;
      });
    }
    await mkdir(files.dir, { recursive: true, mode: 0o700 });
    const createdAt = new Date().toISOString();
    const owner = PROCESS_OWNER;
    const record: VmRunRecord = { runId: spec.runId, image: spec.image, createdAt, accel: probe.accel, ...(accelRetry ? { accelRetry } : {}), owner };
    const id = `${QEMU_ID_PREFIX}${spec.runId}`;
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
        createOverlay(basePath, files.overlay, 'overlay disk', this.opts.env),
        // Restored: the guest already has its scratch file system mounted; the run writes to its own overlay over it.
        snapshot
          ? createOverlay(snapshot.scratch, files.scratch, 'scratch overlay', this.opts.env)
          : createScratchDisk(files.scratch, diskBytes, this.opts.env),
      ]);
      const wallClockMs = this.opts.wallClockMs ?? 4 * 3600_000;
      vm = spawnVm(this.qemu, this.paths, spec.runId, files, info, shape, !!snapshot);
      this.live.set(spec.runId, vm);
      this.emitter.fire({ type: 'created', runId: spec.runId, id });
      if (wallClockMs > 0) {
        const child = vm.child;
        vm.wallClock = setTimeout(() => child.kill('SIGKILL'), wallClockMs);
        vm.wallClock.unref();
      }
      const timeoutMs = this.opts.bootTimeoutMs ?? defaultBootTimeoutMs(probe.accel);
      const deadline = Date.now() + timeoutMs;
      // Both connections exist before a restored guest runs, as they did when its state was saved:
      // the guest sees no disconnect, and its helper carries on where the snapshot left it.
      const [channel, config] = await Promise.all([connectWhenListening(vm, files.channelSocket, deadline), connectWhenListening(vm, configSocketOf(files), deadline)]);
      vm.configSocket = config;
      if (snapshot) {
        vm.firstSocket = channel;
        vm.hello = await readFile(snapshot.hello);
        // The log port too was connected when the state was saved.
        await vm.helperLog?.connected;
        await loadVmState(files.qmpSocket, snapshot.state, files.dir, Math.max(1000, deadline - Date.now()));
      } else {
        vm.firstSocket = await waitForHelper(vm, channel, deadline);
      }
      // The run's own seed (the guest kernel reseeds its RNG from it), deadline and id, after boot or restore.
      await configureGuest(config, { seed: randomBytes(32).toString('hex'), deadlineSeconds: wallClockMs > 0 ? Math.ceil(wallClockMs / 1000) + 60 : 0, runId: spec.runId }, Math.max(1000, deadline - Date.now()));
      config.destroy();
      vm.configSocket = undefined;
    } catch (err) {
      const detail = vm ? await bootDiagnostics(vm) : '';
      await this.destroy(spec.runId).catch(debugLog.swallow('qemu.create.cleanup'));
      if (err instanceof AirlockError && err.kind !== 'SANDBOX_FAILED' && err.kind !== 'COMMAND_TIMEOUT') throw err;
      const msg = err instanceof Error ? err.message : String(err);
      throw new AirlockError('SANDBOX_FAILED', `The VM for run ${spec.runId} did not start: ${msg}${detail ? `\n${detail}` : ''}`, { cause: err });
    }
    info.state = 'running';
    this.emitter.fire({ type: 'started', runId: spec.runId, id });
    return { ...info };
  }

  private snapshotsOn(): boolean {
    const env = this.opts.env.AIRLOCK_VM_SNAPSHOT;
    if (env !== undefined && env !== '') return env !== '0' && env.toLowerCase() !== 'false';
    return this.opts.snapshots ?? true;
  }

  private qemuVersion(): Promise<string> {
    this.versionProbe ??= runTool(this.qemu, ['--version'], { timeoutMs: 15_000, env: this.opts.env }).then(
      (r) => (r.stdout.toString('utf8').split('\n')[0] ?? '').trim(),
      () => 'unknown',
    );
    return this.versionProbe;
  }

  async openChannel(sandboxId: string): Promise<ChannelStream> {
    const runId = sandboxId.startsWith(QEMU_ID_PREFIX) ? sandboxId.slice(QEMU_ID_PREFIX.length) : sandboxId;
    if (!isSafeRunId(runId)) throw new AirlockError('INVALID_INPUT', `'${sandboxId}' is not a QEMU sandbox id.`);
    return openVmChannel(runId, runFiles(this.paths.runsDir, runId), this.live.get(runId));
  }

  /** The last bytes of the helper's stderr and the guest console (diagnostics; never part of the channel). */
  async logs(runId: string): Promise<{ console: string; helper: string }> {
    const files = runFiles(this.paths.runsDir, runId);
    const [c, h] = await Promise.all([fileTail(files.console, 8000), fileTail(files.helperLog, 8000)]);
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
    const killed = vm ? await stopVm(vm) : undefined;
    if (killed) removed.push(`process:${killed}`);
    // Not started by this process (a crash, another host process): found by its pidfile.
    removed.push(...(await removeVmRun(runId, files, this.opts.env, vm?.child.pid)));
    this.live.delete(runId);
    const leftovers = await this.leftovers(runId);
    const proof: WipeProof = { runId, removed, leftovers, durationMs: performance.now() - t0, verifiedAt: new Date().toISOString() };
    this.emitter.fire({ type: 'destroyed', runId, proof });
    return proof;
  }

  /** What of the run still exists: its directory, or any process naming it. Empty = verified gone. */
  leftovers(runId: string): Promise<string[]> {
    return vmLeftovers(runFiles(this.paths.runsDir, runId), this.opts.env);
  }

  list(): Promise<QemuSandboxInfo[]> {
    return listVms(this.paths.runsDir, this.live, this.opts.env);
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
