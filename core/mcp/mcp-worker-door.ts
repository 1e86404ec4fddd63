import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';
import { debugLog } from '../common/debug-log';
import { Emitter, type Event } from '../common/disposable';
import { PROCESS_OWNER } from '../common/process-alive';
import { createMcpConnection, type McpConnection, type McpDeps } from './mcp-server';
import { JOIN_ACK, workersDir, type JoinHeader } from './mcp-worker';

/** The worker's side of joining (docs/architecture.md §17, "Kept sandboxes"); the relay's is `mcp-worker.ts`. */

const JoinHeaderSchema = z.strictObject({
  v: z.literal(1),
  build: z.string().max(2000),
  projects: z.array(z.string().min(1).max(4096).refine((p) => path.isAbsolute(p), 'an absolute path')).max(100),
  allowApply: z.boolean(),
});
const HEADER_BYTES = 512 * 1024;

/** Records the worker so relays find it; dispose removes the record. */
export async function announceWorker(home: string, socket: string, build: string): Promise<{ dispose(): Promise<void> }> {
  await mkdir(workersDir(home), { recursive: true, mode: 0o700 });
  const file = path.join(workersDir(home), `${process.pid}.json`);
  await writeFile(file, JSON.stringify({ owner: PROCESS_OWNER, socket, build }), { mode: 0o600 });
  return {
    async dispose() {
      await rm(file, { force: true }).catch(debugLog.swallow('mcp.worker.record'));
      await rm(socket, { force: true }).catch(debugLog.swallow('mcp.worker.socket'));
    },
  };
}

/**
 * Reads a joining relay's header from a socket the worker accepted: the header and the socket
 * positioned after it, or undefined (the socket is then closed) when it is not a valid header.
 */
export async function readJoinHeader(socket: net.Socket): Promise<JoinHeader | undefined> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    const done = (header: JoinHeader | undefined) => {
      socket.off('data', onData);
      socket.off('close', onClose);
      if (!header) socket.destroy();
      resolve(header);
    };
    const onClose = () => done(undefined);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const nl = buf.indexOf(0x0a);
      if (nl < 0) {
        if (buf.length > HEADER_BYTES) done(undefined);
        return;
      }
      socket.pause();
      const rest = buf.subarray(nl + 1);
      if (rest.length) socket.unshift(rest);
      let value: unknown;
      try {
        value = JSON.parse(buf.subarray(0, nl).toString('utf8'));
      } catch {
        return done(undefined);
      }
      const parsed = JoinHeaderSchema.safeParse(value);
      done(parsed.success ? parsed.data : undefined);
    };
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/** The worker's listening door for joining relays; each joined socket is one MCP connection. */
export interface WorkerDoor {
  /** Joined connections being served. */
  readonly active: number;
  /** A connection joined or left. */
  readonly onDidChange: Event<void>;
  /** Stops taking joins and closes every joined connection (their sandboxes are wiped). */
  close(reason: string): Promise<void>;
}

/**
 * Listens on `socketPath` for relays of this build (a folder only the user can enter; the socket
 * itself 0600) and serves each as its own MCP connection with the flags its command was given.
 * `onJoin` runs for each join (the worker recovers what crashed processes left, as any start does);
 * the joined connection's tools wait for it, as a fresh start's wait for the core's recovery.
 */
export async function openWorkerDoor(opts: { home: string; socketPath: string; build: string; deps: Promise<McpDeps>; maxMessageBytes: number; onJoin?: () => Promise<void> }): Promise<WorkerDoor> {
  const changed = new Emitter<void>();
  const connections = new Map<McpConnection, net.Socket>();
  let closing = false;
  let active = 0;
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    if (closing) return void socket.destroy();
    socket.on('error', () => undefined);
    active += 1;
    changed.fire();
    void (async () => {
      let connection: McpConnection | undefined;
      try {
        const header = await readJoinHeader(socket);
        if (!header || header.build !== opts.build || closing) return;
        socket.write(JOIN_ACK);
        const recovered = opts.onJoin?.();
        connection = createMcpConnection(recovered ? opts.deps.then(async (d) => (await recovered, d)) : opts.deps, {}, { projects: header.projects, allowApply: header.allowApply });
        connections.set(connection, socket);
        const transport = new StdioServerTransport(socket, socket, { maxBufferSize: opts.maxMessageBytes });
        const gone = new Promise<void>((resolve) => {
          socket.once('end', () => resolve());
          socket.once('close', () => resolve());
          transport.onclose = () => resolve();
        });
        await connection.server.connect(transport);
        // The header was read in paused mode; a 'data' listener alone does not restart the flow.
        socket.resume();
        await gone;
        // The relay waits for the socket's end: by then this connection's sandboxes are wiped.
        await connection.close('the client disconnected');
        await transport.close().catch(debugLog.swallow('mcpWorkerDoor.transport.close'));
      } catch (err) {
        debugLog.note('mcp.worker.join', err);
      } finally {
        if (connection) connections.delete(connection);
        socket.end();
        active -= 1;
        changed.fire();
      }
    })();
  });
  await mkdir(path.dirname(opts.socketPath), { recursive: true, mode: 0o700 });
  await rm(opts.socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.socketPath, () => resolve());
  });
  await chmod(opts.socketPath, 0o600);
  const record = await announceWorker(opts.home, opts.socketPath, opts.build);
  return {
    get active() {
      return active;
    },
    onDidChange: changed.event,
    async close(reason) {
      if (closing) return;
      closing = true;
      await record.dispose();
      server.close();
      await Promise.all(
        [...connections].map(async ([c, socket]) => {
          await c.close(reason).catch(debugLog.swallow('mcpWorkerDoor.connection.close'));
          socket.end();
        }),
      );
    },
  };
}
