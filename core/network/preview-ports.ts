import net from 'node:net';
import type { Duplex } from 'node:stream';
import { AirlockError } from '../../contracts/errors';
import { Emitter, type Disposable, type Event } from '../common/disposable';
import { CookieScrubStream } from './cookie-scrub';

/** What publishing needs from a sandbox channel (ChannelClient satisfies it). */
export interface SandboxPortConnector {
  connectToSandboxPort(port: number): Promise<Duplex>;
}

/** A sandbox port published on the host. Only ever bound to 127.0.0.1. */
export interface PublishedPort extends Disposable {
  readonly sandboxPort: number;
  readonly hostPort: number;
  /** `http://localhost:<hostPort>/` — what the UI shows as a link (the previews' own site, not the UI's 127.0.0.1). */
  readonly url: string;
  /** Connections currently piped. */
  readonly activeConnections: number;
  /** Stops listening and cuts open connections; resolves when the listener is closed. */
  close(): Promise<void>;
}

/** Timings of the Host check on published ports (tests shorten them). */
export interface PreviewPortOptions {
  /** A request head must be complete this long after its first byte (default 5 s). */
  headTimeoutMs?: number;
  /** A client silent this long may wait for a server-first greeting (SSH, MySQL): open the sandbox side. */
  serverFirstGraceMs?: number;
}

const DEFAULT_HEAD_TIMEOUT_MS = 5_000;
const DEFAULT_SERVER_FIRST_GRACE_MS = 300;
/** A request head longer than this is refused, never forwarded unchecked. */
const MAX_HEAD_BYTES = 16 * 1024;

function checkSandboxPort(port: unknown): number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new AirlockError('INVALID_INPUT', `a sandbox port must be an integer 1-65535 (got ${String(port)}), e.g. --publish 3000`);
  }
  return port;
}

// --- DNS rebinding guard ----------------------------------------------------------------------------
// A page on attacker.example can re-resolve its own name to 127.0.0.1 and then, as a same-origin page,
// send requests to a published port and read the answers. Its requests still carry
// `Host: attacker.example:PORT`, so HTTP requests are refused unless Host names this loopback port
// (the Vite / webpack-dev-server / Jupyter defence). Only the first request head of a connection is
// read: browsers pool HTTP/1.1 connections per origin, so a connection opened for the rebinding name
// starts with that name's Host and is cut right there; later requests on an accepted connection come
// from the page that opened it. Checking every head would need a full HTTP parser (bodies, chunking).

type FirstBytes =
  | { kind: 'forward'; head: Buffer; ended: boolean }
  | { kind: 'refuse'; status: string; message: string }
  | { kind: 'gone' };

// Any method token, not a fixed list: a same-origin page may fetch() with PROPFIND or a lowercase
// `patch`, and Go or Node servers answer those. No method is longer than 20, so a longer word is not
// HTTP; a client that sends a bare short word and waits for an answer hits the head timeout (408).
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]{1,20}";
const TARGET = '[^\\x00-\\x20\\x7f]';
const REQUEST_LINE = new RegExp(`^${TOKEN} ${TARGET}+ HTTP/1\\.[0-9]\\r\\n`);
/** A start that may still grow into a request line; group 1 is what follows the target. */
const REQUEST_LINE_START = new RegExp(`^(?:${TOKEN}(?: ${TARGET}*(?: ([\\s\\S]*))?)?)?$`);
const VERSION = 'HTTP/1.?\r\n';

/** Whether the bytes start an HTTP/1.x request ('more': cannot tell yet). HTTP/2 prior knowledge (`PRI *`) never comes from a browser. */
function classifyStart(text: string): 'http' | 'other' | 'more' {
  if (REQUEST_LINE.test(text)) return 'http';
  const start = REQUEST_LINE_START.exec(text);
  if (!start) return 'other';
  const version = start[1] ?? '';
  const fits = version.length < VERSION.length && [...version].every((c, i) => (i === 7 ? /[0-9]/.test(c) : c === VERSION[i]));
  return fits ? 'more' : 'other';
}

/** The Host header values of a request head (status line excluded); null when a Host line is folded. */
function hostHeaders(head: string): string[] | null {
  const hosts: string[] = [];
  let previousWasHost = false;
  for (const line of head.split('\r\n').slice(1)) {
    if (/^[ \t]/.test(line)) {
      if (previousWasHost) return null;
      continue;
    }
    const colon = line.indexOf(':');
    previousWasHost = colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'host';
    if (previousWasHost) hosts.push(line.slice(colon + 1).trim());
  }
  return hosts;
}

function printable(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?').slice(0, 200);
}

function refuse(status: string, what: string, hostPort: number): FirstBytes {
  const message =
    `Airlock preview: refused ${what} — open http://localhost:${hostPort}/ instead; ` +
    'previews answer only there: other host names are refused to stop DNS rebinding, and 127.0.0.1 is the site of Airlock\'s own UI.\n';
  return { kind: 'refuse', status, message };
}

/** Decides on the request head so far (`undefined`: read more). */
function checkHead(bytes: Buffer, hostPort: number, ended: boolean): FirstBytes | undefined {
  const forward: FirstBytes = { kind: 'forward', head: bytes, ended };
  const text = bytes.toString('latin1'); // one char per byte
  const start = classifyStart(text);
  if (start === 'other') return forward;
  const end = start === 'http' ? text.indexOf('\r\n\r\n') : -1;
  if (end < 0 || end + 4 > MAX_HEAD_BYTES) {
    if (bytes.length >= MAX_HEAD_BYTES) return refuse('431 Request Header Fields Too Large', 'a request head over 16 KB', hostPort);
    // A client that half-closes before finishing its first line is no browser.
    if (ended) return start === 'more' ? forward : refuse('400 Bad Request', 'an unfinished request head', hostPort);
    return undefined;
  }
  const hosts = hostHeaders(text.slice(0, end));
  // Only `localhost`: cookies are scoped by host name, not port, so a preview served as
  // 127.0.0.1 would share the cookie jar of Airlock's browser UI (127.0.0.1) and could set or
  // shadow its cookies. `localhost` is another site (docs/architecture.md §12).
  const allowed = new Set([`localhost:${hostPort}`]);
  if (hosts?.length === 1 && allowed.has(hosts[0]!.toLowerCase())) return forward;
  if (hosts?.length === 1) return refuse('421 Misdirected Request', `a request for host ${printable(hosts[0]!)}`, hostPort);
  return refuse('421 Misdirected Request', hosts?.length === 0 ? 'a request without a Host header' : 'a request with an ambiguous Host header', hostPort);
}

/**
 * Reads the first bytes of a paused connection until `checkHead` decides. Calls `onSilent` if the
 * client says nothing for a while; the socket is paused again when this resolves.
 */
function readFirstBytes(socket: net.Socket, hostPort: number, timing: Required<PreviewPortOptions>, onSilent: () => void): Promise<FirstBytes> {
  return new Promise((resolve) => {
    let bytes = Buffer.alloc(0);
    let headTimer: NodeJS.Timeout | undefined;
    const silentTimer = setTimeout(onSilent, timing.serverFirstGraceMs);
    const settle = (result: FirstBytes): void => {
      clearTimeout(silentTimer);
      clearTimeout(headTimer);
      socket.pause();
      socket.off('data', onData).off('end', onEnd).off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      clearTimeout(silentTimer);
      headTimer ??= setTimeout(() => settle(refuse('408 Request Timeout', 'a request head that took too long', hostPort)), timing.headTimeoutMs);
      bytes = Buffer.concat([bytes, chunk]);
      const result = checkHead(bytes, hostPort, false);
      if (result) settle(result);
    };
    const onEnd = (): void => settle(checkHead(bytes, hostPort, true) ?? { kind: 'forward', head: bytes, ended: true });
    const onClose = (): void => settle({ kind: 'gone' });
    socket.on('data', onData).once('end', onEnd).once('close', onClose);
    socket.resume();
  });
}

/** Answers a refused request and closes the connection; the sandbox never sees its bytes. */
function sendRefusal(socket: net.Socket, status: string, message: string): void {
  const body = Buffer.from(message, 'utf8');
  const head =
    `HTTP/1.1 ${status}\r\nContent-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n` +
    `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
  // Keep reading (and dropping) what the client still sends, so closing does not reset the connection
  // before it has read the answer.
  socket.on('data', () => undefined).resume();
  socket.end(Buffer.concat([Buffer.from(head, 'latin1'), body]));
  setTimeout(() => socket.destroy(), 2_000).unref();
}

/**
 * Publishes `sandboxPort` (something listening on 127.0.0.1 inside the sandbox) on a random port of
 * the host's 127.0.0.1 — never another interface. Each accepted connection becomes one channel
 * stream to the sandbox port once its first bytes pass the Host check above; when nothing listens
 * there, the connection is closed.
 */
export async function publishPort(channel: SandboxPortConnector, sandboxPort: number, options: PreviewPortOptions = {}): Promise<PublishedPort> {
  const port = checkSandboxPort(sandboxPort);
  const timing: Required<PreviewPortOptions> = {
    headTimeoutMs: options.headTimeoutMs ?? DEFAULT_HEAD_TIMEOUT_MS,
    serverFirstGraceMs: options.serverFirstGraceMs ?? DEFAULT_SERVER_FIRST_GRACE_MS,
  };
  const open = new Set<net.Socket | Duplex>();
  let closed = false;
  let hostPort = 0;

  /** Opens the sandbox side and pipes it to the client; the client's bytes follow once checked. */
  const linkToSandbox = async (socket: net.Socket): Promise<Duplex | undefined> => {
    let remote: Duplex;
    try {
      remote = await channel.connectToSandboxPort(port);
    } catch {
      socket.destroy();
      return undefined;
    }
    if (socket.destroyed || closed) {
      remote.destroy();
      return undefined;
    }
    open.add(remote);
    remote.once('close', () => {
      open.delete(remote);
      socket.end();
    });
    remote.on('error', () => socket.destroy());
    socket.once('close', () => remote.destroy());
    remote.pipe(socket);
    return remote;
  };

  const admit = async (socket: net.Socket): Promise<void> => {
    let linking: Promise<Duplex | undefined> | undefined;
    const link = (): Promise<Duplex | undefined> => (linking ??= linkToSandbox(socket));
    const first = await readFirstBytes(socket, hostPort, timing, () => void link());
    if (first.kind !== 'forward') {
      // Opened early for a silent client: it has received nothing of this client's.
      const early = await linking;
      early?.unpipe(socket);
      early?.destroy();
      if (first.kind === 'refuse' && !socket.destroyed) sendRefusal(socket, first.status, first.message);
      return;
    }
    const remote = await link();
    if (!remote) return;
    // Replay what the check read, then the rest of the stream, minus Airlock's own cookie (cookies
    // are not port-scoped: the browser sends the UI's to a preview too).
    const scrub = new CookieScrubStream();
    scrub.on('error', () => remote.destroy());
    scrub.pipe(remote);
    if (first.head.length > 0) scrub.write(first.head);
    if (first.ended) scrub.end();
    else socket.pipe(scrub);
  };

  const onConnection = (socket: net.Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    socket.on('error', () => socket.destroy());
    void admit(socket);
  };
  const servers = await listenOnLoopback(onConnection, (p) => (hostPort = p));
  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      closed = true;
      const done = Promise.all(servers.map((srv) => new Promise<void>((resolve) => srv.close(() => resolve()))));
      for (const s of open) s.destroy();
      await done;
    })();
    return closing;
  };
  return {
    sandboxPort: port,
    hostPort,
    url: `http://localhost:${hostPort}/`,
    get activeConnections() {
      let n = 0;
      for (const s of open) if (s instanceof net.Socket) n += 1;
      return n;
    },
    close,
    dispose: () => void close(),
  };
}

/**
 * Listens on a random port of 127.0.0.1 and the same port of ::1. Loopback explicitly: never 0.0.0.0
 * or ::, so nothing on the LAN can reach the preview. The link is `localhost`, which a browser tries as
 * ::1 first: the same port on ::1 is taken too, so no other local process listening there receives
 * the preview's requests. `onPort` learns each port tried as soon as 127.0.0.1 listens on it.
 */
async function listenOnLoopback(onConnection: (socket: net.Socket) => void, onPort: (port: number) => void): Promise<net.Server[]> {
  for (let attempt = 0; ; attempt++) {
    const v4 = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, onConnection);
    await listenOn(v4, '127.0.0.1', 0);
    const hostPort = (v4.address() as net.AddressInfo).port;
    onPort(hostPort);
    const v6 = net.createServer({ allowHalfOpen: true, pauseOnConnect: true }, onConnection);
    const taken = await listenOn(v6, '::1', hostPort).then(
      () => false,
      (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE',
    );
    if (!taken) return v6.listening ? [v4, v6] : [v4];
    await new Promise<void>((resolve) => v4.close(() => resolve()));
    if (attempt >= 8) throw new AirlockError('SANDBOX_FAILED', 'could not find a free loopback port for the preview (127.0.0.1 and ::1); try again');
  }
}

/** Listens on `host:port` (exclusive); rejects with the listen error. */
function listenOn(server: net.Server, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
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
