import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { AirlockError } from '../../contracts/errors';
import type { Usage } from '../../contracts/runs';
import { Emitter, toDisposable, type Disposable, type Event } from '../common/disposable';
import type { KeyVault } from '../keys/key-vault';
import type { ProviderCatalog, ProviderConfig } from '../keys/provider-catalog';
import type { Secret } from '../keys/secret';
import { AGENT_PREFIX, budgetMessage, checkBudget, lowerOutput, outputLimitOf, type BudgetAmount, type BudgetStop } from './budget';
import { credentialRefusal, credentialServes, storeCommand, unsignedIdToken } from '../keys/subscription-credentials';
import type { ChatgptSession } from '../keys/chatgpt-session';
import { answerSandboxRefresh, SandboxSignins, type SandboxCredential } from './sandbox-signin';
import { costOf, DEFAULT_PRICES, type PriceTable } from './price-table';
import { presentedToken, RunTokenRegistry, type RunBudget, type TokenGrant } from './run-tokens';
import { clientHeaders, keyRedactor, OAUTH_BETA, redactKey, sendUpstream, type UpstreamHandle } from '../upstream/upstream-client';
import { noUsage, SseUsageScanner, usageFromJson, type CallUsage } from './usage-meter';
import { errorBody, formatOfKind, matchRoute, type WireFormat } from './wire-format';
import { applySideDoorPolicy } from './side-doors';
import { bodyLength, serializeBody, type BodyParts } from '../upstream/json-body';

export type { BudgetStop, RunBudget } from './budget';
export type { SandboxCredential } from './sandbox-signin';

/** One model call through the proxy, for the audit log and the UI. Never carries a key. */
export interface ModelCallEvent {
  runId: string;
  provider: string;
  model: string;
  /** The route, e.g. `/v1/messages`. */
  path: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd?: number;
  latencyMs: number;
  /** HTTP status returned to the client (the proxy's own 4xx included). */
  status: number;
  /** The provider's server could not be reached (no HTTP answer): where the proxy tried, and why. */
  unreachable?: { baseUrl: string; code: string };
  stream: boolean;
  /** The client went away before the answer was complete (the upstream request was aborted). */
  aborted?: boolean;
  /** The request body, only when transcripts are on. */
  request?: unknown;
}

/**
 * The proxy stripped, refused or (by the provider's setting) let through a side door of a call:
 * a provider-side tool, `mcp_servers`, an unknown `anthropic-beta`, URL-sourced content (see side-doors.ts).
 */
export interface SideDoorEvent {
  runId: string;
  provider: string;
  path: string;
  stripped: string[];
  allowed: string[];
  /** The side door the call needed, when the call was refused (400) for it. */
  refused?: string;
}

/** A provider ready to be called: where, in which format, with which key. */
export interface ResolvedUpstream {
  config: ProviderConfig;
  key?: Secret;
  /** A ChatGPT sign-in: its current access token replaces `key`, and it refreshes itself. */
  chatgpt?: ChatgptSession;
}

/** The credential to present upstream now (a sign-in's token changes when it is refreshed). */
function currentKey(resolved: ResolvedUpstream): Secret | undefined {
  return resolved.chatgpt?.accessToken ?? resolved.key;
}

/** Looks up a provider's configuration and key (keychain, session or env), once per run. */
export type UpstreamResolver = (providerId: string) => Promise<ResolvedUpstream>;

export interface ModelProxyOptions {
  resolveUpstream: UpstreamResolver;
  /** The built-in table unless given; `setPrices` replaces it later (a changed setting). */
  prices?: PriceTable;
  /** Largest request body accepted (default 32 MiB; agents send whole conversations). */
  maxBodyBytes?: number;
  /** Include request bodies in `onDidCall` events (user's explicit choice). */
  transcripts?: boolean;
  /**
   * How long a client may take to send a whole request (default 120 s) — slow-loris protection.
   * It bounds receiving the request only: answers stream for as long as bytes flow.
   */
  requestTimeoutMs?: number;
}

export interface IssueTokenOptions {
  runId: string;
  /** Provider ids this run may call; the first of each wire format serves that format's routes. */
  providers: string[];
  /** When set, only these model ids are allowed. */
  models?: string[];
  budget?: RunBudget;
  /** The run's agent: a subscription credential serves only its vendor's client (§6). */
  agent?: string;
  /**
   * Awaited after a call is admitted and before it goes upstream: the run's turn boundary as the
   * host sees it (the agent's previous tool calls are done). Checkpoints use it (docs/architecture.md §19);
   * it should settle quickly, and a rejection is ignored.
   */
  beforeForward?: () => Promise<void>;
}

interface RunState {
  grant: TokenGrant;
  beforeForward?: () => Promise<void>;
  usage: CallUsage & { costUsd: number; costKnown: boolean; requests: number };
  /** Tokens and cost held by calls in flight (their input estimate and output limit). */
  held: BudgetAmount;
  /** The budget refusal that stopped the run, when one did (host-observed, for the run's error). */
  budgetStop?: BudgetStop;
  upstreams?: Promise<Map<string, ResolvedUpstream | AirlockError>>;
  active: Set<UpstreamHandle>;
}

/**
 * Builds a resolver over the catalog and the vault. A provider that needs no key gets none. A
 * ChatGPT sign-in becomes the vault's one session per stored sign-in, shared by runs, so a refresh happens once.
 */
export function vaultResolver(catalog: ProviderCatalog, vault: KeyVault): UpstreamResolver {
  return async (providerId) => {
    const config = await catalog.get(providerId);
    if (config.credential === 'chatgpt-signin') {
      // The vault's session: shared with "Test", so a refresh there is the one runs use too.
      const session = await vault.chatgptSession(providerId, config.authBaseUrl ?? '');
      return session ? { config, chatgpt: session } : { config };
    }
    if (config.credential) return { config, ...(await vault.resolve(providerId).then((k) => (k ? { key: k.secret } : {}))) };
    const key = config.requiresKey ? await vault.require(providerId) : (await vault.resolve(providerId))?.secret;
    return key ? { config, key } : { config };
  };
}

/** What a sandbox gets so unchanged SDKs and CLIs talk to the proxy with the run token. */
export function proxyEnvFor(port: number, token: string, host = '127.0.0.1'): Record<string, string> {
  const base = `http://${host}:${port}`;
  return {
    ANTHROPIC_BASE_URL: base,
    ANTHROPIC_API_KEY: token,
    OPENAI_BASE_URL: `${base}/v1`,
    OPENAI_API_KEY: token,
  };
}

const DEFAULT_MAX_BODY = 32 * 1024 * 1024;
const MAX_ERROR_BODY = 1024 * 1024;
const MAX_USAGE_BODY = 8 * 1024 * 1024;

/** Method, path and query string of a request, split once. */
interface RequestTarget {
  method: string;
  path: string;
  /** `?…` or empty; passed upstream unchanged (Claude Code sends `?beta=true`). */
  query: string;
}

/** A request carrying a valid run token. */
interface Caller {
  grant: TokenGrant;
  run: RunState;
}

/** The route and the run's provider that serves it. */
interface PickedUpstream {
  routePath: string;
  format: WireFormat;
  providerId: string;
  resolved: ResolvedUpstream;
}

/** A call that passed every check and goes upstream. */
interface AdmittedCall extends Caller, PickedUpstream {
  method: string;
  pathAndQuery: string;
  /** The client's headers, less any `anthropic-beta` values the side-door policy removed. */
  headers: IncomingMessage['headers'];
  /** Whole as received, or re-serialised in parts (json-body.ts). */
  body?: Buffer | BodyParts;
  parsed?: Record<string, unknown>;
  model: string;
  stream: boolean;
  /** What this call holds of the run's budget until it finishes. */
  hold: BudgetAmount;
}

/** Claude Code probes its base URL with `HEAD /` before the first call: answered at once, no token needed. */
function answerProbe(target: RequestTarget, res: ServerResponse): boolean {
  if (target.path !== '/' || (target.method !== 'HEAD' && target.method !== 'GET')) return false;
  const head = target.method === 'HEAD';
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': head ? 0 : 2 });
  res.end(head ? undefined : 'ok');
  return true;
}

/** An `anthropic-beta` header without Claude Code's OAuth marker (undefined when nothing else is left). */
function withoutOauthBeta(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const rest = (Array.isArray(header) ? header.join(',') : header).split(',').map((v) => v.trim()).filter((v) => v && v !== OAUTH_BETA);
  return rest.length ? rest.join(',') : undefined;
}

/** The body as a JSON object, or undefined when it is anything else. */
function jsonObject(body: Buffer): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body.toString('utf8'));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The loopback model proxy (docs/architecture.md §2): swaps a per-run token for the real provider key toward the
 * one configured upstream, passes SSE through chunk by chunk, meters usage and enforces budgets.
 */
export class ModelProxy implements Disposable {
  private readonly server: http.Server;
  private readonly tokens = new RunTokenRegistry();
  private readonly runs = new Map<string, RunState>();
  private readonly sockets = new Set<Socket>();
  private readonly signins = new SandboxSignins();
  private readonly didCall = new Emitter<ModelCallEvent>();
  private readonly didSideDoor = new Emitter<SideDoorEvent>();
  private readonly didRefreshSignin = new Emitter<{ runId: string; provider: string; reason: 'expiring' | 'refused' }>();
  private prices: PriceTable;
  private readonly maxBody: number;
  private port = 0;

  /** Fires once per call, when its answer is complete (or the client went away). */
  readonly onDidCall: Event<ModelCallEvent> = this.didCall.event;
  /** Fires for each call with a side door stripped, refused or allowed by setting (for the audit log). */
  readonly onDidSideDoor: Event<SideDoorEvent> = this.didSideDoor.event;
  /** Fires when a run's call made the proxy refresh a ChatGPT sign-in (for the audit log; no token). */
  readonly onDidRefreshSignin: Event<{ runId: string; provider: string; reason: 'expiring' | 'refused' }> = this.didRefreshSignin.event;

  constructor(private readonly opts: ModelProxyOptions) {
    this.prices = opts.prices ?? DEFAULT_PRICES;
    this.maxBody = opts.maxBodyBytes ?? DEFAULT_MAX_BODY;
    const requestTimeout = opts.requestTimeoutMs ?? 120_000;
    this.server = http.createServer({
      keepAliveTimeout: 30_000,
      requestTimeout,
      headersTimeout: Math.min(30_000, requestTimeout),
      connectionsCheckingInterval: Math.min(30_000, Math.max(100, Math.floor(requestTimeout / 4))),
    }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => this.internalError(res, err));
    });
    this.server.on('connection', (s: Socket) => {
      s.setNoDelay(true);
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    // Codex CLI tries a Responses WebSocket first; a plain 426 makes it fall back to HTTP streaming.
    this.server.on('upgrade', (_req: IncomingMessage, socket: Socket) => {
      const body = errorBody('openai', 400, 'WebSocket transport is not supported by the Airlock proxy; use HTTP streaming.');
      socket.end(`HTTP/1.1 426 Upgrade Required\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
    });
  }

  /** Listens on 127.0.0.1 at a random port. */
  async start(): Promise<{ port: number }> {
    if (this.port) return { port: this.port };
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.port = (this.server.address() as AddressInfo).port;
    return { port: this.port };
  }

  /** Mints a run token. Disposing it revokes that token; `revokeRun` revokes all of a run's tokens. */
  issueToken(opts: IssueTokenOptions): { token: string } & Disposable {
    if (!opts.runId) throw new AirlockError('INVALID_INPUT', 'a run token needs a run id');
    if (opts.providers.length === 0) throw new AirlockError('INVALID_INPUT', 'a run token needs at least one provider');
    const grant: TokenGrant = { runId: opts.runId, providers: [...opts.providers], models: opts.models ? [...opts.models] : undefined, budget: opts.budget, ...(opts.agent ? { agent: opts.agent } : {}) };
    const existing = this.runs.get(opts.runId);
    if (existing) {
      existing.grant = grant;
      existing.upstreams = undefined;
      existing.beforeForward = opts.beforeForward;
    } else {
      this.runs.set(opts.runId, { grant, usage: { ...noUsage(), costUsd: 0, costKnown: false, requests: 0 }, held: { tokens: 0, costUsd: 0 }, active: new Set(), ...(opts.beforeForward ? { beforeForward: opts.beforeForward } : {}) });
    }
    const issued = this.tokens.issue(grant);
    return { token: issued.token, ...toDisposable(() => issued.revoke()) };
  }

  /**
   * What the run's client needs in place of its subscription credential (docs/architecture.md §6):
   * for a Claude subscription, nothing but the run token in CLAUDE_CODE_OAUTH_TOKEN; for a ChatGPT
   * sign-in, a refresh placeholder and an unsigned id token with the account's non-secret claims.
   * Undefined when the run's provider uses an API key (or none).
   */
  async sandboxCredential(runId: string, token: string): Promise<SandboxCredential | undefined> {
    const run = this.runs.get(runId);
    if (!run || !this.tokens.check(token)) return undefined;
    for (const resolved of (await this.upstreamsFor(run)).values()) {
      if (resolved instanceof AirlockError || !resolved.config.credential) continue;
      if (!credentialServes(resolved.config.credential, run.grant.agent)) continue;
      if (resolved.config.credential === 'claude-subscription') return { kind: 'claude-subscription' };
      if (!resolved.chatgpt) return undefined;
      const claims = resolved.chatgpt.claims;
      return this.signins.issue(runId, token, unsignedIdToken(claims), claims.accountId ?? '');
    }
    return undefined;
  }

  /** Ends a run: its tokens stop working, its calls in flight are aborted, its cached keys dropped. */
  revokeRun(runId: string): void {
    this.tokens.revokeRun(runId);
    this.signins.revokeRun(runId);
    const run = this.runs.get(runId);
    if (!run) return;
    for (const h of run.active) h.abort();
    run.active.clear();
    run.upstreams = undefined;
  }

  /** Keeps request bodies in `onDidCall` events from the next call on, or stops (the `transcripts` setting changed). */
  setTranscripts(on: boolean): void {
    this.opts.transcripts = on;
  }

  /** Replaces the price table for calls that finish from now on (the user's `prices` setting changed). */
  setPrices(table: PriceTable): void {
    this.prices = table;
  }

  /** Usage so far (kept after the run is revoked). */
  usage(runId: string): Usage {
    const u = this.runs.get(runId)?.usage;
    if (!u) return { ...noUsage(), requests: 0 };
    const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens, requests } = u;
    return { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens, requests, ...(u.costKnown ? { costUsd: u.costUsd } : {}) };
  }

  /** The budget refusal that stopped a run's agent, when one did (docs/architecture.md §9). */
  budgetStop(runId: string): BudgetStop | undefined {
    return this.runs.get(runId)?.budgetStop;
  }

  async stop(): Promise<void> {
    this.tokens.clear();
    for (const runId of this.runs.keys()) this.revokeRun(runId);
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    });
    this.port = 0;
  }

  dispose(): void {
    void this.stop();
    this.didCall.dispose();
    this.didSideDoor.dispose();
  }

  private send(res: ServerResponse, format: WireFormat, status: number, message: string, close = false): void {
    if (res.headersSent || res.destroyed) return;
    const body = errorBody(format, status, message);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      ...(close ? { connection: 'close' } : {}),
    });
    res.end(body);
  }

  private internalError(res: ServerResponse, err: unknown): void {
    // Should not happen; answer as an upstream failure without details that could carry anything sensitive.
    void err;
    if (!res.headersSent) this.send(res, 'openai', 502, 'Airlock proxy failed to handle the request');
    else res.destroy();
  }

  private upstreamsFor(run: RunState): Promise<Map<string, ResolvedUpstream | AirlockError>> {
    if (!run.upstreams) {
      const grant = run.grant;
      const pending = Promise.all(
        grant.providers.map(async (id) => {
          try {
            return [id, await this.opts.resolveUpstream(id)] as const;
          } catch (err) {
            const e = err instanceof AirlockError ? err : new AirlockError('PROVIDER_UNKNOWN', `provider '${id}' could not be resolved`);
            return [id, e] as const;
          }
        }),
      ).then((entries) => new Map<string, ResolvedUpstream | AirlockError>(entries));
      run.upstreams = pending;
      // A failed lookup (locked keychain, say) is retried on the next call rather than cached.
      void pending.then((m) => {
        if ([...m.values()].some((v) => v instanceof AirlockError) && run.upstreams === pending) run.upstreams = undefined;
      });
    }
    return run.upstreams;
  }

  private readBody(req: IncomingMessage): Promise<Buffer | 'too-large'> {
    return new Promise((resolve, reject) => {
      const declared = Number(req.headers['content-length']);
      if (Number.isFinite(declared) && declared > this.maxBody) {
        resolve('too-large');
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let over = false;
      req.on('data', (c: Buffer) => {
        if (over) return;
        size += c.length;
        if (size > this.maxBody) {
          over = true;
          chunks.length = 0;
          resolve('too-large');
          return;
        }
        chunks.push(c);
      });
      req.on('end', () => {
        if (!over) resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
      });
      req.on('error', reject);
    });
  }

  /** After refusing a request, drain a bounded amount of its body so the client can read the answer. */
  private discard(req: IncomingMessage): void {
    let drained = 0;
    req.on('data', (c: Buffer) => {
      drained += c.length;
      if (drained > 4 * 1024 * 1024) req.destroy();
    });
    req.on('error', () => undefined);
    req.resume();
  }

  /**
   * One request from a sandbox: answer a base-URL probe, or authorize the run token, route to the
   * run's upstream, read and check the call, and forward it with the real key.
   */
  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    req.on('error', () => undefined);
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const target: RequestTarget = { method: req.method ?? 'GET', path: q < 0 ? rawUrl : rawUrl.slice(0, q), query: q < 0 ? '' : rawUrl.slice(q) };
    if (answerProbe(target, res)) return;
    // The client refreshing its sign-in: answered here with the same placeholders (§6).
    if (target.path === '/oauth/token' && target.method === 'POST') {
      const body = await this.readBody(req);
      answerSandboxRefresh(this.signins, body === 'too-large' ? undefined : body, res);
      return;
    }
    const caller = this.authorize(req, res, target);
    if (!caller) return;
    const upstream = await this.pickUpstream(req, res, target, caller);
    if (!upstream) return;
    const call = await this.readCall(req, res, target, caller, upstream);
    if (!call) return;
    if (!(await this.freshen(res, call, started))) return;
    // The host's turn boundary (checkpoints): the call waits until the host has looked at the workspace.
    if (caller.run.beforeForward) await caller.run.beforeForward().catch(() => undefined);
    this.forward(req, res, call, started);
  }

  /** Refreshes a ChatGPT sign-in that is about to expire before the call goes out; false when that failed (answered). */
  private async freshen(res: ServerResponse, call: AdmittedCall, started: number): Promise<boolean> {
    const session = call.resolved.chatgpt;
    if (!session?.expiresSoon()) return true;
    try {
      if (await session.refresh()) this.didRefreshSignin.fire({ runId: call.grant.runId, provider: call.providerId, reason: 'expiring' });
      return true;
    } catch (err) {
      this.send(res, call.format, 401, err instanceof AirlockError ? err.message : 'the ChatGPT sign-in could not be refreshed');
      // Recorded like any refused call, which also releases what the budget held for it.
      this.recordCall(call, 401, noUsage(), false, started);
      return false;
    }
  }

  /** The run behind the presented token, or a 401 (nothing is read from a caller without one). */
  private authorize(req: IncomingMessage, res: ServerResponse, target: RequestTarget): Caller | undefined {
    const grant = this.tokens.check(presentedToken(req.headers));
    const run = grant ? this.runs.get(grant.runId) : undefined;
    if (grant && run) return { grant, run };
    const guessFormat: WireFormat = target.path.startsWith('/v1/messages') || req.headers['anthropic-version'] !== undefined ? 'anthropic' : 'openai';
    this.refuse(req, res, guessFormat, 401, 'invalid or revoked Airlock run token (set the API key variable to the run token Airlock gave this sandbox)');
    return undefined;
  }

  /** The route and which of the run's providers serves its wire format, or a refusal. */
  private async pickUpstream(req: IncomingMessage, res: ServerResponse, target: RequestTarget, { grant, run }: Caller): Promise<PickedUpstream | undefined> {
    const upstreams = await this.upstreamsFor(run);
    const byFormat = (format: WireFormat): [string, ResolvedUpstream | AirlockError] | undefined => {
      for (const id of grant.providers) {
        const u = upstreams.get(id);
        if (!u) continue;
        if (u instanceof AirlockError) {
          if ((format === 'anthropic') === (id === 'anthropic')) return [id, u];
          continue;
        }
        if (formatOfKind(u.config.kind) === format) return [id, u];
      }
      return undefined;
    };
    const fallback: WireFormat = byFormat('openai') ? 'openai' : 'anthropic';
    const route = matchRoute(target.method, target.path, req.headers, fallback);
    if (!route.ok) {
      this.refuse(req, res, route.format, route.status, route.message);
      return undefined;
    }
    const format = route.format;
    const picked = byFormat(format);
    if (!picked) {
      this.refuse(req, res, format, 403, `this run has no ${format === 'anthropic' ? 'Anthropic' : 'OpenAI-compatible'} provider; start the run with one`);
      return undefined;
    }
    const [providerId, resolved] = picked;
    if (resolved instanceof AirlockError) {
      this.refuse(req, res, format, 403, `Airlock cannot call '${providerId}': ${resolved.message}`);
      return undefined;
    }
    return { routePath: route.path, format, providerId, resolved };
  }

  /** Reads the body (bounded, a JSON object) and checks model, budget and key; or refuses the call. */
  private async readCall(req: IncomingMessage, res: ServerResponse, target: RequestTarget, caller: Caller, upstream: PickedUpstream): Promise<AdmittedCall | undefined> {
    const { format, providerId, resolved } = upstream;
    let body: Buffer | BodyParts | undefined;
    let parsed: Record<string, unknown> | undefined;
    /** The text as received and its parse: a re-serialised body copies its conversation from it (json-body.ts). */
    let source: { raw: Buffer; parsed: Record<string, unknown> } | undefined;
    if (target.method === 'POST') {
      const read = await this.readBody(req);
      if (read === 'too-large') {
        this.refuse(req, res, format, 413, `request body exceeds Airlock's limit of ${this.maxBody} bytes`, true);
        return undefined;
      }
      parsed = jsonObject(read);
      if (!parsed) {
        this.send(res, format, 400, 'request body must be a JSON object');
        return undefined;
      }
      body = read;
      source = { raw: read, parsed };
    } else {
      this.discard(req);
    }

    const model = typeof parsed?.model === 'string' ? parsed.model : '';
    const stream = parsed?.stream === true;
    const refusal = this.refusalFor(caller, resolved, providerId, model);
    if (refusal) {
      this.send(res, format, refusal.status, refusal.message);
      return undefined;
    }
    // Side doors: provider-side tools and MCP servers would carry data out with the network off.
    // A subscription's OAuth beta is the proxy's own to set (upstream-client.ts), not a side door.
    const betaHeader = resolved.config.credential === 'claude-subscription' ? withoutOauthBeta(req.headers['anthropic-beta']) : req.headers['anthropic-beta'];
    const doors = applySideDoorPolicy({ format, parsed, raw: source?.raw, betaHeader, allow: resolved.config.allowSideDoors ?? [] });
    if (doors.stripped.length || doors.allowed.length || doors.refusal) {
      this.didSideDoor.fire({ runId: caller.grant.runId, provider: providerId, path: upstream.routePath, stripped: doors.stripped, allowed: doors.allowed, ...(doors.refusal ? { refused: doors.refusal.name } : {}) });
    }
    if (doors.refusal) {
      this.send(res, format, doors.refusal.status, doors.refusal.message);
      return undefined;
    }
    let reserialise = false;
    if (doors.body) {
      parsed = doors.body;
      reserialise = true;
    }
    let headers = req.headers;
    if (doors.beta) {
      headers = { ...req.headers };
      if (doors.beta.value === undefined) delete headers['anthropic-beta'];
      else headers['anthropic-beta'] = doors.beta.value;
    }
    if (parsed && stream && upstream.routePath === '/v1/chat/completions' && parsed.stream_options === undefined) {
      // Without this, streamed Chat Completions carry no usage and token budgets could not hold.
      parsed.stream_options = { include_usage: true };
      reserialise = true;
    }
    // Once, after every change: what goes upstream is exactly what the policy read.
    if (reserialise && parsed) body = serializeBody(parsed, source);
    const budget = this.applyBudget(caller.run, upstream, parsed, body, model, source);
    if ('refused' in budget) {
      this.send(res, format, 429, budget.refused);
      return undefined;
    }
    return { ...caller, ...upstream, method: target.method, pathAndQuery: upstream.routePath + target.query, headers, body: budget.body, parsed: budget.parsed, model, stream, hold: budget.hold };
  }

  /**
   * Holds the call's share of the run's budget, lowering its output limit to what is left or
   * refusing it when too little is (budget.ts). A lowered limit re-serialises the body.
   */
  private applyBudget(run: RunState, upstream: PickedUpstream, parsed: Record<string, unknown> | undefined, body: Buffer | BodyParts | undefined, model: string, source?: { raw: Buffer; parsed: Record<string, unknown> }):
    { body?: Buffer | BodyParts; parsed?: Record<string, unknown>; hold: BudgetAmount } | { refused: string } {
    const u = run.usage;
    const decision = checkBudget({
      budget: run.grant.budget,
      used: { tokens: u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens, costUsd: u.costUsd, requests: u.requests },
      held: run.held,
      bodyBytes: body ? bodyLength(body) : 0,
      output: parsed ? outputLimitOf(upstream.routePath, upstream.resolved.config.kind, parsed) : undefined,
      model,
      prices: this.prices,
    });
    if (decision.action === 'refuse') {
      run.budgetStop = decision.stop;
      return { refused: AGENT_PREFIX + budgetMessage(decision.stop) };
    }
    let out = { body, parsed };
    if (decision.action === 'lower' && parsed) {
      const lowered = lowerOutput(parsed, decision.field, decision.maxOutput);
      if (!lowered) {
        run.budgetStop = decision.stop;
        return { refused: AGENT_PREFIX + budgetMessage(decision.stop) };
      }
      out = { parsed: lowered, body: serializeBody(lowered, source) };
    }
    run.held = { tokens: run.held.tokens + decision.hold.tokens, costUsd: run.held.costUsd + decision.hold.costUsd };
    return { ...out, hold: decision.hold };
  }

  /** Why an otherwise well-formed call may not go out: a model outside the grant, no key. */
  private refusalFor({ grant }: Caller, resolved: ResolvedUpstream, providerId: string, model: string): { status: number; message: string } | undefined {
    if (grant.models && model && !grant.models.includes(model)) {
      return { status: 403, message: `model '${model.slice(0, 100)}' is not allowed for this run (allowed: ${grant.models.join(', ')})` };
    }
    if (resolved.config.credential && !credentialServes(resolved.config.credential, grant.agent)) {
      return { status: 403, message: credentialRefusal(resolved.config.credential, providerId, grant.agent) };
    }
    if (resolved.config.requiresKey && !currentKey(resolved)) {
      return { status: 403, message: `no ${resolved.config.credential ? 'sign-in' : 'key'} stored for '${providerId}'; add one with \`${storeCommand(providerId, resolved.config.credential)}\`` };
    }
    return undefined;
  }

  /**
   * Sends the call upstream with the real key and relays the answer; meters it once it is complete.
   * A ChatGPT sign-in that the upstream refuses (401) is refreshed and the call sent once more.
   */
  private forward(req: IncomingMessage, res: ServerResponse, call: AdmittedCall, started: number, retry = false): void {
    const { run, format, providerId, resolved } = call;
    const key = currentKey(resolved);
    const session = resolved.chatgpt;
    if (!retry) run.usage.requests += 1;
    let done = false;
    /** Marks the call complete; false when it already was (each call is metered once). */
    const settle = (): boolean => {
      if (done) return false;
      done = true;
      run.active.delete(handle);
      return true;
    };
    const record = (status: number, usage: CallUsage, aborted = false) => this.recordCall(call, status, usage, aborted, started);
    const handle = sendUpstream({
      provider: resolved.config,
      key,
      method: call.method,
      pathAndQuery: call.pathAndQuery,
      headers: call.headers,
      body: call.body,
      ...(session ? { extraHeaders: { 'chatgpt-account-id': session.accountId } } : {}),
      onError: (err) => {
        if (!settle()) return;
        const code = (err as NodeJS.ErrnoException).code ?? 'error';
        this.send(res, format, 502, redactKey(`could not reach ${providerId} upstream (${code})`, key));
        this.recordCall(call, 502, noUsage(), false, started, { baseUrl: resolved.config.baseUrl, code });
      },
      onResponse: (up) => {
        const status = up.statusCode ?? 502;
        if (status === 401 && session && key) {
          up.resume();
          // This attempt ends here; the refreshed one records the call. One refresh per refused
          // token and one retry per call: a token refused right after its refresh is a clear error.
          if (!settle()) return;
          session.refreshAfterRefusal(key).then(
            (refreshed) => {
              if (refreshed) this.didRefreshSignin.fire({ runId: call.grant.runId, provider: providerId, reason: 'refused' });
              if (res.destroyed) record(499, noUsage(), true);
              else if (!retry) this.forward(req, res, call, started, true);
              else {
                this.send(res, format, 401, 'ChatGPT refused the sign-in twice in a row; retry the request, or sign in again (`codex login`, then `airlock keys import-codex`) if it keeps happening.');
                record(401, noUsage());
              }
            },
            (err: unknown) => {
              this.send(res, format, 401, err instanceof AirlockError ? err.message : 'the ChatGPT sign-in could not be refreshed');
              record(401, noUsage());
            },
          );
          return;
        }
        if (status >= 400) this.relayError(up, res, key, () => settle() && record(status, noUsage()));
        else this.relayAnswer(up, res, key, settle, (usage) => record(status, usage));
      },
    });
    run.active.add(handle);
    res.on('close', () => {
      if (!settle()) return;
      // The client went away mid-answer: stop paying for tokens nobody reads.
      handle.abort();
      record(res.statusCode || 499, noUsage(), true);
    });
  }

  /**
   * Passes a successful answer on as it arrives (SSE chunk by chunk, with backpressure), with any
   * echo of the key removed, and reads its usage on the way. `settle` is false when the call was
   * already complete (the client went away): then the answer is neither ended nor metered again.
   */
  private relayAnswer(up: IncomingMessage, res: ServerResponse, key: Secret | undefined, settle: () => boolean, onEnd: (usage: CallUsage) => void): void {
    const isSse = String(up.headers['content-type'] ?? '').includes('text/event-stream');
    const scanner = isSse ? new SseUsageScanner() : undefined;
    const jsonChunks: Buffer[] = [];
    let jsonSize = 0;
    // An upstream that echoes the key must not hand it to the sandbox, even cut across chunks.
    const redactor = keyRedactor(key);
    const headers = clientHeaders(up.headers, key);
    // Redaction can shorten the body, so its length is not known up front: it goes out chunked.
    if (redactor) delete headers['content-length'];
    res.writeHead(up.statusCode ?? 200, headers);
    // Headers normally leave with the first event (one write, one wake-up for the client); if the
    // upstream is slow to send that event, they go out alone shortly after.
    let flushTimer: NodeJS.Timeout | undefined = isSse ? setTimeout(() => res.flushHeaders(), 10) : undefined;
    up.on('data', (chunk: Buffer) => {
      if (scanner) scanner.push(chunk);
      else if (jsonSize < MAX_USAGE_BODY) {
        jsonChunks.push(chunk);
        jsonSize += chunk.length;
      }
      const out = redactor ? redactor.push(chunk) : chunk;
      if (!out.length) return;
      if (flushTimer) {
        clearTimeout(flushTimer);
        flushTimer = undefined;
      }
      // Backpressure: a slow client slows the upstream read instead of growing memory.
      if (!res.write(out)) {
        up.pause();
        res.once('drain', () => up.resume());
      }
    });
    up.on('end', () => {
      if (flushTimer) clearTimeout(flushTimer);
      if (!settle()) return;
      const tail = redactor?.end();
      res.end(tail?.length ? tail : undefined);
      onEnd(scanner ? scanner.usage : usageFromJson((jsonChunks.length === 1 ? (jsonChunks[0] as Buffer) : Buffer.concat(jsonChunks)).toString('utf8')));
    });
    up.on('error', () => res.destroy());
    // The upstream died mid-answer: cut the client off too, so it does not take a torso for a body.
    up.on('close', () => {
      if (!up.complete) res.destroy();
    });
  }

  /** Adds a finished call to its run's usage and cost, and tells listeners (audit, UI). */
  private recordCall(call: AdmittedCall, status: number, usage: CallUsage, aborted: boolean, started: number, unreachable?: ModelCallEvent['unreachable']): void {
    const { run, grant } = call;
    const cost = costOf(this.prices, call.model, usage);
    run.held = { tokens: Math.max(0, run.held.tokens - call.hold.tokens), costUsd: Math.max(0, run.held.costUsd - call.hold.costUsd) };
    run.usage.inputTokens += usage.inputTokens;
    run.usage.outputTokens += usage.outputTokens;
    run.usage.cacheReadTokens += usage.cacheReadTokens;
    run.usage.cacheWriteTokens += usage.cacheWriteTokens;
    if (cost !== undefined) {
      run.usage.costUsd += cost;
      run.usage.costKnown = true;
    }
    if (!this.didCall.hasListeners) return;
    this.didCall.fire({
      runId: grant.runId,
      provider: call.providerId,
      model: call.model,
      path: call.routePath,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      cacheReadTokens: usage.cacheReadTokens,
      cacheWriteTokens: usage.cacheWriteTokens,
      ...(cost !== undefined ? { costUsd: cost } : {}),
      latencyMs: performance.now() - started,
      status,
      stream: call.stream,
      ...(aborted ? { aborted } : {}),
      ...(unreachable ? { unreachable } : {}),
      ...(this.opts.transcripts && call.parsed ? { request: call.parsed } : {}),
    });
  }

  /** Refuses a request before reading it: drains a bounded amount of its body so the client reads the answer. */
  private refuse(req: IncomingMessage, res: ServerResponse, format: WireFormat, status: number, message: string, close = false): void {
    this.discard(req);
    this.send(res, format, status, message, close);
  }

  /** Passes an upstream error on, buffered (bounded) so any echo of the key can be removed. */
  private relayError(up: IncomingMessage, res: ServerResponse, key: Secret | undefined, onDone: () => void): void {
    const chunks: Buffer[] = [];
    let size = 0;
    up.on('data', (c: Buffer) => {
      if (size < MAX_ERROR_BODY) chunks.push(c);
      size += c.length;
    });
    up.on('end', () => {
      const text = redactKey(Buffer.concat(chunks).toString('utf8').slice(0, MAX_ERROR_BODY), key);
      const headers = clientHeaders(up.headers, key);
      headers['content-length'] = Buffer.byteLength(text);
      if (!res.headersSent && !res.destroyed) {
        res.writeHead(up.statusCode ?? 502, headers);
        res.end(text);
      }
      onDone();
    });
    up.on('error', () => res.destroy());
  }
}
