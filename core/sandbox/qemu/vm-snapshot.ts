import { createReadStream, createWriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { AirlockError } from '../../../contracts/errors';
import { HEADER_BYTES } from '../../channel/protocol';
import { qmpCommand } from './qmp';
import { sha256Hex } from '../../common/sha256';

/**
 * A VM snapshot (docs/architecture.md §8, `vm.ready`): one VM booted to the helper's
 * hello and paused, its state saved once per image version and VM shape. Every file is read-only
 * once made and shared by the runs restored from it; each run writes only to its own overlays.
 */
export interface SnapshotFiles {
  dir: string;
  /** QEMU's migration stream (RAM + device state), loaded with `migrate-incoming`. */
  state: string;
  /** The scratch disk as the paused guest knows it: each run gets a qcow2 overlay over it. */
  scratch: string;
  /** The helper's hello frame, already delivered when the state was saved: replayed to each run's host. */
  hello: string;
  meta: string;
}

export function snapshotFiles(dir: string): SnapshotFiles {
  return { dir, state: path.join(dir, 'vm.state'), scratch: path.join(dir, 'scratch.img'), hello: path.join(dir, 'hello.bin'), meta: path.join(dir, 'snapshot.json') };
}

/** Bump when what a snapshot holds changes (guest init protocol, devices), so old ones are not restored. */
const SNAPSHOT_FORMAT = 'airlock-vm-snapshot/4';

async function stamp(file: string): Promise<string> {
  const st = await stat(file).catch(() => undefined); // the file may not exist
  return st ? `${st.size}:${Math.floor(st.mtimeMs)}` : 'missing';
}

/**
 * Everything a restored VM must match exactly: the devices, memory and CPUs on QEMU's command line,
 * the disks under the overlays, the kernel, QEMU's build and the accelerator.
 */
export async function snapshotKey(p: { basePath: string; kernel: string; initramfs: string; qemuVersion: string; accel: string; cpus: number; memoryMiB: number; diskBytes: number; seccomp: boolean }): Promise<string> {
  const parts = { format: SNAPSHOT_FORMAT, ...p, base: await stamp(p.basePath), kernelStamp: await stamp(p.kernel), initramfsStamp: await stamp(p.initramfs) };
  return sha256Hex(JSON.stringify(parts)).slice(0, 20);
}

async function waitMigration(qmpSocket: string, query: 'query-migrate' | 'query-status', done: (r: Record<string, unknown>) => boolean | string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = (await qmpCommand(qmpSocket, query, undefined, 30_000)) as Record<string, unknown>;
    const verdict = done(r);
    if (verdict === true) return;
    if (typeof verdict === 'string') throw new AirlockError('SANDBOX_FAILED', verdict);
    if (Date.now() > deadline) throw new AirlockError('COMMAND_TIMEOUT', `the VM state transfer did not finish within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Pauses the VM and writes its state to `outFile` (QMP `stop` + `migrate` to a Unix socket this
 * process serves in `dir`: QEMU's seccomp sandbox forbids `exec:` migration). The VM stays paused.
 */
export async function saveVmState(qmpSocket: string, outFile: string, dir: string, timeoutMs = 600_000): Promise<void> {
  const sock = path.join(dir, 'mig.sock');
  const server = net.createServer();
  const received = new Promise<void>((resolve, reject) => {
    server.once('connection', (conn) => {
      pipeline(conn, createWriteStream(outFile, { mode: 0o600 })).then(resolve, reject);
    });
    server.once('error', reject);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(sock, () => resolve());
  });
  try {
    await qmpCommand(qmpSocket, 'stop');
    await qmpCommand(qmpSocket, 'migrate', { uri: `unix:${sock}` });
    await waitMigration(qmpSocket, 'query-migrate', (r) => (r.status === 'completed' ? true : r.status === 'failed' || r.status === 'cancelled' ? `saving the VM state failed: ${String(r['error-desc'] ?? r.status)}` : false), timeoutMs);
    await received;
  } finally {
    server.close();
  }
}

/**
 * Feeds a saved state into a QEMU started with `-incoming defer` (QMP `migrate-incoming` on a Unix
 * socket in `dir`), waits for the transfer to complete and resumes the guest.
 */
export async function loadVmState(qmpSocket: string, stateFile: string, dir: string, timeoutMs = 120_000): Promise<void> {
  const sock = path.join(dir, 'in.sock');
  await qmpCommand(qmpSocket, 'migrate-incoming', { uri: `unix:${sock}` });
  const conn = await new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect(sock);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
  await pipeline(createReadStream(stateFile), conn);
  await waitMigration(qmpSocket, 'query-migrate', (r) => (r.status === 'completed' ? true : r.status === 'failed' || r.status === 'cancelled' ? `restoring the VM state failed: ${String(r['error-desc'] ?? r.status)}` : false), timeoutMs);
  // The state was saved from a paused VM, so it arrives paused: run it.
  await qmpCommand(qmpSocket, 'cont');
}

/** Reads exactly one channel frame (the helper's hello) from `socket`, leaving nothing else consumed. */
export function readOneFrame(socket: net.Socket, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => finish(new Error(`the helper did not say hello within ${timeoutMs} ms`)), timeoutMs);
    let header: Buffer | undefined;
    const onReadable = () => {
      if (!header) {
        header = socket.read(HEADER_BYTES) as Buffer | null ?? undefined;
        if (!header) return;
      }
      const length = header.readUInt32BE(0) - 5;
      if (length < 0 || length > 64 * 1024) return finish(new Error('the helper sent a malformed hello'));
      const body = length === 0 ? Buffer.alloc(0) : (socket.read(length) as Buffer | null);
      if (!body) return;
      finish(undefined, Buffer.concat([header, body]));
    };
    const onClose = () => finish(new Error('the channel closed before the helper said hello'));
    function finish(err?: Error, frame?: Buffer) {
      clearTimeout(timer);
      socket.off('readable', onReadable);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(frame as Buffer);
    }
    socket.on('readable', onReadable);
    socket.once('close', onClose);
    onReadable();
  });
}

/** What a run tells its guest after boot or restore (guest-init.sh `configure`). */
export interface GuestConfig {
  /** 32 random bytes, hex: mixed into the guest kernel's pool, which is then reseeded. */
  seed: string;
  /** Guest-side wall clock backstop in seconds; 0 = none. */
  deadlineSeconds: number;
  runId: string;
}

/** Sends the run's configuration on the configuration port and waits for the guest's `ok`. */
export function configureGuest(socket: net.Socket, c: GuestConfig, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let answer = '';
    const timer = setTimeout(() => finish(new Error(`the guest did not take its configuration within ${timeoutMs} ms`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      // Bounded: the guest is the sandbox.
      answer = (answer + chunk.toString('utf8')).slice(0, 2000);
      const nl = answer.indexOf('\n');
      if (nl < 0) return;
      const line = answer.slice(0, nl).trim();
      if (line === 'ok') finish();
      else finish(new Error(`the guest refused its configuration: ${line.replace(/[^\x20-\x7e]/g, '?').slice(0, 300)}`));
    };
    const onClose = () => finish(new Error('the configuration port closed before the guest answered'));
    function finish(err?: Error) {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve();
    }
    socket.on('data', onData);
    socket.once('close', onClose);
    socket.write(`seed=${c.seed} deadline=${Math.max(0, Math.floor(c.deadlineSeconds))} run=${c.runId}\n`);
  });
}
