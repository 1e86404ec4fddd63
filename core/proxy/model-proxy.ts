import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { AirlockError } from '../../contracts/errors';
import type { Usage } from '../../contracts/runs';
import { Emitter, toDisposable, type Disposable, type Event } from '../common/disposable';
import type { BudgetStop, RunBudget } from './budget';
import { credentialServes, unsignedIdToken } from '../keys/subscription-credentials';
import { answerSandboxRefresh, SandboxSignins, type SandboxCredential } from './sandbox-signin';
import { DEFAULT_PRICES, type PriceTable } from './price-table';
import { presentedToken, RunTokenRegistry, type TokenGrant } from './run-tokens';
import { noUsage, type CallUsage } from './usage-meter';
import { errorBody, formatOfKind, matchRoute, type WireFormat } from './wire-format';
import { answerProbe, DEFAULT_MAX_BODY, discard, guessFormat, jsonObject, readBody, refuse, requestTarget, sendError, type RequestTarget } from './proxy-intake';
import { admitCall, type AdmittedCall, type Caller, type PickedUpstream, type SideDoorEvent } from './proxy-policy';
import { forwardCall, type RelayHooks } from './proxy-relay';
import { newRunState, settleCall, usageView, type ModelCallEvent, type RunState } from './proxy-ledger';
import type { ResolvedUpstream, UpstreamResolver } from './upstream-resolver';
import { debugLog } from '../common/debug-log';

/*
 * The proxy in four parts along its seams (docs/architecture.md §3): intake (proxy-intake.ts: the
 * request, token-free answers, body limits), policy (proxy-policy.ts: grant, side doors, URL
 * content, budgets), relay (proxy-relay.ts: upstream forwarding, SSE pass-through) and ledger
 * (proxy-ledger.ts: usage, the record of each call). This file holds the server, the runs and
 * their tokens, and the order of the steps.
 */

export type { BudgetStop, RunBudget } from './budget';
export type { SandboxCredential } from './sandbox-signin';
export type { ModelCallEvent } from './proxy-ledger';
export type { SideDoorEvent } from './proxy-policy';
export type { ResolvedUpstream, UpstreamResolver } from './upstream-resolver';
export { vaultResolver } from './upstream-resolver';

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
  /** How long an idle keep-alive connection stays open before the proxy closes it (default 30 s). */
  keepAliveTimeoutMs?: number;
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
      keepAliveTimeout: opts.keepAliveTimeoutMs ?? 30_000,
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
      this.runs.set(opts.runId, newRunState(grant, opts.beforeForward));
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
    return usageView(this.runs.get(runId));
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

  private internalError(res: ServerResponse, err: unknown): void {
    // Should not happen; answer as an upstream failure without details that could carry anything sensitive.
    void err;
    if (!res.headersSent) sendError(res, 'openai', 502, 'Airlock proxy failed to handle the request');
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

  /**
   * One request from a sandbox: answer a base-URL probe, or authorize the run token, route to the
   * run's upstream, read and check the call, and forward it with the real key.
   */
  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    req.on('error', () => undefined);
    const target = requestTarget(req);
    if (answerProbe(target, res)) return;
    // The client refreshing its sign-in: answered here with the same placeholders (§6).
    if (target.path === '/oauth/token' && target.method === 'POST') {
      const body = await readBody(req, this.maxBody);
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
    if (caller.run.beforeForward) await caller.run.beforeForward().catch(debugLog.swallow('proxy.beforeForward'));
    forwardCall(res, call, this.relayHooks(started));
  }

  /** How the relay reports a call that arrived at `started` back to the ledger and the listeners. */
  private relayHooks(started: number): RelayHooks {
    return {
      record: (call, outcome) => this.recordCall(call, outcome.status, outcome.usage, outcome.aborted === true, started, outcome.unreachable),
      signinRefreshed: (call) => this.didRefreshSignin.fire({ runId: call.grant.runId, provider: call.providerId, reason: 'refused' }),
    };
  }

  /** Refreshes a ChatGPT sign-in that is about to expire before the call goes out; false when that failed (answered). */
  private async freshen(res: ServerResponse, call: AdmittedCall, started: number): Promise<boolean> {
    const session = call.resolved.chatgpt;
    if (!session?.expiresSoon()) return true;
    try {
      if (await session.refresh()) this.didRefreshSignin.fire({ runId: call.grant.runId, provider: call.providerId, reason: 'expiring' });
      return true;
    } catch (err) {
      sendError(res, call.format, 401, err instanceof AirlockError ? err.message : 'the ChatGPT sign-in could not be refreshed');
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
    refuse(req, res, guessFormat(req, target), 401, 'invalid or revoked Airlock run token (set the API key variable to the run token Airlock gave this sandbox)');
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
      refuse(req, res, route.format, route.status, route.message);
      return undefined;
    }
    const format = route.format;
    const picked = byFormat(format);
    if (!picked) {
      refuse(req, res, format, 403, `this run has no ${format === 'anthropic' ? 'Anthropic' : 'OpenAI-compatible'} provider; start the run with one`);
      return undefined;
    }
    const [providerId, resolved] = picked;
    if (resolved instanceof AirlockError) {
      refuse(req, res, format, 403, `Airlock cannot call '${providerId}': ${resolved.message}`);
      return undefined;
    }
    return { routePath: route.path, format, providerId, resolved };
  }

  /** Reads the body (bounded, a JSON object), then asks the policy; or refuses the call. */
  private async readCall(req: IncomingMessage, res: ServerResponse, target: RequestTarget, caller: Caller, upstream: PickedUpstream): Promise<AdmittedCall | undefined> {
    const { format } = upstream;
    let source: { raw: Buffer; parsed: Record<string, unknown> } | undefined;
    if (target.method === 'POST') {
      const read = await readBody(req, this.maxBody);
      if (read === 'too-large') {
        refuse(req, res, format, 413, `request body exceeds Airlock's limit of ${this.maxBody} bytes`, true);
        return undefined;
      }
      const parsed = jsonObject(read);
      if (!parsed) {
        sendError(res, format, 400, 'request body must be a JSON object');
        return undefined;
      }
      source = { raw: read, parsed };
    } else {
      discard(req);
    }
    const admission = admitCall(caller, upstream, { method: target.method, pathAndQuery: upstream.routePath + target.query, headers: req.headers, source }, this.prices, (e) => this.didSideDoor.fire(e));
    if (!admission.ok) {
      sendError(res, format, admission.status, admission.message);
      return undefined;
    }
    return admission.call;
  }

  /** Adds a finished call to its run's usage and cost (the ledger), and tells listeners (audit, UI). */
  private recordCall(call: AdmittedCall, status: number, usage: CallUsage, aborted: boolean, started: number, unreachable?: ModelCallEvent['unreachable']): void {
    const event = settleCall(call, { status, usage, aborted, started, unreachable }, this.prices, { event: this.didCall.hasListeners, transcripts: this.opts.transcripts === true });
    if (event) this.didCall.fire(event);
  }
}
