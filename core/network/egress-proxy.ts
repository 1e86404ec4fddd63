import { randomUUID } from 'node:crypto';
import dns from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import { AirlockError } from '../../contracts/errors';
import { Emitter, type Disposable, type Event } from '../common/disposable';
import { Allowlist, formatAllowEntry, type AllowEntry } from './allowlist';
import { normalizeHostName } from './address-checks';
import type { EgressEvent } from './egress-event';
import { EgressPolicy, Refusal, STATUS_TEXT, asRefusal, hostHeaderMismatch, parseAuthority, type Resolver } from './egress-policy';
import { dialChecked, forwardHttp, openTunnel, type RelayContext } from './egress-relay';
import { ACCESS_DESK_HOST, ACCESS_DESK_PATH, HOW_TO_PROPOSE } from './gateway/network-approvals';
import type { TlsGateway } from './gateway/tls-gateway';
import type { ProjectNetworkStore } from './project-network-store';

/**
 * Test-only switch that lets the proxy connect to 127.0.0.0/8 and ::1 (the unit tests' echo
 * servers). It is a symbol-keyed option on purpose: settings, policies and CLI input are JSON and
 * cannot carry a symbol, so no user configuration can ever turn it on. Private ranges, link-local
 * and metadata addresses stay refused even with it.
 */
export const ALLOW_LOOPBACK_TARGETS_FOR_TESTS: unique symbol = Symbol('airlock.network.allowLoopbackTargetsForTests');

export type { EgressEvent } from './egress-event';
export type { Resolver } from './egress-policy';

/** The system resolver (getaddrinfo, as every tool in the sandbox would use). */
export const systemResolver: Resolver = async (host) => {
  const records = await dns.promises.lookup(host, { all: true, verbatim: true });
  return records.map((r) => r.address);
};

export interface EgressProxyOptions {
  runId: string;
  /** Entries allowed for this run (presets, project entries and custom ones, already merged or not). */
  allow?: Iterable<AllowEntry | string>;
  /** When set, its entries are loaded at start and `allowForProject` persists there. */
  projectStore?: ProjectNetworkStore;
  /** DNS resolver (tests inject one); defaults to the system resolver. */
  resolve?: Resolver;
  /** Time a client has to send its request head; slow or silent clients are cut off (default 10 s). */
  handshakeTimeoutMs?: number;
  /** Time to resolve and connect to a destination (default 10 s). */
  connectTimeoutMs?: number;
  /** An open tunnel or request with no traffic either way is closed after this (default 5 min). */
  idleTimeoutMs?: number;
  /** Largest request head accepted (default 16 KiB); larger gets 431. */
  maxHeaderBytes?: number;
  /** Most client connections open at once (default 512); more are closed on accept. */
  maxConnections?: number;
  /** How the denial text tells the user to allow a host from the CLI. */
  allowCommand?: (host: string, port: number) => string;
  /**
   * The intercepting gateway (docs/architecture.md §2.8): admitted CONNECTs to hosts it names are
   * handed to it instead of being piped; plain-HTTP requests to those hosts are refused.
   */
  gateway?: TlsGateway;
  /**
   * Host names the user chose, by name, to reach although they resolve to private (LAN) addresses.
   * Exact names only; loopback, link-local and metadata addresses stay refused for them too.
   */
  internalHosts?: Iterable<string>;
  /**
   * Where an agent proposes a gateway rule (`POST http://airlock.invalid/request-access`, answered by
   * the proxy itself, never forwarded): the form-encoded body goes to this, and its answer back.
   */
  accessDesk?: (body: string, signal: AbortSignal) => Promise<{ status: number; text: string }>;
  [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]?: true;
}





/**
 * The egress proxy of ONE run: an HTTP forward proxy on 127.0.0.1 that lets the sandbox open HTTPS
 * `CONNECT` tunnels and send plain-HTTP requests only to allow-listed host names and ports. It
 * never terminates TLS, never adds credentials, and connects to exactly the address it checked
 * (one lookup; every resolved address must be public). Each attempt fires `onDidConnect`.
 */
export class EgressProxy implements Disposable {
  private readonly server: http.Server;
  private readonly policy: EgressPolicy;
  private readonly relay: RelayContext;
  private readonly sockets = new Set<net.Socket>();
  private readonly emitter = new Emitter<EgressEvent>();
  private readonly handshakeTimeoutMs: number;
  private closing: Promise<void> | undefined;
  private listenPort = 0;
  private whenNoSockets: (() => void) | undefined;

  /** Every connection attempt, allowed or denied, when it is over. */
  readonly onDidConnect: Event<EgressEvent> = this.emitter.event;
  readonly runId: string;
  readonly host = '127.0.0.1';

  /** Starts a proxy on 127.0.0.1 with an ephemeral port. */
  static async start(options: EgressProxyOptions): Promise<EgressProxy> {
    const initial: Array<AllowEntry | string> = [...(options.allow ?? [])];
    if (options.projectStore) initial.push(...(await options.projectStore.load()));
    const proxy = new EgressProxy(options, new Allowlist(initial));
    await proxy.listen();
    return proxy;
  }

  private constructor(
    private readonly options: EgressProxyOptions,
    allowlist: Allowlist,
  ) {
    if (!options.runId) throw new AirlockError('INVALID_INPUT', 'the egress proxy needs the run id it serves');
    this.runId = options.runId;
    this.handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.policy = new EgressPolicy(allowlist, {
      runId: options.runId,
      resolve: options.resolve ?? systemResolver,
      connectTimeoutMs,
      allowLoopback: options[ALLOW_LOOPBACK_TARGETS_FOR_TESTS] === true,
      internalHosts: options.internalHosts ?? [],
      ...(options.projectStore ? { projectStore: options.projectStore } : {}),
      ...(options.allowCommand ? { allowCommand: options.allowCommand } : {}),
    });
    this.relay = { fire: (e) => this.fire(e), track: (socket) => this.track(socket), connectTimeoutMs, idleTimeoutMs: options.idleTimeoutMs ?? 300_000 };
    this.server = http.createServer({
      maxHeaderSize: options.maxHeaderBytes ?? 16 * 1024,
      // HTTP/1.0-style requests without Host are fine: the target is in the request line.
      requireHostHeader: false,
      headersTimeout: this.handshakeTimeoutMs,
      // Bodies can be long uploads; idleness is handled per socket instead.
      requestTimeout: 0,
      keepAliveTimeout: 5_000,
      connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(this.handshakeTimeoutMs / 4))),
    });
    // A client that half-closes after its request still gets the answer (Node's default aborts the
    // request at the client's FIN and ends the socket: the client saw an empty reply or a reset).
    (this.server as http.Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
    // A runaway sandbox must not exhaust the host's file descriptors.
    this.server.maxConnections = options.maxConnections ?? 512;
    this.server.on('connection', (socket: net.Socket) => {
      this.track(socket);
      socket.on('error', () => socket.destroy());
    });
    this.server.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      this.onConnect(req, socket, head);
    });
    this.server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
      this.onRequest(req, res);
    });
    this.server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket) => {
      const started = performance.now();
      const target = parseAuthority(/^http:\/\/([^/?#]*)/i.exec(req.url ?? '')?.[1] ?? '', 80);
      const host = 'host' in target ? target.host.toLowerCase() : '';
      const port = 'port' in target ? target.port : 0;
      this.refuseSocket(
        socket,
        new Refusal(
          403,
          'protocol upgrade over plain HTTP',
          'airlock: protocol upgrades (WebSocket) through the plain-HTTP proxy are not supported; use wss:// (CONNECT) instead',
        ),
        { host, port, method: req.method ?? 'GET', started },
      );
    });
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: net.Socket) => {
      const code = err.code ?? '';
      if (code === 'ECONNRESET' || !socket.writable) {
        socket.destroy();
        return;
      }
      const refusal =
        code === 'HPE_HEADER_OVERFLOW'
          ? new Refusal(431, 'request head too large', 'airlock: the request head is larger than the egress proxy accepts')
          : code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? new Refusal(408, 'request head not received in time', 'airlock: the request head did not arrive in time')
            : new Refusal(400, `malformed request (${code || 'parse error'})`, 'airlock: the egress proxy could not parse this request');
      this.refuseSocket(socket, refusal, { host: '', port: 0, method: '', started: performance.now() });
    });
  }

  /** The port the proxy listens on (127.0.0.1 only). */
  get port(): number {
    return this.listenPort;
  }

  /** `http://127.0.0.1:<port>`. */
  get url(): string {
    return `http://${this.host}:${this.listenPort}`;
  }

  /** Open client connections (for tests and the UI). */
  get activeConnections(): number {
    return this.sockets.size;
  }

  /** A new socket to the proxy; what a channel's host-service forwarder connects with. */
  connect(): net.Socket {
    // Half-open both ways: the channel carries each side's end on its own (channel-duplex.ts joinSocket).
    return net.connect({ host: this.host, port: this.listenPort, allowHalfOpen: true });
  }

  /** The run's current allowlist. */
  entries(): AllowEntry[] {
    return this.policy.entries();
  }

  /** Admits the next single attempt to this host (on `port`, or the default port of the request kind). */
  allowOnce(host: string, port?: number): void {
    this.policy.allowOnce(host, port);
  }

  /** Adds an entry to this run's allowlist for the rest of the run. */
  allowForRun(entry: AllowEntry | string): AllowEntry {
    return this.policy.allowForRun(entry);
  }

  /** Persists the entry for the project (every later run starts with it) and allows it for this run. */
  allowForProject(entry: AllowEntry | string): Promise<AllowEntry> {
    return this.policy.allowForProject(entry);
  }

  /** Stops accepting, cuts every open connection, and resolves when all final events have fired. */
  close(): Promise<void> {
    if (!this.closing) {
      const serverClosed = new Promise<void>((resolve) => this.server.close(() => resolve()));
      // Tunnels are detached from the HTTP server: wait for every socket's close handler, which
      // fires the connection's final event, before dropping the listeners.
      const socketsClosed = new Promise<void>((resolve) => {
        this.whenNoSockets = resolve;
        if (this.sockets.size === 0) resolve();
      });
      for (const s of this.sockets) s.destroy();
      this.closing = Promise.all([serverClosed, socketsClosed]).then(() => this.emitter.dispose());
    }
    return this.closing;
  }

  dispose(): void {
    void this.close();
  }

  private listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, this.host, () => {
        this.server.off('error', reject);
        this.listenPort = (this.server.address() as net.AddressInfo).port;
        resolve();
      });
    });
  }

  private track(socket: net.Socket): void {
    if (this.sockets.has(socket)) return;
    this.sockets.add(socket);
    socket.once('close', () => {
      this.sockets.delete(socket);
      // Resolve after this socket's other close handlers (which fire the final event) have run.
      if (this.sockets.size === 0 && this.whenNoSockets) setImmediate(this.whenNoSockets);
    });
  }

  private fire(e: Omit<EgressEvent, 'id' | 'runId' | 'at' | 'durationMs'> & { started: number }): void {
    const { started, ...rest } = e;
    const now = performance.now();
    this.emitter.fire({
      id: randomUUID(),
      runId: this.runId,
      at: new Date(Date.now() - (now - started)).toISOString(),
      ...rest,
      durationMs: Math.round((now - started) * 1000) / 1000,
    });
  }





  private refuseSocket(
    socket: net.Socket,
    refusal: Refusal,
    ctx: { host: string; port: number; method: string; started: number },
  ): void {
    const body = `${refusal.body}\n`;
    const head =
      `HTTP/1.1 ${refusal.status} ${STATUS_TEXT[refusal.status] ?? 'Error'}\r\n` +
      `Content-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Airlock-Egress: denied\r\n` +
      `Connection: close\r\n\r\n`;
    if (socket.writable) socket.end(head + body);
    else socket.destroy();
    // A client that never reads the answer must not hold the socket.
    setTimeout(() => socket.destroy(), 5_000).unref();
    this.fire({
      host: ctx.host,
      port: ctx.port,
      method: ctx.method,
      allowed: refusal.allowed,
      reason: refusal.reason,
      ...(refusal.address ? { address: refusal.address } : {}),
      bytesUp: 0,
      bytesDown: 0,
      started: ctx.started,
    });
  }

  private onConnect(req: http.IncomingMessage, client: net.Socket, head: Buffer): void {
    const started = performance.now();
    this.track(client);
    client.on('error', () => client.destroy());
    const target = parseAuthority(req.url ?? '');
    if ('error' in target) {
      this.refuseSocket(client, new Refusal(403, target.error, `airlock: CONNECT refused — ${target.error}`), {
        host: '',
        port: 0,
        method: 'CONNECT',
        started,
      });
      return;
    }
    const ctx = { host: normalizeHostName(target.host) ?? target.host, port: target.port, method: 'CONNECT', started };
    const smuggled = hostHeaderMismatch(req.rawHeaders, target.host, target.port, target.port);
    if (smuggled) {
      this.refuseSocket(client, new Refusal(403, smuggled, `airlock: CONNECT refused — ${smuggled}`), ctx);
      return;
    }
    const gateway = this.options.gateway;
    this.policy.decide('connect', target.host, target.port)
      .then(async ({ host, addresses }) => {
        if (gateway?.intercepts(host)) {
          // Judged request by request from here on; each one fires its own event.
          await gateway.handle(client, head, { host, port: target.port, addresses }, (e) => this.fire({ ...e, intercepted: true }));
          return undefined;
        }
        return { host, ...(await dialChecked(this.relay, host, addresses, target.port)) };
      })
      .then((opened) => {
        if (opened) openTunnel(this.relay, client, head, { ...ctx, host: opened.host }, opened.socket, opened.address);
      })
      .then(
        () => undefined,
        (err: unknown) => this.refuseSocket(client, asRefusal(err), ctx),
      );
  }




  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const started = performance.now();
    const method = req.method ?? 'GET';
    const raw = req.url ?? '';
    const refuse = (refusal: Refusal, host: string, port: number) => {
      const body = `${refusal.body}\n`;
      res.writeHead(refusal.status, {
        'Content-Type': 'text/plain; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'X-Airlock-Egress': 'denied',
        Connection: 'close',
      });
      res.end(body);
      req.resume();
      this.fire({
        host,
        port,
        method,
        allowed: refusal.allowed,
        reason: refusal.reason,
        ...(refusal.address ? { address: refusal.address } : {}),
        bytesUp: 0,
        bytesDown: 0,
        started,
      });
    };

    const m = /^http:\/\/([^/?#]*)(.*)$/is.exec(raw);
    if (!m) {
      const why = /^https:\/\//i.test(raw)
        ? 'https:// URLs must use CONNECT (the proxy never intercepts TLS)'
        : 'this is a forward proxy: send absolute-form requests (http://host/path) or CONNECT';
      refuse(new Refusal(400, why, `airlock: ${why}`), '', 0);
      return;
    }
    const target = parseAuthority(m[1] as string, 80);
    if ('error' in target) {
      refuse(new Refusal(403, target.error, `airlock: request refused — ${target.error}`), '', 0);
      return;
    }
    const hostLabel = normalizeHostName(target.host) ?? target.host;
    let path = (m[2] as string).split('#')[0] as string;
    if (path === '') path = '/';
    else if (path.startsWith('?')) path = `/${path}`;
    if (hostLabel === ACCESS_DESK_HOST) {
      this.answerDesk(req, res, path);
      return;
    }
    const smuggled = hostHeaderMismatch(req.rawHeaders, target.host, target.port, 80);
    if (smuggled) {
      refuse(new Refusal(403, smuggled, `airlock: request refused — ${smuggled}`), hostLabel, target.port);
      return;
    }
    const plainRefusal = this.options.gateway?.plainHttpRefusal(hostLabel, raw, req.rawHeaders);
    if (plainRefusal) {
      refuse(new Refusal(403, plainRefusal, `airlock: request refused — ${plainRefusal}`), hostLabel, target.port);
      return;
    }
    this.policy.decide('http', target.host, target.port)
      .then(async ({ host, addresses }) => ({ host, ...(await dialChecked(this.relay, host, addresses, target.port)) }))
      .then(
        ({ host, socket, address }) => forwardHttp(this.relay, req, res, { host, port: target.port, method, started }, socket, address, path),
        (err: unknown) => refuse(asRefusal(err), hostLabel, target.port),
      );
  }

  /** The agent's rule proposal: read (bounded), put to the user by the desk, answered in plain text. */
  private answerDesk(req: http.IncomingMessage, res: http.ServerResponse, path: string): void {
    const reply = (status: number, text: string) => {
      if (res.headersSent || res.destroyed) return;
      const body = `airlock: ${text}\n`;
      res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
      res.end(body);
    };
    const desk = this.options.accessDesk;
    if (!desk) {
      req.resume();
      reply(404, 'this run has no gateway rules to propose against; ask the user to allow the host instead');
      return;
    }
    if (req.method !== 'POST' || path !== ACCESS_DESK_PATH) {
      req.resume();
      reply(405, `propose a rule with: ${HOW_TO_PROPOSE}`);
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 4096) {
        reply(413, 'the proposal is over 4096 bytes');
        req.destroy();
      } else chunks.push(c);
    });
    req.once('end', () => {
      const gone = new AbortController();
      res.once('close', () => gone.abort());
      desk(Buffer.concat(chunks).toString('utf8'), gone.signal).then(
        (a) => reply(a.status, a.text),
        (err: unknown) => reply(500, `the proposal failed: ${(err as Error).message}`),
      );
    });
  }

}


/** Formats a list of entries for records and the UI. */
export function describeAllowlist(entries: AllowEntry[]): string[] {
  return entries.map(formatAllowEntry);
}
