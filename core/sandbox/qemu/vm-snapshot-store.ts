import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import type net from 'node:net';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { AirlockError } from '../../../contracts/errors';
import { ChannelClient } from '../../channel/channel-client';
import { pathExists } from '../../common/path-exists';
import { bootDiagnostics, connectWhenListening, createOverlay, createScratchDisk, defaultBootTimeoutMs, spawnVm, type LiveVm, type QemuSandboxInfo, type VmShape } from './vm-boot';
import { configSocketOf } from './qemu-args';
import { runFiles, type VmPaths } from './vm-paths';
import { readOneFrame, saveVmState, snapshotFiles, snapshotKey, type SnapshotFiles } from './vm-snapshot';

/**
 * How many commands the helper runs before its state is saved (see warmHelper): over its first few
 * commands the guest's V8 compiles and optimises the helper's spawn and output paths, and under TCG
 * each new piece of machine code is translated again; with one `true` (format 3) a restored VM's
 * first command took 0.43–0.51 s, with these 0.28–0.36 s (its later ones ~0.09 s).
 */
const WARM_COMMANDS = 8;
/** Snapshots kept (each holds a guest's RAM): older image versions' and shapes' go. */
const SNAPSHOTS_KEPT = 3;

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
  const aged = await Promise.all(names.map(async (n) => ({ n, t: (await stat(path.join(root, n, 'snapshot.json')).catch(() => undefined))?.mtimeMs ?? 0 }))); // a snapshot without its record sorts oldest
  aged.sort((a, b) => b.t - a.t);
  for (const { n } of aged.slice(keep)) await rm(path.join(root, n), { recursive: true, force: true });
}

export interface VmSnapshotStoreOptions {
  qemu: string;
  /** The host's environment (qemu-img, mke2fs run with it), from the root. */
  env: NodeJS.ProcessEnv;
  paths: VmPaths;
  qemuVersion(): Promise<string>;
  bootTimeoutMs?: number;
  onProgress?: (message: string) => void;
}

/**
 * The VM snapshots of one driver (docs/architecture.md §8, `vm.ready`): one per base disk (image
 * id), VM shape and QEMU build, made on first use by booting a VM to the helper's hello, and shared
 * read-only by every run restored from it. One make per key at a time within this process; another
 * process making the same one meanwhile is tolerated (its copy wins).
 */
export class VmSnapshotStore {
  private readonly made = new Map<string, Promise<SnapshotFiles>>();

  constructor(private readonly o: VmSnapshotStoreOptions) {}

  /** The snapshot for this VM shape, made on first use. */
  async get(shape: VmShape): Promise<SnapshotFiles> {
    const key = await snapshotKey({ ...shape, kernel: this.o.paths.kernel, initramfs: this.o.paths.initramfs, qemuVersion: await this.o.qemuVersion() });
    let made = this.made.get(key);
    if (!made) {
      made = this.make(key, shape);
      this.made.set(key, made);
      made.catch(() => this.made.delete(key));
    }
    return made;
  }

  /**
   * Boots a VM of this shape to the helper's hello (no run, no configuration yet: the guest waits for
   * it), saves its state, and keeps what runs need: the state, the scratch disk the guest has
   * mounted, and the hello. Made in a private directory, then renamed into place.
   */
  private async make(key: string, shape: VmShape): Promise<SnapshotFiles> {
    const root = path.join(this.o.paths.assetsDir, 'snapshots');
    const final = snapshotFiles(path.join(root, key));
    if (await pathExists(final.meta)) return final;
    this.o.onProgress?.('making the VM snapshot (once per image version)');
    const t0 = performance.now();
    const buildId = `b-${randomBytes(4).toString('hex')}`;
    const files = runFiles(root, buildId);
    const info: QemuSandboxInfo = { id: buildId, runId: buildId, kind: 'qemu', state: 'starting', createdAt: new Date().toISOString(), accel: shape.accel, accelReason: '' };
    await mkdir(files.dir, { recursive: true, mode: 0o700 });
    let vm: LiveVm | undefined;
    const sockets: net.Socket[] = [];
    try {
      await Promise.all([createOverlay(shape.basePath, files.overlay, 'overlay disk', this.o.env), createScratchDisk(files.scratch, shape.diskBytes, this.o.env)]);
      vm = spawnVm(this.o.qemu, this.o.paths, buildId, files, info, shape, false);
      const deadline = Date.now() + (this.o.bootTimeoutMs ?? defaultBootTimeoutMs(shape.accel));
      const [channel, config] = await Promise.all([connectWhenListening(vm, files.channelSocket, deadline), connectWhenListening(vm, configSocketOf(files), deadline)]);
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
      await pruneSnapshots(root, SNAPSHOTS_KEPT);
      return final;
    } catch (err) {
      const detail = vm ? await bootDiagnostics(vm) : '';
      vm?.child.kill('SIGKILL');
      await vm?.exited;
      vm?.helperLog?.dispose();
      await rm(files.dir, { recursive: true, force: true });
      throw new AirlockError('SANDBOX_FAILED', `Could not make the VM snapshot: ${err instanceof Error ? err.message : String(err)}${detail ? `\n${detail}` : ''}`, { cause: err });
    } finally {
      for (const s of sockets) s.destroy();
    }
  }
}
