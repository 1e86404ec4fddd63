import { randomUUID } from 'node:crypto';
import dns from 'node:dns';
import http from 'node:http';
import net from 'node:net';
import { AirlockError } from '../../contracts/errors';
import { Emitter, type Disposable, type Event } from '../common/disposable';
import { endToEndHeaders, rawHeaderValues } from '../common/hop-headers';
import { Allowlist, DEFAULT_PORT, formatAllowEntry, toAllowEntry, type AllowEntry, type EgressKind } from './allowlist';
import {
  blockedAddressReason,
  isIpLiteral,
  isLoopbackAddress,
  isPrivateAddress,
  normalizeHostName,
  reservedNameReason,
} from './address-checks';
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

/** Resolves a host name to its addresses (all of them: every one is checked). */
export type Resolver = (host: string) => Promise<string[]>;

/** The system resolver (getaddrinfo, as every tool in the sandbox would use). */
export const systemResolver: Resolver = async (host) => {
  const records = await dns.promises.lookup(host, { all: true, verbatim: true });
  return records.map((r) => r.address);
};

/** One connection attempt through the egress proxy, allowed or denied; fired when it is over. */
export interface EgressEvent {
  id: string;
  runId: string;
  /** ISO time the attempt started. */
  at: string;
  /** The host name as requested (normalized when valid). Empty when the request could not be parsed. */
  host: string;
  port: number;
  /** `CONNECT` for tunnels, otherwise the HTTP method of a plain-HTTP request. */
  method: string;
  /** Whether the policy admitted it (an admitted attempt can still fail to connect: see `reason`). */
  allowed: boolean;
  /** Why it was refused or failed. */
  reason?: string;
  /** The checked address the proxy connected to. */
  address?: string;
  /** Bytes from the sandbox to the destination, and back (tunnel bytes, or HTTP body bytes). */
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
  /** Set for a request the gateway intercepted (TLS terminated on the host): one event per request. */
  intercepted?: true;
  /** Intercepted requests: the path with query values redacted. */
  path?: string;
  /** Intercepted requests: the HTTP status the client got. */
  status?: number;
  /** Intercepted requests: the rule that decided. */
  rule?: string;
  /** Intercepted requests: the secret injected (or whose placeholder was misused), by name. */
  secret?: string;
}

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

/** A policy refusal or failure, answered to the client with a plain-text body. */
class Refusal extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly body: string,
    readonly allowed = false,
    readonly address?: string,
  ) {
    super(reason);
  }
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  403: 'Forbidden',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
  502: 'Bad Gateway',
  504: 'Gateway Timeout',
};

/** Splits `host:port` / `[v6]:port` / `host` (when a default port is given). */
function parseAuthority(text: string, defaultPort?: number): { host: string; port: number } | { error: string } {
  if (text.includes('@')) return { error: 'user information ("user@") in the target is not allowed' };
  if (/[\\\s/?#%]/.test(text)) return { error: 'the target contains characters a host name cannot have' };
  const bracket = /^(\[[^\]]*\])(?::(\d{1,5}))?$/.exec(text);
  const plain = /^([^:[\]]+)(?::(\d{1,5}))?$/.exec(text);
  const m = bracket ?? plain;
  if (!m) return { error: 'the target is not host:port' };
  const host = m[1] as string;
  if (m[2] === undefined) {
    return defaultPort === undefined ? { error: 'the target has no port' } : { host, port: defaultPort };
  }
  const port = Number(m[2]);
  if (port < 1 || port > 65535) return { error: `${m[2]} is not a valid port` };
  return { host, port };
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(message)), ms);
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * The egress proxy of ONE run: an HTTP forward proxy on 127.0.0.1 that lets the sandbox open HTTPS
 * `CONNECT` tunnels and send plain-HTTP requests only to allow-listed host names and ports. It
 * never terminates TLS, never adds credentials, and connects to exactly the address it checked
 * (one lookup; every resolved address must be public). Each attempt fires `onDidConnect`.
 */
export class EgressProxy implements Disposable {
  private readonly server: http.Server;
  private readonly allowlist: Allowlist;
  private readonly onceGrants: Array<{ host: string; port?: number }> = [];
  private readonly sockets = new Set<net.Socket>();
  private readonly emitter = new Emitter<EgressEvent>();
  private readonly resolve: Resolver;
  private readonly handshakeTimeoutMs: number;
  private readonly connectTimeoutMs: number;
  private readonly idleTimeoutMs: number;
  private readonly allowLoopback: boolean;
  private readonly internalHosts: Set<string>;
  private closing: Promise<void> | undefined;
  private listenPort = 0;
  private whenNoSockets: (() => void) | undefined;
  private projectReload: Promise<void> | undefined;

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
    this.allowlist = allowlist;
    this.resolve = options.resolve ?? systemResolver;
    this.handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.idleTimeoutMs = options.idleTimeoutMs ?? 300_000;
    this.allowLoopback = options[ALLOW_LOOPBACK_TARGETS_FOR_TESTS] === true;
    this.internalHosts = new Set([...(options.internalHosts ?? [])].map(internalHostName));
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
    return net.connect({ host: this.host, port: this.listenPort });
  }

  /** The run's current allowlist. */
  entries(): AllowEntry[] {
    return this.allowlist.entries();
  }

  /** Admits the next single attempt to this host (on `port`, or the default port of the request kind). */
  allowOnce(host: string, port?: number): void {
    const entry = toAllowEntry(port === undefined ? host : { host, ports: [port] });
    if (entry.host.startsWith('*.')) throw new AirlockError('INVALID_INPUT', 'allow-once takes a host name, not a wildcard');
    this.onceGrants.push(port === undefined ? { host: entry.host } : { host: entry.host, port });
  }

  /** Adds an entry to this run's allowlist for the rest of the run. */
  allowForRun(entry: AllowEntry | string): AllowEntry {
    return this.allowlist.add(entry);
  }

  /** Persists the entry for the project (every later run starts with it) and allows it for this run. */
  async allowForProject(entry: AllowEntry | string): Promise<AllowEntry> {
    if (!this.options.projectStore) {
      throw new AirlockError('INVALID_INPUT', 'this run has no project to remember hosts for; allow the host for the run instead');
    }
    const normalized = toAllowEntry(entry);
    await this.options.projectStore.add(normalized);
    return this.allowlist.add(normalized);
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

  private denialText(host: string, port: number): string {
    const cmd = this.options.allowCommand?.(host, port) ?? `airlock network allow ${host}:${port} --run ${this.runId}`;
    return `airlock: ${host}:${port} is not on this run's allowlist — allow it from the run view or with \`${cmd}\``;
  }

  /**
   * The policy decision: checks the name, the allowlist, then resolves once and checks every
   * address. Returns the single address to connect to.
   */
  private async decide(kind: EgressKind, rawHost: string, port: number): Promise<{ host: string; addresses: string[] }> {
    if (isIpLiteral(rawHost)) {
      throw new Refusal(
        403,
        'IP address literal',
        `airlock: ${rawHost}:${port} refused — IP addresses cannot be reached through the egress proxy; use an allow-listed host name`,
      );
    }
    const host = normalizeHostName(rawHost);
    if (!host) {
      throw new Refusal(403, 'not a valid host name', `airlock: "${rawHost}" is not a valid host name; refused`);
    }
    const reserved = reservedNameReason(host);
    if (reserved) throw new Refusal(403, reserved, `airlock: ${host}:${port} refused — ${reserved}`);

    const onceIndex = this.onceGrants.findIndex(
      (g) => g.host === host && (g.port === undefined ? port === DEFAULT_PORT[kind] : g.port === port),
    );
    if (onceIndex >= 0) {
      this.onceGrants.splice(onceIndex, 1);
    } else if (!this.allowlist.match(host, port, kind) && !(await this.matchesReloadedProject(host, port, kind))) {
      const reason = this.allowlist.hasHost(host)
        ? `port ${port} is not allowed for ${host}${kind === 'connect' ? ' (CONNECT)' : ' (plain HTTP)'}`
        : 'not on the allowlist';
      throw new Refusal(403, reason, this.denialText(host, port));
    }

    let addresses: string[];
    try {
      addresses = await withTimeout(this.resolve(host), this.connectTimeoutMs, 'DNS lookup timed out');
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
      throw new Refusal(502, `DNS lookup failed (${why})`, `airlock: could not resolve ${host} (${why})`, true);
    }
    if (addresses.length === 0) {
      throw new Refusal(502, 'DNS lookup returned no address', `airlock: ${host} has no address`, true);
    }
    const internal = this.internalHosts.has(host);
    for (const address of addresses) {
      if (this.allowLoopback && isLoopbackAddress(address)) continue;
      if (internal && net.isIP(address) && isPrivateAddress(address)) continue;
      const blocked = net.isIP(address) ? blockedAddressReason(address) : 'not an IP address';
      if (blocked) {
        // Any bad record refuses the name: a rebinding answer must not win on a retry.
        throw new Refusal(
          403,
          `resolves to ${blocked} (${address})`,
          `airlock: ${host}:${port} refused — it resolves to ${blocked} (${address}), which the sandbox may not reach`,
        );
      }
    }
    return { host, addresses };
  }

  /**
   * Connects to the first reachable address of those checked (resolver order), all within the
   * connect timeout. Never looks the name up again.
   */
  private async dial(host: string, addresses: string[], port: number): Promise<{ socket: net.Socket; address: string }> {
    const deadline = performance.now() + this.connectTimeoutMs;
    const errors: string[] = [];
    for (const address of addresses) {
      const remaining = deadline - performance.now();
      if (remaining <= 0) break;
      const socket = net.connect({ host: address, port });
      this.track(socket);
      // Errors after connecting are handled by the tunnel/forwarder; this keeps a late one from crashing.
      socket.on('error', () => undefined);
      const outcome = await new Promise<string | undefined>((resolve) => {
        const timer = setTimeout(() => resolve('timed out'), remaining);
        socket.once('connect', () => {
          clearTimeout(timer);
          resolve(undefined);
        });
        socket.once('error', (err: NodeJS.ErrnoException) => {
          clearTimeout(timer);
          resolve(err.code ?? err.message);
        });
      });
      if (outcome === undefined) return { socket, address };
      socket.destroy();
      errors.push(`${address}: ${outcome}`);
    }
    const timedOut = errors.length === 0 || errors[errors.length - 1]?.endsWith('timed out');
    const why = timedOut && errors.length === 0 ? 'connect timed out' : `connect failed (${errors.join(', ')})`;
    throw new Refusal(timedOut ? 504 : 502, why, `airlock: could not connect to ${host}:${port} (${why})`, true, addresses[0]);
  }

  /**
   * Before refusing, re-reads the project's remembered hosts: `airlock network allow … --project`
   * (or `--run`) from another process then takes effect in this running run at once.
   */
  private async matchesReloadedProject(host: string, port: number, kind: EgressKind): Promise<boolean> {
    const store = this.options.projectStore;
    if (!store) return false;
    this.projectReload ??= store
      .load()
      .then((entries) => {
        for (const e of entries) this.allowlist.add(e);
      })
      .catch(() => undefined)
      .finally(() => {
        this.projectReload = undefined;
      });
    await this.projectReload;
    return this.allowlist.match(host, port, kind) !== undefined;
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
    const smuggled = this.hostHeaderMismatch(req.rawHeaders, target.host, target.port, target.port);
    if (smuggled) {
      this.refuseSocket(client, new Refusal(403, smuggled, `airlock: CONNECT refused — ${smuggled}`), ctx);
      return;
    }
    const gateway = this.options.gateway;
    this.decide('connect', target.host, target.port)
      .then(async ({ host, addresses }) => {
        if (gateway?.intercepts(host)) {
          // Judged request by request from here on; each one fires its own event.
          await gateway.handle(client, head, { host, port: target.port, addresses }, (e) => this.fire({ ...e, intercepted: true }));
          return undefined;
        }
        return { host, ...(await this.dial(host, addresses, target.port)) };
      })
      .then((opened) => {
        if (opened) this.openTunnel(client, head, { ...ctx, host: opened.host }, opened.socket, opened.address);
      })
      .then(
        () => undefined,
        (err: unknown) => this.refuseSocket(client, this.asRefusal(err), ctx),
      );
  }

  private asRefusal(err: unknown): Refusal {
    if (err instanceof Refusal) return err;
    return new Refusal(502, (err as Error).message, 'airlock: the egress proxy failed on this request', true);
  }

  /**
   * A `Host` header that names another host than the request target is a smuggling attempt; so is
   * more than one `Host` header. Returns the reason, or undefined when consistent.
   */
  private hostHeaderMismatch(rawHeaders: string[], host: string, port: number, defaultPort: number): string | undefined {
    const values = rawHeaderValues(rawHeaders, 'host');
    if (values.length === 0) return undefined;
    if (values.length > 1) return 'more than one Host header';
    const parsed = parseAuthority((values[0] as string).trim(), defaultPort);
    if ('error' in parsed) return `the Host header is invalid (${parsed.error})`;
    const a = normalizeHostName(parsed.host) ?? parsed.host.toLowerCase();
    const b = normalizeHostName(host) ?? host.toLowerCase();
    if (a !== b || parsed.port !== port) return `the Host header (${values[0]}) does not match the request target (${host}:${port})`;
    return undefined;
  }

  private openTunnel(
    client: net.Socket,
    head: Buffer,
    ctx: { host: string; port: number; method: string; started: number },
    upstream: net.Socket,
    address: string,
  ): void {
    if (client.destroyed) {
      upstream.destroy();
      this.fire({ ...ctx, allowed: true, reason: 'client went away', address, bytesUp: 0, bytesDown: 0 });
      return;
    }
    let bytesUp = head.length;
    let bytesDown = 0;
    let failure: string | undefined;
    let closedSides = 0;
    const onClosed = () => {
      closedSides += 1;
      if (closedSides < 2) return;
      this.fire({ ...ctx, allowed: true, ...(failure ? { reason: failure } : {}), address, bytesUp, bytesDown });
    };
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    client.on('data', (chunk: Buffer) => {
      bytesUp += chunk.length;
    });
    upstream.on('data', (chunk: Buffer) => {
      bytesDown += chunk.length;
    });
    client.pipe(upstream);
    upstream.pipe(client);
    const idle = () => {
      failure ??= 'idle timeout';
      client.destroy();
      upstream.destroy();
    };
    client.setTimeout(this.idleTimeoutMs, idle);
    upstream.setTimeout(this.idleTimeoutMs, idle);
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      failure ??= `upstream error (${err.code ?? err.message})`;
    });
    upstream.once('close', () => {
      client.end();
      onClosed();
    });
    client.once('close', () => {
      upstream.destroy();
      onClosed();
    });
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
    const smuggled = this.hostHeaderMismatch(req.rawHeaders, target.host, target.port, 80);
    if (smuggled) {
      refuse(new Refusal(403, smuggled, `airlock: request refused — ${smuggled}`), hostLabel, target.port);
      return;
    }
    const plainRefusal = this.options.gateway?.plainHttpRefusal(hostLabel, raw, req.rawHeaders);
    if (plainRefusal) {
      refuse(new Refusal(403, plainRefusal, `airlock: request refused — ${plainRefusal}`), hostLabel, target.port);
      return;
    }
    this.decide('http', target.host, target.port)
      .then(async ({ host, addresses }) => ({ host, ...(await this.dial(host, addresses, target.port)) }))
      .then(
        ({ host, socket, address }) => this.forward(req, res, { host, port: target.port, method, started }, socket, address, path),
        (err: unknown) => refuse(this.asRefusal(err), hostLabel, target.port),
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

  private forward(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    ctx: { host: string; port: number; method: string; started: number },
    socket: net.Socket,
    address: string,
    path: string,
  ): void {
    if (res.destroyed) {
      socket.destroy();
      this.fire({ ...ctx, allowed: true, reason: 'client went away', address, bytesUp: 0, bytesDown: 0 });
      return;
    }
    const headers = endToEndHeaders(req.rawHeaders);
    if (rawHeaderValues(req.rawHeaders, 'host').length === 0) {
      headers.push('Host', ctx.port === 80 ? ctx.host : `${ctx.host}:${ctx.port}`);
    }
    let bytesUp = 0;
    let bytesDown = 0;
    let failure: string | undefined;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.fire({ ...ctx, allowed: true, ...(failure ? { reason: failure } : {}), address, bytesUp, bytesDown });
    };

    // The already-connected socket to the checked address; no agent, so it is never reused.
    const upstreamReq = http.request({
      host: address,
      port: ctx.port,
      method: ctx.method,
      path,
      headers,
      setHost: false,
      createConnection: () => socket,
    });
    socket.setTimeout(this.idleTimeoutMs, () => {
      failure ??= 'idle timeout';
      upstreamReq.destroy();
    });
    req.on('data', (chunk: Buffer) => {
      bytesUp += chunk.length;
    });
    req.pipe(upstreamReq);
    upstreamReq.on('response', (upstreamRes: http.IncomingMessage) => {
      const out = endToEndHeaders(upstreamRes.rawHeaders);
      res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.statusMessage, out);
      upstreamRes.on('data', (chunk: Buffer) => {
        bytesDown += chunk.length;
      });
      upstreamRes.pipe(res);
      upstreamRes.on('error', () => res.destroy());
      res.once('close', () => {
        if (!upstreamRes.complete) failure ??= 'closed before the response was complete';
        upstreamRes.destroy();
        finish();
      });
    });
    upstreamReq.on('error', (err: NodeJS.ErrnoException) => {
      failure ??= `upstream failed (${err.code ?? err.message})`;
      if (!res.headersSent) {
        const status = 502;
        const body = `airlock: could not reach ${ctx.host}:${ctx.port} (${failure})\n`;
        res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
        res.end(body);
        finish();
      } else {
        res.destroy();
      }
    });
    res.once('close', () => {
      if (!res.writableFinished) upstreamReq.destroy();
      if (!res.headersSent) {
        // The client went away before any response: nothing else will finish the record.
        failure ??= 'client went away';
        finish();
      }
    });
  }
}

/** An internal host must be named exactly: no wildcard, no address. */
function internalHostName(raw: string): string {
  const host = normalizeHostName(raw.trim());
  if (!host || raw.includes('*') || isIpLiteral(raw)) {
    throw new AirlockError('INVALID_INPUT', `"${raw}": an internal host must be one exact host name (no wildcard, no IP address)`);
  }
  return host;
}

/** Formats a list of entries for records and the UI. */
export function describeAllowlist(entries: AllowEntry[]): string[] {
  return entries.map(formatAllowEntry);
}
