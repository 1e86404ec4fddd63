/**
 * TCP forwarding inside the sandbox: listeners on 127.0.0.1 whose connections become channel
 * streams (a host service appears in the sandbox), and connections to sandbox ports opened by the host.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { Mux } from '../../../core/channel/mux';
import { ChannelDuplex, joinSocket, type StreamSink } from '../../../core/channel/channel-duplex';
import { HelperError } from './errors';

export interface StreamRegistry {
  register(streamId: number, sink: StreamSink): void;
  unregister(streamId: number): void;
  /** A new helper-side (even) stream id. */
  allocate(): number;
}


// Ports (0..65535 to listen, 1..65535 to connect) were checked on arrival with the request's one definition (protocol.ts).

export class TcpForwarding {
  private readonly servers = new Map<number, Server[]>();
  /** Forwarded streams not yet finished: the helper's side of the host's slot accounting (§4). */
  private readonly open = new Set<number>();

  constructor(
    private readonly mux: Mux,
    private readonly streams: StreamRegistry,
  ) {}

  async listen(listenerId: number, port: number): Promise<{ port: number }> {
    if (this.servers.has(listenerId)) throw new HelperError('CONFLICT', `listener ${listenerId} already exists`);
    const onConnection = (socket: Socket) => {
      const streamId = this.streams.allocate();
      this.mux.sendControl({ t: 'accept', listenerId, stream: streamId });
      this.bridge(streamId, socket);
      socket.resume();
    };
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
    return { port: actual };
  }

  /** Forwarded connections still open, in either direction. */
  get openStreams(): number {
    return this.open.size;
  }

  /** Joins a socket to a channel stream; the stream's one finish (ChannelDuplex) releases both entries. */
  private bridge(streamId: number, socket: Socket): ChannelDuplex {
    const duplex = new ChannelDuplex(this.mux, streamId, () => {
      this.open.delete(streamId);
      this.streams.unregister(streamId);
    });
    this.open.add(streamId);
    this.streams.register(streamId, duplex);
    joinSocket(duplex, socket);
    return duplex;
  }

  unlisten(listenerId: number): void {
    for (const server of this.servers.get(listenerId) ?? []) server.close();
    this.servers.delete(listenerId);
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
  }
}
