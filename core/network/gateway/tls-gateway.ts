import http from 'node:http';
import http2 from 'node:http2';
import type net from 'node:net';
import { constants as cryptoConstants } from 'node:crypto';
import { Duplex, pipeline, type Transform } from 'node:stream';
import tls from 'node:tls';
import type { Disposable } from '../../common/disposable';
import { endToEndHeaders } from '../../common/hop-headers';
import type { Secret } from '../../keys/secret';
import type { CredentialBroker } from './credential-broker';
import { answerPlain, hostHeaderOf, redactQuery, requestRawHeaders, withoutHeaders, writeHead, type GatewayRequest, type GatewayResponse } from './gateway-http';
import { HOW_TO_PROPOSE, type NetworkApprovals } from './network-approvals';
import { checkPush, type PushCheck } from './push-guard';
import type { RunCa } from './run-ca';
import { canonicalPath, decideWithProject, pathReadings, refusedPushResult, type RuleDecision, type RuleSet } from './rules';
import { HeldBody } from './held-body';
import { contentEncodingOf, decodersFor } from './response-decoding';
import { relayUpgrade } from './upgrade-relay';
import { GATEWAY_CIPHERS, UpstreamClient, type UpstreamExchange, type UpstreamResponse, type UpstreamTarget } from './upstream-client';
import { debugLog } from '../../common/debug-log';

export { redactQuery } from './gateway-http';

/**
 * The intercepting half of the egress gateway (docs/architecture.md §2.8). The egress proxy has
 * already checked the name, the allowlist and every resolved address; for a host that has a rule or
 * a bound secret it hands the client's CONNECT socket here instead of piping it. This terminates TLS
 * with a leaf from the run's CA, serves HTTP/2 or HTTP/1.1 (keep-alive, chunked, streamed bodies,
 * upgrades) as the client negotiates, judges each request, swaps placeholders for secrets, and
 * forwards it (upstream-client.ts) to the checked addresses, verified against the host's trust
 * store, in whatever protocol the server speaks. Everything else stays a plain tunnel.
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
type Judged = {
  decision?: RuleDecision;
  headers: string[];
  secret?: string;
  /** The headers before the swap, kept when the secret can be fetched again: a 401 is retried with a fresh value. */
  unswapped?: string[];
};
/** A command secret's value is needed and not held yet (credential-broker.ts `swap`). */
type NeedsValue = { fetch: string };

type Target = UpstreamTarget;

interface Served extends Target {
  onRequest(e: GatewayRequestEvent): void;
}

type Base = Omit<GatewayRequestEvent, 'allowed' | 'status' | 'bytesUp' | 'bytesDown' | 'rule' | 'reason' | 'secret'>;

/**
 * The decrypted socket as a plain stream for node:http2. Handed this TLS socket itself (made over the
 * proxy's client socket, not by a TLS server), the HTTP/2 session never received a frame; through a
 * plain stream it reads what TLS decrypted, at the cost of one stream hop per chunk.
 */
function streamView(socket: tls.TLSSocket): Duplex {
  const view = new Duplex({
    read: () => void socket.resume(),
    write: (chunk: Buffer, _enc, cb) => void socket.write(chunk, cb),
    final: (cb) => {
      socket.end();
      cb();
    },
    destroy: (err, cb) => {
      socket.destroy();
      cb(err);
    },
  });
  socket.on('data', (d: Buffer) => {
    if (!view.push(d)) socket.pause();
  });
  socket.once('end', () => view.push(null));
  socket.once('close', () => view.destroy());
  return view;
}

export class TlsGateway implements Disposable {
  private readonly server: http.Server;
  /** HTTP/2 clients (ALPN `h2`): the same rules, secrets, audit, denials and approvals. */
  private readonly h2: http2.Http2Server;
  private readonly targets = new WeakMap<net.Socket, Served>();
  private readonly h2Targets = new WeakMap<http2.Http2Session, Served>();
  /** The target of the HTTP/2 session being made right now (the server makes it synchronously). */
  private nextH2: Served | undefined;
  private readonly upstream: UpstreamClient;
  private readonly leafContexts = new Map<string, Promise<tls.SecureContext>>();

  constructor(private readonly opts: TlsGatewayOptions) {
    this.upstream = new UpstreamClient({ ...(opts.upstreamCa ? { upstreamCa: opts.upstreamCa } : {}), idleTimeoutMs: opts.idleTimeoutMs });
    // Never listens: sockets are handed to it one by one after TLS is terminated.
    this.server = http.createServer({ requestTimeout: 0, keepAliveTimeout: 5_000, maxHeaderSize: 32 * 1024 });
    this.server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => this.onRequest(req, res));
    this.server.on('upgrade', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => this.onUpgrade(req, socket, head));
    this.server.on('clientError', (_err: Error, socket: net.Socket) => socket.destroy());
    // Streams at once per session bounded like a browser-facing server's: each one is an upstream request.
    this.h2 = http2.createServer({ maxSessionMemory: 32, settings: { maxHeaderListSize: 32 * 1024, maxConcurrentStreams: 128 } });
    this.h2.on('session', (session: http2.ServerHttp2Session) => {
      if (this.nextH2) this.h2Targets.set(session, this.nextH2);
      else session.destroy();
      this.nextH2 = undefined;
    });
    this.h2.on('request', (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => this.onRequest(req, res));
    this.h2.on('sessionError', () => undefined);
  }

  /** True when this host's traffic must be seen: a rule names it or a secret is bound to it. */
  intercepts(host: string): boolean {
    return this.opts.rules.covers(host) || this.opts.projectRules?.covers(host) === true || this.opts.broker?.covers(host) === true;
  }

  /**
   * Takes over a client socket whose CONNECT was admitted: answers 200, terminates TLS with the
   * host's leaf, and serves HTTP/2 or HTTP/1.1 on it, as the client's ALPN asks. The socket is closed
   * when either side is done.
   */
  async handle(client: net.Socket, head: Buffer, target: Target, onRequest: (e: GatewayRequestEvent) => void): Promise<void> {
    const secureContext = await this.leafContext(target.host);
    if (client.destroyed) return;
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length) client.unshift(head);
    const secure = new tls.TLSSocket(client, {
      isServer: true,
      secureContext,
      // h2 first, as servers prefer it; a client without ALPN gets HTTP/1.1 (docs/architecture.md §2.8).
      ALPNProtocols: ['h2', 'http/1.1'],
    });
    // Small requests must not wait on Nagle's algorithm (a header and body written apart).
    client.setNoDelay(true);
    secure.on('error', () => secure.destroy());
    secure.once('close', () => client.destroy());
    secure.setTimeout(this.opts.idleTimeoutMs, () => secure.destroy());
    const served = { ...target, onRequest };
    secure.once('secure', () => {
      if (secure.alpnProtocol === 'h2') {
        this.nextH2 = served;
        this.h2.emit('connection', streamView(secure));
      } else {
        this.targets.set(secure, served);
        this.server.emit('connection', secure);
      }
    });
  }

  /** One TLS context per intercepted host (its leaf), made once: parsing the key per connection costs. */
  private leafContext(host: string): Promise<tls.SecureContext> {
    let ctx = this.leafContexts.get(host);
    if (!ctx) {
      ctx = this.opts.ca.leafFor(host).then((cert) =>
        tls.createSecureContext({ key: this.opts.ca.leafKeyPem, cert, ciphers: GATEWAY_CIPHERS, secureOptions: cryptoConstants.SSL_OP_CIPHER_SERVER_PREFERENCE }),
      );
      this.leafContexts.set(host, ctx);
      ctx.catch(() => this.leafContexts.delete(host));
    }
    return ctx;
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
    this.upstream.dispose();
    this.server.close();
    this.h2.close();
  }

  private targetOf(req: GatewayRequest): Served | undefined {
    return req instanceof http2.Http2ServerRequest ? this.h2Targets.get(req.stream.session as http2.Http2Session) : this.targets.get(req.socket);
  }

  /**
   * The decision and the rewritten headers, or a refusal (status, rule, reason). `approved` is the
   * user's answer to an earlier refusal: it stands in for the user's rules (the project's file still
   * tightens, and every other check runs again).
   */
  private judge(req: GatewayRequest, t: Target, approved?: RuleDecision): Judged | Refused | NeedsValue {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const method = req.method ?? 'GET';
    const broker = this.opts.broker;
    const raw = requestRawHeaders(req);
    // The request must name the host the tunnel was admitted for: a CDN that routes by Host would
    // otherwise carry an injected secret to another site behind it (domain fronting).
    const named = hostHeaderOf(raw);
    if (named !== undefined && named !== t.host && named !== `${t.host}:${t.port}`) {
      return { status: 403, reason: `the Host header (${named.slice(0, 100)}) does not name ${t.host}, the host this connection was opened to` };
    }
    // Judged as servers read it (rules.ts pathReadings): a path that cannot be is refused here,
    // on every intercepted host, rules or not; so is a method a server might read another way.
    const readable = pathReadings(path);
    if ('unjudgeable' in readable) return { status: 403, reason: `${readable.unjudgeable}, so it cannot be judged` };
    if (!/^[A-Z]+$/.test(method)) return { status: 403, reason: `the method "${method.slice(0, 20)}" is not an upper-case HTTP method` };
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
    let headers = endToEndHeaders(raw, req.headers.upgrade !== undefined);
    let secret: string | undefined;
    let unswapped: string[] | undefined;
    if (broker) {
      // Every answer from a bound host is scrubbed (a server may echo a value it stored earlier), and
      // a compressed echo would hide from the scrubber: ask for plain bytes (a server that compresses
      // anyway is decoded before scrubbing, relayResponse).
      if (broker.covers(t.host)) headers = [...withoutHeaders(headers, 'accept-encoding'), 'Accept-Encoding', 'identity'];
      const swapped = broker.swap(t.host, path, headers);
      if ('fetch' in swapped) return swapped;
      if ('refused' in swapped) return { status: 403, ...(decision ? { rule: decision.rule } : {}), reason: swapped.refused, secret: swapped.secret };
      if (swapped.injected && broker.refreshable(swapped.injected)) unswapped = headers;
      headers = swapped.headers;
      secret = swapped.injected;
    }
    return { ...(decision ? { decision } : {}), headers, ...(secret ? { secret } : {}), ...(unswapped ? { unswapped } : {}) };
  }

  /**
   * `judge`, fetching a command secret's value first when the request needs one that is not held
   * (its command runs on the host once, however many requests wait). A command that fails refuses
   * the request with 502 and says why, never with the command's output.
   */
  private async judgeFetching(req: GatewayRequest, t: Target, approved?: RuleDecision): Promise<Judged | Refused> {
    // A request may carry several command secrets' placeholders: each is fetched in turn.
    for (let i = 0; i < 8; i++) {
      const verdict = this.judge(req, t, approved);
      if (!('fetch' in verdict)) return verdict;
      try {
        await this.opts.broker?.fetch(verdict.fetch);
      } catch (err) {
        return { status: 502, reason: `the secret "${verdict.fetch}" could not be fetched: ${(err as Error).message}`, secret: verdict.fetch };
      }
    }
    return { status: 502, reason: 'the secrets this request carries could not be fetched' };
  }

  private denialBody(t: Target, method: string, path: string, rule: string | undefined, reason: string): string {
    const origin = `https://${t.host}${t.port === 443 ? '' : `:${t.port}`}`;
    const ask =
      this.opts.howToAsk?.(t.host, method, path) ??
      `ask the user to allow it from the run view, or propose a narrower rule with a reason (${HOW_TO_PROPOSE}); \`airlock network check ${origin}${path} --method ${method}\` shows the deciding rule`;
    return `airlock: ${method} ${origin}${path} refused — ${reason}${rule ? ` (rule: ${rule})` : ''}.\nTo go on: ${ask}.\n`;
  }

  /** The body of a request the gateway could not send (a secret that could not be fetched). */
  private failureBody(t: Target, method: string, path: string, reason: string): string {
    return `airlock: ${method} https://${t.host}${t.port === 443 ? '' : `:${t.port}`}${path} was not sent — ${reason}.\n`;
  }

  private onRequest(req: GatewayRequest, res: GatewayResponse): void {
    const t = this.targetOf(req);
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
    const judged = this.judge(req, t);
    if ('fetch' in judged) {
      void this.judgeFetching(req, t).then((v) => {
        if (!res.destroyed) this.dispatch(req, res, t, v, base);
      });
      return;
    }
    this.dispatch(req, res, t, judged, base);
  }

  /** Serves, refuses, or puts to the user a judged request. */
  private dispatch(req: GatewayRequest, res: GatewayResponse, t: Served, verdict: Judged | Refused, base: Base): void {
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
  private async askThenServe(req: GatewayRequest, res: GatewayResponse, t: Served, refused: Refused, base: Base): Promise<void> {
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
    const again = await this.judgeFetching(req, t, { allowed: true, rule: `${by} (was refused by: ${refused.rule ?? refused.reason})`, reason: by });
    if (res.destroyed) return;
    if ('status' in again) this.refuse(req, res, t, again, base);
    else this.serve(req, res, t, again, base);
  }

  private serve(req: GatewayRequest, res: GatewayResponse, t: Served, verdict: Judged, base: Base): void {
    const { decision, headers, secret } = verdict;
    const record = { ...base, ...(decision ? { rule: decision.rule } : {}), ...(secret ? { secret } : {}) };
    let bytesUp = 0;
    let bytesDown = 0;
    let done = false;
    let exchange: UpstreamExchange | undefined;
    let note: string | undefined;
    const finish = (status: number, reason?: string) => {
      if (done) return;
      done = true;
      const why = [note, reason].filter(Boolean).join('; ');
      t.onRequest({ ...record, allowed: true, status, ...(why ? { reason: why } : {}), bytesUp, bytesDown });
    };
    const retry = this.retryPlan(verdict);
    if (retry) res.once('close', () => retry.body.drop());
    let retried = false;
    const answered = (ex: UpstreamExchange) => (up: UpstreamResponse) => {
      if (exchange !== ex) return;
      if (up.status === 401 && retry && !retried) {
        retried = true;
        void this.retryAfter401(retry, up, t, base, (fresh) => {
          if (!fresh || res.destroyed) {
            if (!res.destroyed) this.relayResponse(up, res, t, (n) => (bytesDown += n), finish);
            else up.body.destroy();
            return;
          }
          // The stale answer is read and dropped; the same request goes again with the fresh value.
          up.body.resume();
          note = `sent again after a 401 with a fresh value of secret "${retry.secret}"`;
          this.upstream.open(t, base.method, req.url ?? '/', fresh.headers).then((again) => {
            exchange = again;
            if (res.destroyed) {
              again.destroy();
              finish(499, 'the client went away');
              return;
            }
            again.onResponse(answered(again));
            again.onError((err) => exchange === again && failed(err));
            again.body.end(fresh.body);
          }, failed);
        });
        return;
      }
      this.relayResponse(up, res, t, (n) => (bytesDown += n), finish);
    };
    const failed = (err: NodeJS.ErrnoException) => {
      const why = `upstream failed (${err.code ?? err.message})`;
      if (!res.headersSent) answerPlain(res, 502, `airlock: could not reach https://${t.host}:${t.port} (${why})\n`, 'upstream-failed');
      else res.destroy();
      finish(502, why);
    };
    res.once('close', () => {
      if (!res.writableFinished) exchange?.destroy();
    });
    const forward = (prefix?: Buffer) => {
      this.upstream.open(t, base.method, req.url ?? '/', headers).then((ex) => {
        exchange = ex;
        if (res.destroyed) {
          ex.destroy();
          finish(499, 'the client went away');
          return;
        }
        ex.onResponse(answered(ex));
        // An error of an exchange already replaced by its retry is no longer this request's.
        ex.onError((err) => exchange === ex && !(retried && retry) && failed(err));
        if (prefix?.length) {
          bytesUp += prefix.length;
          ex.body.write(prefix);
          retry?.body.add(prefix);
        }
        req.on('data', (c: Buffer) => {
          bytesUp += c.length;
          retry?.body.add(c);
        });
        if (retry) req.once('end', () => retry.body.end());
        req.pipe(ex.body);
      }, failed);
    };

    if (!decision?.pushPrefix) return forward();
    // A push allowed only under a prefix: read the ref updates before any byte goes upstream.
    const rule = decision.rule;
    checkPush(req, decision.pushPrefix, (check) => {
      if (check.kind === 'forward') {
        forward(check.head);
        return;
      }
      done = true;
      if (check.kind === 'unreadable') {
        this.refuse(req, res, t, { status: 403, ...(rule ? { rule } : {}), reason: check.reason, ...(secret ? { secret } : {}) }, base);
        return;
      }
      this.answerRefusedPush(req, res, t, base, check, rule, secret);
    });
  }

  /**
   * A command secret's value may have expired upstream: the body is held (bounded) so a 401 can be
   * answered once by fetching the value again and sending the same request with it.
   */
  private retryPlan({ secret, unswapped }: Judged): { secret: string; stale: Secret<string>; unswapped: string[]; body: HeldBody } | undefined {
    const stale = secret && unswapped ? this.opts.broker?.heldValue(secret) : undefined;
    return stale && secret && unswapped ? { secret, stale, unswapped, body: new HeldBody() } : undefined;
  }

  /** A push with a ref outside its prefix: answered in git's own words (the rest of the pack is read and dropped, never forwarded). */
  private answerRefusedPush(req: GatewayRequest, res: GatewayResponse, t: Served, base: Base, check: Extract<PushCheck, { kind: 'outside' }>, rule: RuleDecision['rule'], secret: Judged['secret']): void {
    req.resume();
    req.once('end', () => {
      if (res.headersSent) return;
      const result = refusedPushResult(check.parsed.updates, check.parsed.capabilities, `${check.outside} (rule: ${rule})`);
      writeHead(res, 200, 'OK', ['Content-Type', 'application/x-git-receive-pack-result', 'Content-Length', String(result.length), 'Cache-Control', 'no-cache']);
      res.end(result);
      t.onRequest({ ...base, allowed: false, status: 200, rule, reason: check.outside, ...(secret ? { secret } : {}), bytesUp: 0, bytesDown: result.length });
    });
  }

  /**
   * After a 401 to a request that carried a command secret: the whole held body (the client may
   * still be sending it), then a fresh value (the command runs again unless another request already
   * replaced the value) swapped into the request's own headers. `then(undefined)` when the request
   * cannot go again — body over the bound, the client gone, the command failed or printed the same
   * value — and the 401 is relayed as it came.
   */
  private async retryAfter401(
    retry: { secret: string; stale: Secret<string>; unswapped: string[]; body: HeldBody },
    up: UpstreamResponse,
    t: Target,
    base: Base,
    then: (fresh: { headers: string[]; body: Buffer } | undefined) => void,
  ): Promise<void> {
    const broker = this.opts.broker;
    const body = await retry.body.whole();
    if (!body || !broker || up.body.destroyed) return then(undefined);
    const fresh = await broker.refresh(retry.secret, retry.stale).catch(debugLog.swallow('gateway.secret.refresh'));
    if (!fresh) return then(undefined);
    const path = (base.path.split('?')[0] as string) || '/';
    const swapped = broker.swap(t.host, path, retry.unswapped);
    then('headers' in swapped ? { headers: swapped.headers, body } : undefined);
  }

  /**
   * The upstream's answer to the client. Headers and reason phrase are scrubbed of every secret; the
   * body of every answer from a secret-bound host passes the scrubber, decoded first when the server
   * compressed it although asked for identity (an encoding the gateway cannot read is refused).
   */
  private relayResponse(up: UpstreamResponse, res: GatewayResponse, t: Target, counted: (n: number) => void, finish: (status: number, reason?: string) => void): void {
    const broker = this.opts.broker;
    const scrub = broker?.scrubber(t.host);
    let out = endToEndHeaders(up.rawHeaders);
    if (broker) out = out.map((v, i) => (i % 2 === 1 ? broker.scrubText(v) : v));
    let decoders: Transform[] = [];
    if (scrub) {
      const decoding = decodersFor(contentEncodingOf(out));
      if ('unreadable' in decoding) {
        scrub.destroy();
        up.body.destroy();
        const why = `${t.host} answered in the "${decoding.unreadable}" encoding although asked for identity; an answer from a host bound to a secret is never relayed unread`;
        if (!res.headersSent) answerPlain(res, 502, `airlock: ${why}\n`, 'unreadable-encoding');
        finish(502, why);
        return;
      }
      decoders = decoding.decoders;
      // Scrubbing (and decoding) changes the body's length: let the server side frame it instead.
      out = withoutHeaders(out, 'content-length', ...(decoders.length ? ['content-encoding'] : []));
    }
    writeHead(res, up.status, broker ? broker.scrubText(up.statusMessage) : up.statusMessage, out);
    // Every TLS record read upstream in one turn of the event loop goes to the client in one write
    // (one encryption pass over the batch and one syscall) instead of one write per 16 KiB record.
    // The client's socket is corked, not the response: a response ended while corked lost its tail.
    const socket = res instanceof http.ServerResponse ? res.socket : null;
    let corked = false;
    up.body.on('data', (c: Buffer) => {
      counted(c.length);
      if (corked || !socket || socket.destroyed) return;
      corked = true;
      socket.cork();
      setImmediate(() => {
        corked = false;
        socket.uncork();
      });
    });
    const onEnd = (err?: Error | null) => {
      if (err) res.destroy();
      finish(up.status, err || !up.complete() ? 'closed before the response was complete' : undefined);
    };
    if (scrub) pipeline([up.body, ...decoders, scrub, res], onEnd);
    else pipeline(up.body, res, onEnd);
  }

  private refuse(req: GatewayRequest, res: GatewayResponse, t: Served, r: Refused, base: Base): void {
    if (!res.headersSent) {
      if (r.status === 502) answerPlain(res, 502, this.failureBody(t, base.method, base.path, r.reason), 'secret-unavailable');
      else answerPlain(res, r.status, this.denialBody(t, base.method, base.path, r.rule, r.reason), 'denied');
    }
    req.resume();
    t.onRequest({ ...base, allowed: false, status: r.status, ...(r.rule ? { rule: r.rule } : {}), reason: r.reason, ...(r.secret ? { secret: r.secret } : {}), bytesUp: 0, bytesDown: 0 });
  }

  /** WebSocket (and other) upgrades over HTTP/1.1: judged like a request, then the two sockets are joined. */
  private onUpgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    const t = this.targets.get(req.socket) ?? this.targets.get(socket);
    if (!t) {
      socket.destroy();
      return;
    }
    const started = performance.now();
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const base = { host: t.host, port: t.port, method, path: redactQuery(url), address: t.addresses[0] ?? '', started };
    const judged = this.judge(req, t);
    // A command secret not fetched yet: the request carries a secret, which an upgrade never does.
    const verdict: Judged | Refused = 'fetch' in judged ? { status: 403, reason: `a request that upgrades the connection cannot carry the secret "${judged.fetch}"; send it on an ordinary request`, secret: judged.fetch } : judged;
    if ('status' in verdict) {
      const body = this.denialBody(t, method, base.path, verdict.rule, verdict.reason);
      socket.end(`HTTP/1.1 ${verdict.status} Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      t.onRequest({ ...base, allowed: false, status: verdict.status, ...(verdict.rule ? { rule: verdict.rule } : {}), reason: verdict.reason, bytesUp: 0, bytesDown: 0 });
      return;
    }
    const record = { ...base, ...(verdict.decision ? { rule: verdict.decision.rule } : {}), ...(verdict.secret ? { secret: verdict.secret } : {}) };
    // The simplest safe choice: a request that would carry a secret never upgrades (an upgraded
    // stream has framing of its own, so an echo of the value could not be replaced in it reliably).
    if (verdict.secret) {
      const body = this.denialBody(t, method, base.path, undefined, `a request that upgrades the connection (Upgrade: ${String(req.headers.upgrade).slice(0, 40)}) cannot carry the secret "${verdict.secret}"; send it on an ordinary request`);
      socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      t.onRequest({ ...record, allowed: false, status: 403, reason: 'an upgrade cannot carry a secret', bytesUp: 0, bytesDown: 0 });
      return;
    }
    // Toward a bound host the upgraded stream is scrubbed too, byte for byte (lengths kept, so the
    // protocol's own framing holds), and uncompressed: WebSocket compression is not offered.
    const broker = this.opts.broker;
    const scrub = broker?.covers(t.host) ? { text: (v: string) => broker.scrubText(v), stream: () => broker.scrubber(t.host, 'mask') } : undefined;
    const headers = scrub ? withoutHeaders(verdict.headers, 'sec-websocket-extensions') : verdict.headers;
    relayUpgrade(this.upstream.openUpgrade(t, method, url, headers), socket, head, `https://${t.host}:${t.port}`, scrub, (o) =>
      t.onRequest({ ...record, allowed: true, status: o.status, ...(o.reason ? { reason: o.reason } : {}), bytesUp: o.bytesUp, bytesDown: o.bytesDown }),
    );
  }
}
