import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { pipeline } from 'node:stream';
import tls from 'node:tls';
import type { Disposable } from '../../common/disposable';
import type { CredentialBroker } from './credential-broker';
import { HOW_TO_PROPOSE, type NetworkApprovals } from './network-approvals';
import type { RunCa } from './run-ca';
import { canonicalPath, decideWithProject, parseRefUpdates, pushOutsidePrefix, refusedPushResult, type RuleDecision, type RuleSet } from './rules';
import { endToEndHeaders } from '../../common/hop-headers';

/**
 * The intercepting half of the egress gateway (docs/architecture.md §2.8). The egress proxy has
 * already checked the name, the allowlist and every resolved address; for a host that has a rule or
 * a bound secret it hands the client's CONNECT socket here instead of piping it. This terminates TLS
 * with a leaf from the run's CA, parses HTTP/1.1 (keep-alive, chunked, streamed bodies, upgrades),
 * judges each request, swaps placeholders for secrets, and forwards over a new TLS connection to the
 * checked addresses, verified against the host's trust store. Everything else stays a plain tunnel.
 */

/** One intercepted request, allowed or refused, when it is over. */
export interface GatewayRequestEvent {
  host: string;
  port: number;
  method: string;
  /** Path with query values redacted (`/search?q=…`). */
  path: string;
  allowed: boolean;
  /** The status the client got (the gateway's own 403/502, or upstream's). */
  status: number;
  rule?: string;
  reason?: string;
  /** The secret injected, by name. */
  secret?: string;
  address: string;
  bytesUp: number;
  bytesDown: number;
  started: number;
}

export interface TlsGatewayOptions {
  ca: RunCa;
  rules: RuleSet;
  /** The project's policy file: can only tighten. */
  projectRules?: RuleSet;
  broker?: CredentialBroker;
  /**
   * Extra certificate authorities trusted for upstream servers, ON TOP of Node's bundled roots (a
   * company CA; tests add their test server's CA). Verification is never turned off.
   */
  upstreamCa?: string[];
  idleTimeoutMs: number;
  /** How a denial tells the agent and user what to do next. */
  howToAsk?: (host: string, method: string, path: string) => string;
  /**
   * When set, a request a user rule refuses waits (bounded) for the user's Allow once / Allow for
   * this project / Deny instead of being refused at once.
   */
  approvals?: NetworkApprovals;
}

type Refused = { status: number; rule?: string; reason: string; secret?: string; askable?: boolean };
type Judged = { decision?: RuleDecision; headers: string[]; secret?: string };

interface Target {
  host: string;
  port: number;
  addresses: string[];
}

interface Served extends Target {
  onRequest(e: GatewayRequestEvent): void;
}

type Base = Omit<GatewayRequestEvent, 'allowed' | 'status' | 'bytesUp' | 'bytesDown' | 'rule' | 'reason' | 'secret'>;

/** Largest ref-update section of a push read before forwarding (many refs are a few KiB). */
const MAX_PUSH_COMMANDS = 256 * 1024;

/** The one Host header, lower-cased; '' when there are several (never a match). */
function hostHeaderOf(raw: string[]): string | undefined {
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === 'host') values.push((raw[i + 1] as string).trim().toLowerCase());
  if (values.length === 0) return undefined;
  return values.length === 1 ? (values[0] as string).replace(/\.$/, '').replace(/\.:/, ':') : '';
}

/** `/p?a=1&b=2` → `/p?a=…&b=…`: names stay (they say what was asked), values go (they may be secrets). */
export function redactQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url
    .slice(q + 1)
    .split('&')
    .map((kv) => {
      const eq = kv.indexOf('=');
      return eq < 0 ? kv : `${kv.slice(0, eq)}=…`;
    });
  return `${url.slice(0, q)}?${parts.join('&')}`;
}

export class TlsGateway implements Disposable {
  private readonly server: http.Server;
  private readonly targets = new WeakMap<net.Socket, Served>();
  private readonly agents = new Map<string, https.Agent>();
  /** Built once: an agent keys its pool by its options, and hashing 140 root PEMs per request costs ms. */
  private readonly trust: tls.SecureContext | undefined;

  constructor(private readonly opts: TlsGatewayOptions) {
    this.trust = opts.upstreamCa?.length ? tls.createSecureContext({ ca: [...tls.rootCertificates, ...opts.upstreamCa] }) : undefined;
    // Never listens: sockets are handed to it one by one after TLS is terminated.
    this.server = http.createServer({ requestTimeout: 0, keepAliveTimeout: 5_000, maxHeaderSize: 32 * 1024 });
    this.server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => this.onRequest(req, res));
    this.server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on('clientError', (_err: Error, socket: net.Socket) => socket.destroy());
  }

  /** True when this host's traffic must be seen: a rule names it or a secret is bound to it. */
  intercepts(host: string): boolean {
    return this.opts.rules.covers(host) || this.opts.projectRules?.covers(host) === true || this.opts.broker?.covers(host) === true;
  }

  /**
   * Takes over a client socket whose CONNECT was admitted: answers 200, terminates TLS with the
   * host's leaf, and serves HTTP on it. The socket is closed when either side is done.
   */
  async handle(client: net.Socket, head: Buffer, target: Target, onRequest: (e: GatewayRequestEvent) => void): Promise<void> {
    const cert = await this.opts.ca.leafFor(target.host);
    if (client.destroyed) return;
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) client.unshift(head);
    const secure = new tls.TLSSocket(client, {
      isServer: true,
      key: this.opts.ca.leafKeyPem,
      cert,
      // HTTP/1.1 only: a client offering h2 falls back (docs/architecture.md §2.8).
      ALPNProtocols: ['http/1.1'],
    });
    // Small requests must not wait on Nagle's algorithm (a header and body written apart).
    client.setNoDelay(true);
    secure.on('error', () => secure.destroy());
    secure.once('close', () => client.destroy());
    secure.setTimeout(this.opts.idleTimeoutMs, () => secure.destroy());
    this.targets.set(secure, { ...target, onRequest });
    this.server.emit('connection', secure);
  }

  /**
   * Plain HTTP cannot be judged or carry a secret safely: refused for intercepted hosts, and for any
   * host when it carries a placeholder. Returns the reason, or undefined.
   */
  plainHttpRefusal(host: string, url: string, rawHeaders: string[]): string | undefined {
    if (this.intercepts(host)) return `${host} has rules or a secret, so it is reachable over https:// only`;
    const broker = this.opts.broker;
    if (!broker) return undefined;
    const name = broker.inUrl(url) ?? rawHeaders.map((v) => broker.inUrl(v)).find(Boolean);
    return name ? `the placeholder of secret "${name}" was sent over plain HTTP to ${host}` : undefined;
  }

  dispose(): void {
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
    this.server.close();
  }

  private agentFor(t: Target): https.Agent {
    const key = `${t.host}:${t.port}`;
    let agent = this.agents.get(key);
    if (!agent) {
      const addresses = t.addresses;
      agent = new https.Agent({
        keepAlive: true,
        noDelay: true,
        maxSockets: 32,
        ...(this.trust ? { secureContext: this.trust } : {}),
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

  /**
   * The decision and the rewritten headers, or a refusal (status, rule, reason). `approved` is the
   * user's answer to an earlier refusal: it stands in for the user's rules (the project's file still
   * tightens, and every other check runs again).
   */
  private judge(req: http.IncomingMessage, t: Target, approved?: RuleDecision): Judged | Refused {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    const broker = this.opts.broker;
    // The request must name the host the tunnel was admitted for: a CDN that routes by Host would
    // otherwise carry an injected secret to another site behind it (domain fronting).
    const named = hostHeaderOf(req.rawHeaders);
    if (named !== undefined && named !== t.host && named !== `${t.host}:${t.port}`) {
      return { status: 403, reason: `the Host header (${named.slice(0, 100)}) does not name ${t.host}, the host this connection was opened to` };
    }
    const inUrl = broker?.inUrl(url);
    if (inUrl) return { status: 403, reason: `the placeholder of secret "${inUrl}" is in the URL; secrets are sent only in headers`, secret: inUrl };
    const ruleReq = { host: t.host, method, path, query: q < 0 ? '' : url.slice(q + 1) };
    let decision: RuleDecision | undefined;
    if (approved) {
      const p = this.opts.projectRules?.decide(ruleReq);
      decision = p && !p.allowed ? { ...p, rule: `${p.rule} (project policy)`, byProject: true } : approved;
    } else decision = decideWithProject(this.opts.rules, this.opts.projectRules, ruleReq);
    // Only the user's own rules are put to the user; the project's file can only tighten.
    if (decision && !decision.allowed) return { status: 403, rule: decision.rule, reason: decision.reason, ...(decision.byProject || approved ? {} : { askable: true }) };
    let headers = endToEndHeaders(req.rawHeaders, req.headers.upgrade !== undefined);
    let secret: string | undefined;
    if (broker) {
      const swapped = broker.swap(t.host, path, headers);
      if ('refused' in swapped) return { status: 403, ...(decision ? { rule: decision.rule } : {}), reason: swapped.refused, secret: swapped.secret };
      headers = swapped.headers;
      secret = swapped.injected;
      if (secret) {
        // A compressed echo of the secret would slip past the scrubber: ask for plain bytes.
        headers = headers.filter((_, i, all) => (i % 2 === 0 ? (all[i] as string).toLowerCase() !== 'accept-encoding' : (all[i - 1] as string).toLowerCase() !== 'accept-encoding'));
        headers.push('Accept-Encoding', 'identity');
      }
    }
    return { ...(decision ? { decision } : {}), headers, ...(secret ? { secret } : {}) };
  }

  private denialBody(t: Target, method: string, path: string, rule: string | undefined, reason: string): string {
    const origin = `https://${t.host}${t.port === 443 ? '' : `:${t.port}`}`;
    const ask =
      this.opts.howToAsk?.(t.host, method, path) ??
      `ask the user to allow it from the run view, or propose a narrower rule with a reason (${HOW_TO_PROPOSE}); \`airlock network check ${origin}${path} --method ${method}\` shows the deciding rule`;
    return `airlock: ${method} ${origin}${path} refused — ${reason}${rule ? ` (rule: ${rule})` : ''}.\nTo go on: ${ask}.\n`;
  }

  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const t = this.targets.get(req.socket);
    if (!t) {
      res.destroy();
      return;
    }
    const started = performance.now();
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const shown = redactQuery(url);
    const base = { host: t.host, port: t.port, method, path: shown, address: t.addresses[0] ?? '', started };
    if (!url.startsWith('/')) {
      this.refuse(req, res, t, { status: 400, reason: 'the request target must be a path' }, base);
      return;
    }
    const verdict = this.judge(req, t);
    if ('status' in verdict && verdict.askable && this.opts.approvals) {
      void this.askThenServe(req, res, t, verdict, base);
      return;
    }
    if ('status' in verdict) {
      this.refuse(req, res, t, verdict, base);
      return;
    }
    this.serve(req, res, t, verdict, base);
  }

  /** Holds a refused request (its body unread) until the user answers; then serves or refuses it. */
  private async askThenServe(req: http.IncomingMessage, res: http.ServerResponse, t: Served, refused: Refused, base: Base): Promise<void> {
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.once('close', onClose);
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const rawPath = q < 0 ? url : url.slice(0, q);
    const answer = await (this.opts.approvals as NetworkApprovals).ask({ host: t.host, port: t.port, method: base.method, path: base.path, canonicalPath: canonicalPath(rawPath), deniedBy: refused.rule ?? refused.reason }, gone.signal);
    res.off('close', onClose);
    if (gone.signal.aborted || res.destroyed) return;
    if (answer === 'deny') {
      this.refuse(req, res, t, { ...refused, reason: `${refused.reason}; the user denied it` }, base);
      return;
    }
    const by = answer === 'once' ? 'allowed once by the user' : 'allowed for this project by the user';
    const again = this.judge(req, t, { allowed: true, rule: `${by} (was refused by: ${refused.rule ?? refused.reason})`, reason: by });
    if ('status' in again) this.refuse(req, res, t, again, base);
    else this.serve(req, res, t, again, base);
  }

  private serve(req: http.IncomingMessage, res: http.ServerResponse, t: Served, verdict: Judged, base: Base): void {
    const url = req.url ?? '/';
    const method = base.method;
    const { decision, headers, secret } = verdict;
    const record = { ...base, ...(decision ? { rule: decision.rule } : {}), ...(secret ? { secret } : {}) };
    let bytesUp = 0;
    let bytesDown = 0;
    let done = false;
    const finish = (status: number, reason?: string) => {
      if (done) return;
      done = true;
      t.onRequest({ ...record, allowed: true, status, ...(reason ? { reason } : {}), bytesUp, bytesDown });
    };
    const upstream = https.request({
      host: t.host,
      port: t.port,
      servername: t.host,
      method,
      path: url,
      headers,
      setHost: false,
      agent: this.agentFor(t),
    });
    const forwardBody = (prefix?: Buffer) => {
      if (prefix?.length) upstream.write(prefix);
      req.on('data', (c: Buffer) => (bytesUp += c.length));
      req.pipe(upstream);
    };
    upstream.on('response', (up: http.IncomingMessage) => {
      const scrub = secret ? this.opts.broker?.scrubber(t.host) : undefined;
      let out = endToEndHeaders(up.rawHeaders);
      if (this.opts.broker) out = out.map((v, i) => (i % 2 === 1 ? this.opts.broker!.scrubText(v) : v));
      // Scrubbing can change the body's length: let Node frame it (chunked) instead.
      if (scrub) out = out.filter((_, i, all) => (i % 2 === 0 ? (all[i] as string).toLowerCase() !== 'content-length' : (all[i - 1] as string).toLowerCase() !== 'content-length'));
      res.writeHead(up.statusCode ?? 502, up.statusMessage, out);
      up.on('data', (c: Buffer) => (bytesDown += c.length));
      const onEnd = (err?: Error | null) => {
        if (err) res.destroy();
        finish(up.statusCode ?? 502, err || !up.complete ? 'closed before the response was complete' : undefined);
      };
      if (scrub) pipeline(up, scrub, res, onEnd);
      else pipeline(up, res, onEnd);
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      const why = `upstream failed (${err.code ?? err.message})`;
      if (!res.headersSent) {
        const body = `airlock: could not reach https://${t.host}:${t.port} (${why})\n`;
        res.writeHead(502, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'X-Airlock-Egress': 'upstream-failed' });
        res.end(body);
      } else res.destroy();
      finish(502, why);
    });
    res.once('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });

    if (!decision?.pushPrefix) {
      forwardBody();
      return;
    }
    // A push allowed only under a prefix: read the ref updates before any byte goes upstream.
    const prefix = decision.pushPrefix;
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const stop = (reason: string) => {
      settled = true;
      req.off('data', onData);
      upstream.destroy();
      done = true;
      this.refuse(req, res, t, { status: 403, ...(decision.rule ? { rule: decision.rule } : {}), reason, ...(secret ? { secret } : {}) }, base);
    };
    const onData = (c: Buffer) => {
      chunks.push(c);
      size += c.length;
      const buf = Buffer.concat(chunks);
      let parsed: ReturnType<typeof parseRefUpdates>;
      try {
        parsed = parseRefUpdates(buf);
      } catch (err) {
        stop(`the push could not be read (${(err as Error).message})`);
        return;
      }
      if (!parsed) {
        if (size > MAX_PUSH_COMMANDS) stop('the push names more refs than the gateway reads');
        return;
      }
      settled = true;
      req.off('data', onData);
      const outside = pushOutsidePrefix(parsed.updates, prefix);
      if (outside) {
        // Answer in git's own words (the rest of the pack is read and dropped, never forwarded).
        upstream.destroy();
        done = true;
        req.resume();
        req.once('end', () => {
          if (res.headersSent) return;
          const result = refusedPushResult(parsed.updates, parsed.capabilities, `${outside} (rule: ${decision.rule})`);
          res.writeHead(200, { 'Content-Type': 'application/x-git-receive-pack-result', 'Content-Length': result.length, 'Cache-Control': 'no-cache' });
          res.end(result);
          t.onRequest({ ...base, allowed: false, status: 200, rule: decision.rule, reason: outside, ...(secret ? { secret } : {}), bytesUp: 0, bytesDown: result.length });
        });
        return;
      }
      bytesUp += buf.length;
      forwardBody(buf);
    };
    req.on('data', onData);
    req.once('end', () => {
      if (!settled) stop('the push ended before its ref updates');
    });
  }

  private refuse(req: http.IncomingMessage, res: http.ServerResponse, t: Served, r: Refused, base: Base): void {
    const body = this.denialBody(t, base.method, base.path, r.rule, r.reason);
    if (!res.headersSent) {
      res.writeHead(r.status, {
        'Content-Type': 'text/plain; charset=utf-8',
        'Content-Length': Buffer.byteLength(body),
        'X-Airlock-Egress': 'denied',
        // The rest of a refused upload is not read: close rather than drain it.
        Connection: 'close',
      });
      res.end(body);
    }
    req.resume();
    t.onRequest({ ...base, allowed: false, status: r.status, ...(r.rule ? { rule: r.rule } : {}), reason: r.reason, ...(r.secret ? { secret: r.secret } : {}), bytesUp: 0, bytesDown: 0 });
  }

  /** WebSocket (and other) upgrades: judged like a request, then the two sockets are joined. */
  private onUpgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    const t = this.targets.get(req.socket as net.Socket) ?? this.targets.get(socket);
    if (!t) {
      socket.destroy();
      return;
    }
    const started = performance.now();
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const base = { host: t.host, port: t.port, method, path: redactQuery(url), address: t.addresses[0] ?? '', started };
    const verdict = this.judge(req, t);
    const reply = (status: number, text: string, body: string) => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
    };
    if ('status' in verdict) {
      reply(verdict.status, 'Forbidden', this.denialBody(t, method, base.path, verdict.rule, verdict.reason));
      t.onRequest({ ...base, allowed: false, status: verdict.status, ...(verdict.rule ? { rule: verdict.rule } : {}), reason: verdict.reason, bytesUp: 0, bytesDown: 0 });
      return;
    }
    const upstream = https.request({ host: t.host, port: t.port, servername: t.host, method, path: url, headers: verdict.headers, setHost: false, agent: this.agentFor(t) });
    const record = { ...base, ...(verdict.decision ? { rule: verdict.decision.rule } : {}), ...(verdict.secret ? { secret: verdict.secret } : {}) };
    upstream.on('upgrade', (up: http.IncomingMessage, upSocket: net.Socket, upHead: Buffer) => {
      let head101 = `HTTP/1.1 ${up.statusCode ?? 101} ${up.statusMessage ?? 'Switching Protocols'}\r\n`;
      for (let i = 0; i + 1 < up.rawHeaders.length; i += 2) head101 += `${up.rawHeaders[i]}: ${up.rawHeaders[i + 1]}\r\n`;
      socket.write(`${head101}\r\n`);
      if (upHead.length) socket.write(upHead);
      if (head.length) upSocket.write(head);
      let bytesUp = head.length;
      let bytesDown = upHead.length;
      socket.on('data', (c: Buffer) => (bytesUp += c.length));
      upSocket.on('data', (c: Buffer) => (bytesDown += c.length));
      socket.pipe(upSocket).pipe(socket);
      const close = () => {
        socket.destroy();
        upSocket.destroy();
      };
      socket.once('close', close);
      upSocket.once('close', () => {
        close();
        t.onRequest({ ...record, allowed: true, status: up.statusCode ?? 101, bytesUp, bytesDown });
      });
      socket.on('error', close);
      upSocket.on('error', close);
    });
    upstream.on('response', (up: http.IncomingMessage) => {
      // The server declined the upgrade: pass its answer on and close.
      let text = `HTTP/1.1 ${up.statusCode ?? 502} ${up.statusMessage ?? ''}\r\n`;
      const out = endToEndHeaders(up.rawHeaders).filter((_, i, all) => (i % 2 === 0 ? (all[i] as string).toLowerCase() !== 'content-length' : (all[i - 1] as string).toLowerCase() !== 'content-length'));
      for (let i = 0; i + 1 < out.length; i += 2) text += `${out[i]}: ${out[i + 1]}\r\n`;
      socket.write(`${text}Connection: close\r\n\r\n`);
      up.pipe(socket);
      up.once('end', () => t.onRequest({ ...record, allowed: true, status: up.statusCode ?? 502, bytesUp: 0, bytesDown: 0 }));
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      reply(502, 'Bad Gateway', `airlock: could not reach https://${t.host}:${t.port} (${err.code ?? err.message})\n`);
      t.onRequest({ ...record, allowed: true, status: 502, reason: err.code ?? err.message, bytesUp: 0, bytesDown: 0 });
    });
    upstream.end();
  }
}
