import { readdir, readFile, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { APP_VERSION } from '../common/app-version';
import { ownerStatus } from '../common/process-alive';
import { debugLog } from '../common/debug-log';

/**
 * The stdio worker's door for later `airlock mcp` processes (docs/architecture.md §17, "Kept
 * sandboxes"). A worker listens on a Unix socket in `<home>/mcp/workers/` (a folder only the user
 * can enter); the relay of a later `airlock mcp` joins it instead of starting a worker of its own,
 * and relays its client's stdio over the socket. Each joined socket is one MCP connection with the
 * flags of the command that joined (its `--project` folders, `--allow-apply`). A worker stays while
 * it serves a connection or holds a kept sandbox, and goes when it has neither. This module is the
 * relay's side and stays light (`airlock mcp` starts per client); the worker's is `mcp-worker-door.ts`.
 */

/** What a joining relay sends first, one JSON line (checked by the worker, `mcp-worker-door.ts`). */
export interface JoinHeader {
  v: 1;
  build: string;
  /** Absolute folders of the joining command's `--project`. */
  projects: string[];
  allowApply: boolean;
}

/** The worker's answer once it took the connection; anything else (or nothing) means "start your own". */
export const JOIN_ACK = 'airlock-mcp-joined\n';
/** `<home>/mcp/workers/<pid>.json`: a worker's owner, socket and build. */
export interface WorkerRecord {
  owner: string;
  socket: string;
  build: string;
}

function isWorkerRecord(v: unknown): v is WorkerRecord {
  const r = v as Partial<WorkerRecord> | null;
  return typeof r?.owner === 'string' && typeof r.socket === 'string' && typeof r.build === 'string';
}

export function workersDir(home: string): string {
  return path.join(home, 'mcp', 'workers');
}

/**
 * The socket a worker of this process listens on, or undefined where none is made: Windows (a named
 * pipe's default access is wider than the user's own folder), or a home whose path is too long for
 * a Unix socket.
 */
export function workerSocketPath(home: string, pid = process.pid): string | undefined {
  if (process.platform === 'win32') return undefined;
  const socket = path.join(workersDir(home), `${pid}.sock`);
  return Buffer.byteLength(socket) <= 100 ? socket : undefined;
}

/** This build of Airlock: a worker serves relays of the same build only (an upgrade starts a fresh one). */
export async function buildId(): Promise<string> {
  const self = fileURLToPath(import.meta.url);
  const mtime = await stat(self).then((s) => s.mtimeMs, () => 0);
  return `${APP_VERSION} ${process.execPath} ${self} ${mtime}`;
}

/**
 * Joins a running worker of this build for one connection: a socket the worker took (the ack read),
 * or undefined when there is none to join (the caller starts a worker). Records and sockets of
 * workers that are gone are removed on the way.
 */
export async function joinWorker(home: string, header: Omit<JoinHeader, 'v' | 'build'>): Promise<net.Socket | undefined> {
  const build = await buildId();
  const dir = workersDir(home);
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!name.endsWith('.json')) continue;
    const file = path.join(dir, name);
    const record: unknown = await readFile(file, 'utf8').then((t) => JSON.parse(t) as unknown, () => undefined);
    if (!isWorkerRecord(record) || ownerStatus(record.owner) === 'gone') {
      await rm(file, { force: true }).catch(debugLog.swallow('mcpWorker.sweep.record'));
      await rm(file.replace(/\.json$/, '.sock'), { force: true }).catch(debugLog.swallow('mcpWorker.sweep.socket'));
      continue;
    }
    if (record.build !== build || ownerStatus(record.owner) !== 'running') continue;
    const socket = await tryJoin(record.socket, { v: 1, build, ...header });
    if (socket) return socket;
  }
  return undefined;
}

async function tryJoin(socketPath: string, header: JoinHeader): Promise<net.Socket | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect(socketPath);
    let got = '';
    const fail = () => {
      socket.destroy();
      resolve(undefined);
    };
    socket.once('error', fail);
    socket.once('close', fail);
    socket.once('connect', () => socket.write(`${JSON.stringify(header)}\n`));
    const onData = (chunk: Buffer) => {
      got += chunk.toString('latin1');
      if (got.length < JOIN_ACK.length) return;
      socket.off('data', onData);
      socket.off('error', fail);
      socket.off('close', fail);
      if (!got.startsWith(JOIN_ACK)) return fail();
      socket.pause();
      const rest = Buffer.from(got.slice(JOIN_ACK.length), 'latin1');
      if (rest.length) socket.unshift(rest);
      resolve(socket);
    };
    socket.on('data', onData);
  });
}

