import type http from 'node:http';
import https from 'node:https';
import http2 from 'node:http2';
import type net from 'node:net';
import type { Readable, Writable } from 'node:stream';
import tls from 'node:tls';
import type { Disposable } from '../../common/disposable';

/**
 * The gateway's side toward the real server (docs/architecture.md §2.8): connects to exactly the
 * addresses the egress proxy checked (the name is never looked up again), verifies TLS against the
 * host's trust store, and speaks whatever the server negotiates — HTTP/2 on one multiplexed session
 * per host, else HTTP/1.1 on a keep-alive pool. The client side's protocol does not matter here.
 */

/** Where an intercepted request goes: the host it was admitted for and the addresses checked for it. */
export interface UpstreamTarget {
  host: string;
  port: number;
  addresses: string[];
}

/** The upstream's answer, the same for both protocols. */
export interface UpstreamResponse {
  status: number;
  /** The reason phrase (HTTP/1.1 only; HTTP/2 has none). */
  statusMessage: string;
  /** Flat name/value list without pseudo-headers (hop-by-hop ones still in: the caller filters). */
  rawHeaders: string[];
  body: Readable;
  /** Whether the whole body arrived (asked once the body ended or failed). */
  complete(): boolean;
}

/** One request in flight upstream. */
export interface UpstreamExchange {
  /** Where the request body goes; ending it ends the request. */
  body: Writable;
  /** `http/1.1` or `h2`: what the server negotiated. */
  protocol: UpstreamProtocol;
  onResponse(listener: (r: UpstreamResponse) => void): void;
  onError(listener: (err: NodeJS.ErrnoException) => void): void;
  destroy(): void;
}

export type UpstreamProtocol = 'http/1.1' | 'h2';

/**
 * TLS 1.3 suites in the gateway's order of preference, both toward the client and the server: every
 * byte of an intercepted download is decrypted and encrypted again on the host, and AES-128-GCM is
 * the cheapest of the three where AES instructions exist (docs/architecture.md §8). TLS 1.2 keeps
 * Node's defaults.
 */
export const GATEWAY_CIPHERS = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256', ...tls.DEFAULT_CIPHERS.split(':').filter((c) => !c.startsWith('TLS_'))].join(':');

export interface UpstreamClientOptions {
  /** Extra CAs trusted on top of Node's bundled roots (a company CA; tests). Verification is never off. */
  upstreamCa?: string[];
  /** An HTTP/2 session with no stream open this long is closed. */
  idleTimeoutMs: number;
}

/** `{ 'x-a': ['1', '2'] }` from a flat list; names lower-cased (HTTP/2 wants them so), `cookie` joined as RFC 9113 §8.2.3 says. */
export function headersObject(raw: readonly string[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    const value = raw[i + 1] as string;
    const had = out[name];
    if (had === undefined) out[name] = value;
    else if (name === 'cookie') out[name] = `${had as string}; ${value}`;
    else out[name] = Array.isArray(had) ? [...had, value] : [had, value];
  }
  return out;
}

/** A flat list from an HTTP/2 header object, pseudo-headers left out. */
function rawFromH2(headers: http2.IncomingHttpHeaders): string[] {
  const raw: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith(':') || value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) raw.push(name, String(v));
  }
  return raw;
}

export class UpstreamClient implements Disposable {
  private readonly agents = new Map<string, https.Agent>();
  /** What each host negotiated on first contact; later requests skip the probe. */
  private readonly protocols = new Map<string, UpstreamProtocol>();
  private readonly sessions = new Map<string, http2.ClientHttp2Session>();
  private readonly dialing = new Map<string, Promise<http2.ClientHttp2Session>>();
  /** Built once: an agent keys its pool by its options, and hashing 140 root PEMs per request costs ms. */
  private readonly trust: tls.SecureContext;
  private disposed = false;

  constructor(private readonly opts: UpstreamClientOptions) {
    this.trust = tls.createSecureContext({ ciphers: GATEWAY_CIPHERS, ...(opts.upstreamCa?.length ? { ca: [...tls.rootCertificates, ...opts.upstreamCa] } : {}) });
  }

  /**
   * Opens a request upstream. `rawHeaders` are end-to-end headers and carry the `Host` the client
   * named (checked by the caller); for HTTP/2 it becomes `:authority`.
   */
  async open(t: UpstreamTarget, method: string, path: string, rawHeaders: string[]): Promise<UpstreamExchange> {
    const key = `${t.host}:${t.port}`;
    let protocol = this.protocols.get(key);
    if (!protocol) {
      // First contact: offer both and remember the answer. An HTTP/1.1 answer costs one extra handshake, once.
      const socket = await this.dial(t, ['h2', 'http/1.1']);
      protocol = socket.alpnProtocol === 'h2' ? 'h2' : 'http/1.1';
      this.protocols.set(key, protocol);
      if (protocol === 'h2') this.adopt(key, t, socket);
      else socket.destroy();
    }
    return protocol === 'h2' ? this.openH2(key, t, method, path, rawHeaders) : this.openH1(t, method, path, rawHeaders);
  }

  dispose(): void {
    this.disposed = true;
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
    for (const s of this.sessions.values()) s.destroy();
    this.sessions.clear();
  }

  /** A verified TLS connection to the first checked address that answers. */
  private async dial(t: UpstreamTarget, ALPNProtocols: string[]): Promise<tls.TLSSocket> {
    let last: Error | undefined;
    for (const address of t.addresses) {
      try {
        return await new Promise<tls.TLSSocket>((resolve, reject) => {
          const socket = tls.connect({ host: address, port: t.port, servername: t.host, ALPNProtocols, secureContext: this.trust });
          socket.setNoDelay(true);
          socket.once('secureConnect', () => {
            socket.off('error', reject);
            resolve(socket);
          });
          socket.once('error', reject);
        });
      } catch (err) {
        last = err as Error;
      }
    }
    throw last ?? new Error(`no address to connect to ${t.host}`);
  }

  private agentFor(t: UpstreamTarget): https.Agent {
    const key = `${t.host}:${t.port}`;
    let agent = this.agents.get(key);
    if (!agent) {
      const addresses = t.addresses;
      agent = new https.Agent({
        keepAlive: true,
        noDelay: true,
        maxSockets: 32,
        secureContext: this.trust,
        // Connect to exactly the addresses the proxy checked: the name is never looked up again.
        lookup: ((_h: string, o: { all?: boolean }, cb: (...args: unknown[]) => void) => {
          const list = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
          if (o.all) cb(null, list);
          else cb(null, list[0]?.address, list[0]?.family);
        }) as unknown as net.LookupFunction,
      });
      this.agents.set(key, agent);
    }
    return agent;
  }

  /** An HTTP/1.1 request for a protocol upgrade (WebSocket), whatever the host negotiates otherwise. */
  openUpgrade(t: UpstreamTarget, method: string, path: string, rawHeaders: string[]): http.ClientRequest {
    return https.request({ host: t.host, port: t.port, servername: t.host, method, path, headers: rawHeaders, setHost: false, agent: this.agentFor(t) });
  }

  private openH1(t: UpstreamTarget, method: string, path: string, rawHeaders: string[]): UpstreamExchange {
    const headers = rawHeaders.some((_, i) => i % 2 === 0 && (rawHeaders[i] as string).toLowerCase() === 'host') ? rawHeaders : [...rawHeaders, 'Host', t.port === 443 ? t.host : `${t.host}:${t.port}`];
    const req = https.request({ host: t.host, port: t.port, servername: t.host, method, path, headers, setHost: false, agent: this.agentFor(t) });
    return {
      body: req,
      protocol: 'http/1.1',
      onResponse: (listener) =>
        req.on('response', (up) => listener({ status: up.statusCode ?? 502, statusMessage: up.statusMessage ?? '', rawHeaders: up.rawHeaders, body: up, complete: () => up.complete })),
      onError: (listener) => req.on('error', listener),
      destroy: () => req.destroy(),
    };
  }

  /** Runs HTTP/2 on a verified socket and keeps the session for the host until it closes or idles. */
  private adopt(key: string, t: UpstreamTarget, socket: tls.TLSSocket): http2.ClientHttp2Session {
    const session = http2.connect(`https://${t.host}:${t.port}`, { createConnection: () => socket });
    const forget = () => {
      if (this.sessions.get(key) === session) this.sessions.delete(key);
    };
    session.on('error', forget);
    session.once('close', forget);
    session.once('goaway', forget);
    // No stream for a while: let it go (a new request opens another).
    session.setTimeout(this.opts.idleTimeoutMs, () => session.close());
    if (this.disposed) session.destroy();
    else this.sessions.set(key, session);
    return session;
  }

  private sessionFor(key: string, t: UpstreamTarget): Promise<http2.ClientHttp2Session> | http2.ClientHttp2Session {
    const open = this.sessions.get(key);
    if (open && !open.closed && !open.destroyed) return open;
    let dialing = this.dialing.get(key);
    if (!dialing) {
      dialing = this.dial(t, ['h2', 'http/1.1'])
        .then((socket) => {
          if (socket.alpnProtocol === 'h2') return this.adopt(key, t, socket);
          // The server stopped offering HTTP/2: the next request probes again.
          socket.destroy();
          this.protocols.delete(key);
          throw new Error(`${t.host} no longer offers HTTP/2`);
        })
        .finally(() => this.dialing.delete(key));
      this.dialing.set(key, dialing);
    }
    return dialing;
  }

  private async openH2(key: string, t: UpstreamTarget, method: string, path: string, rawHeaders: string[]): Promise<UpstreamExchange> {
    const session = await this.sessionFor(key, t);
    const { host, ...rest } = headersObject(rawHeaders);
    const authority = (Array.isArray(host) ? host[0] : host) ?? (t.port === 443 ? t.host : `${t.host}:${t.port}`);
    const stream = session.request({ ...rest, ':method': method, ':path': path, ':authority': authority, ':scheme': 'https' });
    let ended = false;
    stream.once('end', () => (ended = true));
    return {
      body: stream,
      protocol: 'h2',
      onResponse: (listener) =>
        stream.once('response', (headers) =>
          listener({ status: Number(headers[':status'] ?? 502), statusMessage: '', rawHeaders: rawFromH2(headers), body: stream, complete: () => ended }),
        ),
      onError: (listener) => stream.on('error', listener),
      destroy: () => stream.destroy(),
    };
  }
}
