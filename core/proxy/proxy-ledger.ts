import { performance } from 'node:perf_hooks';
import type { Usage } from '../../contracts/runs';
import type { BudgetAmount, BudgetStop } from './budget';
import { costOf, type PriceTable } from './price-table';
import type { TokenGrant } from './run-tokens';
import { noUsage, type CallUsage } from './usage-meter';
import type { UpstreamHandle } from '../upstream/upstream-client';
import type { ResolvedUpstream } from './upstream-resolver';
import type { AirlockError } from '../../contracts/errors';

/**
 * The model proxy's ledger (docs/architecture.md §3, §9): what each run has used, held and been
 * refused, and the one record of every finished call. A call is settled here exactly once.
 */

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

/** A run as the proxy keeps it: its grant, its usage and holds, its upstreams and calls in flight. */
export interface RunState {
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

export function newRunState(grant: TokenGrant, beforeForward?: () => Promise<void>): RunState {
  return { grant, usage: { ...noUsage(), costUsd: 0, costKnown: false, requests: 0 }, held: { tokens: 0, costUsd: 0 }, active: new Set(), ...(beforeForward ? { beforeForward } : {}) };
}

/** A run's usage as the contracts show it (cost only once a price was known). */
export function usageView(run: RunState | undefined): Usage {
  const u = run?.usage;
  if (!u) return { ...noUsage(), requests: 0 };
  const { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens, requests } = u;
  return { inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens, requests, ...(u.costKnown ? { costUsd: u.costUsd } : {}) };
}

/** What the ledger needs of a finished call. */
export interface SettledCall {
  run: RunState;
  grant: TokenGrant;
  providerId: string;
  routePath: string;
  model: string;
  stream: boolean;
  parsed?: Record<string, unknown>;
  /** What this call held of the run's budget until it finished. */
  hold: BudgetAmount;
}

/**
 * Adds a finished call to its run's usage and cost and releases its hold. Returns the event for
 * listeners (audit, UI) when `wanted` — building it is skipped when nobody listens.
 */
export function settleCall(
  call: SettledCall,
  outcome: { status: number; usage: CallUsage; aborted: boolean; started: number; unreachable?: ModelCallEvent['unreachable'] },
  prices: PriceTable,
  wanted: { event: boolean; transcripts: boolean },
): ModelCallEvent | undefined {
  const { run, grant } = call;
  const { usage } = outcome;
  const cost = costOf(prices, call.model, usage);
  run.held = { tokens: Math.max(0, run.held.tokens - call.hold.tokens), costUsd: Math.max(0, run.held.costUsd - call.hold.costUsd) };
  run.usage.inputTokens += usage.inputTokens;
  run.usage.outputTokens += usage.outputTokens;
  run.usage.cacheReadTokens += usage.cacheReadTokens;
  run.usage.cacheWriteTokens += usage.cacheWriteTokens;
  if (cost !== undefined) {
    run.usage.costUsd += cost;
    run.usage.costKnown = true;
  }
  if (!wanted.event) return undefined;
  const event: ModelCallEvent = {
    runId: grant.runId,
    provider: call.providerId,
    model: call.model,
    path: call.routePath,
    inputTokens: usage.inputTokens,
    outputTokens: usage.outputTokens,
    cacheReadTokens: usage.cacheReadTokens,
    cacheWriteTokens: usage.cacheWriteTokens,
    latencyMs: performance.now() - outcome.started,
    status: outcome.status,
    stream: call.stream,
  };
  // Set one by one, not spread in: conditional spreads take V8's slow path on every call.
  if (cost !== undefined) event.costUsd = cost;
  if (outcome.aborted) event.aborted = true;
  if (outcome.unreachable) event.unreachable = outcome.unreachable;
  if (wanted.transcripts && call.parsed) event.request = call.parsed;
  return event;
}
