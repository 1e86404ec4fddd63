/**
 * TCP forwarding inside the sandbox: listeners on 127.0.0.1 whose connections become channel
 * streams (a host service appears in the sandbox), and connections to sandbox ports opened by the host.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { Mux } from '../../../core/channel/mux';
import { ChannelDuplex, joinSocket, type StreamSink } from '../../../core/channel/channel-duplex';
import { ACCEPT_WAIT_MS, IDLE_CLOSE_MS, MAX_WAITING_CONNECTIONS } from '../../../core/channel/protocol';
import { HelperError } from './errors';

export interface StreamRegistry {
  register(streamId: number, sink: StreamSink): void;
  unregister(streamId: number): void;
  /** A new helper-side (even) stream id. */
  allocate(): number;
}


// Ports (0..65535 to listen, 1..65535 to connect) were checked on arrival with the request's one definition (protocol.ts).

/** One accepted connection's activity, for closing idle ones while others wait (§4). */
interface Accepted {
  /** When a byte (or an END) last crossed, either way. */
  lastActive: number;
  /** The host's side spoke last: the client's turn, as between two requests on a keep-alive connection. */
  serverSpokeLast: boolean;
  /** Closes it: a FIN to the client, a reset to the host (which gives the slot back at once). */
  close(): void;
}

/**
 * One exposed host service's connections at its cap (docs/architecture.md §4): at most `limit`
 * accepted (each holds one of the host's slots until its stream is finished), the rest waiting in
 * order, paused and unread (the kernel holds their bytes, not the helper), for at most
 * ACCEPT_WAIT_MS. The channel is ordered and this count drops no earlier than the host's, so a
 * connection accepted here always finds a slot on the host: a busy client waits, it is not reset.
 *
 * With `closeIdle`, while any wait, the longest-idle accepted connection is closed for them, as a
 * busy server closes idle keep-alive sockets: only one whose server spoke last (a client that sent
 * a request and waits for the answer is never cut) and that carried nothing either way for
 * IDLE_CLOSE_MS. Nothing is closed while nobody waits.
 */
class ServiceSlots {
  private readonly accepted = new Set<Accepted>();
  private readonly waiting: Array<{ socket: Socket; timer: NodeJS.Timeout }> = [];
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly limit: number,
    private readonly accept: (socket: Socket) => Accepted,
    private readonly refuse: () => void,
    private readonly closeIdle: boolean,
    private readonly onClosedIdle: () => void,
  ) {}

  offer(socket: Socket): void {
    if (this.accepted.size < this.limit && this.waiting.length === 0) {
      this.accepted.add(this.accept(socket));
      return;
    }
    if (this.waiting.length >= MAX_WAITING_CONNECTIONS) {
      resetSocket(socket);
      this.refuse();
      return;
    }
    const entry = {
      socket,
      timer: setTimeout(() => {
        this.drop(entry);
        resetSocket(socket);
        this.refuse();
      }, ACCEPT_WAIT_MS),
    };
    // A client that gives up while waiting takes nothing with it.
    socket.once('close', () => this.drop(entry));
    socket.on('error', () => undefined);
    this.waiting.push(entry);
    this.sweep();
  }

  /** A slot was given back: the longest-waiting connection still there takes it. */
  release(conn: Accepted): void {
    if (!this.accepted.delete(conn)) return;
    while (this.accepted.size < this.limit && this.waiting.length > 0) {
      const entry = this.waiting.shift()!;
      clearTimeout(entry.timer);
      if (!entry.socket.destroyed) this.accepted.add(this.accept(entry.socket));
    }
    this.stopSweeping();
  }

  dispose(): void {
    this.stopSweeping(true);
    for (const entry of this.waiting.splice(0)) {
      clearTimeout(entry.timer);
      entry.socket.destroy();
    }
  }

  /**
   * Closes idle connections for the waiting ones (each close gives its slot to the first waiting),
   * and looks again shortly while any still wait: a connection becomes idle as time passes.
   */
  private sweep(): void {
    if (!this.closeIdle) return;
    const now = Date.now();
    while (this.waiting.length > 0) {
      let idlest: Accepted | undefined;
      for (const conn of this.accepted) {
        if (!conn.serverSpokeLast || now - conn.lastActive < IDLE_CLOSE_MS) continue;
        if (!idlest || conn.lastActive < idlest.lastActive) idlest = conn;
      }
      if (!idlest) break;
      idlest.close();
      // close() resets the stream, whose finish released the slot; never close the same one twice.
      this.accepted.delete(idlest);
      this.onClosedIdle();
    }
    if (this.waiting.length > 0 && !this.sweeper) {
      this.sweeper = setInterval(() => this.sweep(), IDLE_CLOSE_MS / 10);
    }
    this.stopSweeping();
  }

  private stopSweeping(always = false): void {
    if (this.sweeper && (always || this.waiting.length === 0)) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  private drop(entry: { socket: Socket; timer: NodeJS.Timeout }): void {
    clearTimeout(entry.timer);
    const i = this.waiting.indexOf(entry);
    if (i >= 0) this.waiting.splice(i, 1);
    this.stopSweeping();
  }
}

function resetSocket(socket: Socket): void {
  if (typeof socket.resetAndDestroy === 'function') socket.resetAndDestroy();
  else socket.destroy();
}

export class TcpForwarding {
  private readonly servers = new Map<number, Server[]>();
  private readonly slots = new Map<number, ServiceSlots>();
  /** Forwarded streams not yet finished: the helper's side of the host's slot accounting (§4). */
  private readonly open = new Set<number>();
  /** Idle connections closed for waiting ones (ServiceSlots), for `stats`. */
  closedIdle = 0;

  constructor(
    private readonly mux: Mux,
    private readonly streams: StreamRegistry,
  ) {}

  /**
   * `maxConnections`: the host's cap for this service; past it connections wait (ServiceSlots).
   * `closeIdle`: while they wait, idle connections of the service are closed for them.
   */
  async listen(listenerId: number, port: number, maxConnections?: number, closeIdle = false): Promise<{ port: number }> {
    if (this.servers.has(listenerId)) throw new HelperError('CONFLICT', `listener ${listenerId} already exists`);
    const slots = new ServiceSlots(
      maxConnections ?? Number.POSITIVE_INFINITY,
      (socket) => {
        const streamId = this.streams.allocate();
        this.mux.sendControl({ t: 'accept', listenerId, stream: streamId });
        const conn: Accepted = {
          lastActive: Date.now(),
          serverSpokeLast: false,
          close: () => {
            // Idle: nothing unread, so the client gets a FIN, as from a server closing a keep-alive
            // socket. The stream is reset, not ended: the host drops its side and its slot at once.
            socket.destroy();
            duplex.destroy();
          },
        };
        const duplex = this.bridge(streamId, socket, () => slots.release(conn));
        if (closeIdle) {
          const fromClient = (): void => {
            conn.lastActive = Date.now();
            conn.serverSpokeLast = false;
          };
          const fromServer = (): void => {
            conn.lastActive = Date.now();
            conn.serverSpokeLast = true;
          };
          socket.on('data', fromClient);
          socket.on('end', fromClient);
          duplex.on('data', fromServer);
          duplex.on('end', fromServer);
        }
        socket.resume();
        return conn;
      },
      () => this.mux.sendControl({ t: 'refused', listenerId, count: 1 }),
      closeIdle,
      () => (this.closedIdle += 1),
    );
    const onConnection = (socket: Socket) => slots.offer(socket);
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, onConnection);
    await new Promise<void>((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        reject(
          err.code === 'EADDRINUSE'
            ? new HelperError('CONFLICT', `127.0.0.1:${port} is already in use inside the sandbox; choose another port or 0`)
            : new HelperError('INTERNAL', `listen on 127.0.0.1:${port}: ${err.message}`),
        );
      });
      server.listen(port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    const actual = typeof address === 'object' && address ? address.port : port;
    const servers = [server];
    // `localhost` may resolve to ::1 first (Node 18 keeps the resolver's order): answer there too
    // when the sandbox has IPv6 loopback. Best effort; 127.0.0.1 is the documented address.
    const v6 = createServer({ allowHalfOpen: true, pauseOnConnect: true }, onConnection);
    await new Promise<void>((resolve) => {
      v6.once('error', () => resolve());
      v6.listen({ port: actual, host: '::1', ipv6Only: true }, () => {
        servers.push(v6);
        resolve();
      });
    });
    this.servers.set(listenerId, servers);
    this.slots.set(listenerId, slots);
    return { port: actual };
  }

  /** Forwarded connections still open, in either direction. */
  get openStreams(): number {
    return this.open.size;
  }

  /** Joins a socket to a channel stream; the stream's one finish (ChannelDuplex) releases both entries. */
  private bridge(streamId: number, socket: Socket, onFinished?: () => void): ChannelDuplex {
    const duplex = new ChannelDuplex(this.mux, streamId, () => {
      this.open.delete(streamId);
      this.streams.unregister(streamId);
      onFinished?.();
    });
    this.open.add(streamId);
    this.streams.register(streamId, duplex);
    joinSocket(duplex, socket);
    return duplex;
  }

  unlisten(listenerId: number): void {
    for (const server of this.servers.get(listenerId) ?? []) server.close();
    this.servers.delete(listenerId);
    this.slots.get(listenerId)?.dispose();
    this.slots.delete(listenerId);
  }

  async connect(streamId: number, port: number): Promise<void> {
    const socket = connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', (err: NodeJS.ErrnoException) => {
        reject(
          err.code === 'ECONNREFUSED'
            ? new HelperError('NOT_FOUND', `nothing listens on 127.0.0.1:${port} inside the sandbox (connection refused)`)
            : new HelperError('INTERNAL', `connect to 127.0.0.1:${port} in the sandbox: ${err.message}`),
        );
      });
    });
    this.bridge(streamId, socket);
  }

  dispose(): void {
    for (const servers of this.servers.values()) for (const server of servers) server.close();
    this.servers.clear();
    for (const slots of this.slots.values()) slots.dispose();
    this.slots.clear();
  }
}
