import net from 'node:net';
import type { Duplex } from 'node:stream';
import { AirlockError } from '../../contracts/errors';
import { Emitter, type Disposable, type Event } from '../common/disposable';

/** What publishing needs from a sandbox channel (ChannelClient satisfies it). */
export interface SandboxPortConnector {
  connectToSandboxPort(port: number): Promise<Duplex>;
}

/** A sandbox port published on the host. Only ever bound to 127.0.0.1. */
export interface PublishedPort extends Disposable {
  readonly sandboxPort: number;
  readonly hostPort: number;
  /** `http://127.0.0.1:<hostPort>/` — what the UI shows as a link. */
  readonly url: string;
  /** Connections currently piped. */
  readonly activeConnections: number;
  /** Stops listening and cuts open connections; resolves when the listener is closed. */
  close(): Promise<void>;
}

function checkSandboxPort(port: unknown): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new AirlockError('INVALID_INPUT', `a sandbox port must be an integer 1-65535 (got ${String(port)}), e.g. --publish 3000`);
  }
  return port;
}

/**
 * Publishes `sandboxPort` (something listening on 127.0.0.1 inside the sandbox) on a random port of
 * the host's 127.0.0.1 — never another interface. Each accepted connection becomes one channel
 * stream to the sandbox port; when nothing listens there, the connection is closed.
 */
export async function publishPort(channel: SandboxPortConnector, sandboxPort: number): Promise<PublishedPort> {
  const port = checkSandboxPort(sandboxPort);
  const open = new Set<net.Socket | Duplex>();
  let closed = false;
  const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, (socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    socket.on('error', () => socket.destroy());
    channel.connectToSandboxPort(port).then(
      (remote) => {
        if (socket.destroyed || closed) {
          remote.destroy();
          return;
        }
        open.add(remote);
        remote.once('close', () => {
          open.delete(remote);
          socket.end();
        });
        remote.on('error', () => socket.destroy());
        socket.once('close', () => remote.destroy());
        socket.pipe(remote);
        remote.pipe(socket);
        socket.resume();
      },
      () => socket.destroy(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // 127.0.0.1 explicitly: never 0.0.0.0 or ::, so nothing on the LAN can reach the preview.
    server.listen({ host: '127.0.0.1', port: 0, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const hostPort = (server.address() as net.AddressInfo).port;
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= new Promise<void>((resolve) => {
      closed = true;
      server.close(() => resolve());
      for (const s of open) s.destroy();
    });
    return closing;
  };
  return {
    sandboxPort: port,
    hostPort,
    url: `http://127.0.0.1:${hostPort}/`,
    get activeConnections() {
      let n = 0;
      for (const s of open) if (s instanceof net.Socket) n += 1;
      return n;
    },
    close,
    dispose: () => void close(),
  };
}

export type PreviewPortEvent =
  | { type: 'published'; sandboxPort: number; hostPort: number; url: string }
  | { type: 'unpublished'; sandboxPort: number; hostPort: number };

/**
 * The published ports of one run: publish on request (UI, CLI `--publish`, or the agent), list them
 * for the UI, and close them all when the run ends (dispose).
 */
export class PreviewPorts implements Disposable {
  private readonly ports = new Map<number, PublishedPort>();
  private readonly pending = new Map<number, Promise<PublishedPort>>();
  private readonly emitter = new Emitter<PreviewPortEvent>();
  private disposed = false;

  readonly onDidChange: Event<PreviewPortEvent> = this.emitter.event;

  constructor(private readonly channel: SandboxPortConnector) {}

  /** Publishes the sandbox port (once: publishing it again returns the same host port). */
  async publish(sandboxPort: number): Promise<PublishedPort> {
    if (this.disposed) throw new AirlockError('CANCELLED', 'the run has ended; its ports can no longer be published');
    const port = checkSandboxPort(sandboxPort);
    const existing = this.ports.get(port) ?? (await this.pending.get(port));
    if (existing) return existing;
    const creating = publishPort(this.channel, port);
    this.pending.set(port, creating);
    try {
      const published = await creating;
      if (this.disposed) {
        await published.close();
        throw new AirlockError('CANCELLED', 'the run ended while the port was being published');
      }
      this.ports.set(port, published);
      this.emitter.fire({ type: 'published', sandboxPort: port, hostPort: published.hostPort, url: published.url });
      return published;
    } finally {
      this.pending.delete(port);
    }
  }

  /** Closes one published port. */
  async unpublish(sandboxPort: number): Promise<void> {
    const published = this.ports.get(sandboxPort);
    if (!published) return;
    this.ports.delete(sandboxPort);
    await published.close();
    this.emitter.fire({ type: 'unpublished', sandboxPort, hostPort: published.hostPort });
  }

  list(): Array<{ sandboxPort: number; hostPort: number; url: string }> {
    return [...this.ports.values()].map((p) => ({ sandboxPort: p.sandboxPort, hostPort: p.hostPort, url: p.url }));
  }

  /** Closes every published port (the run ended). */
  async closeAll(): Promise<void> {
    this.disposed = true;
    await Promise.all([...this.ports.keys()].map((p) => this.unpublish(p)));
    this.emitter.dispose();
  }

  dispose(): void {
    void this.closeAll();
  }
}
