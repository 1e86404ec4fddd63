import type { ProviderKind } from '../../contracts/keys';
import { priceOf, type PriceTable } from './price-table';

/**
 * Budgets that stop before they overshoot (docs/architecture.md §9). Before a generation call goes
 * upstream, the proxy adds up what the run has used, what calls still in flight may use, an estimate
 * of this call's input and the most it may answer (its `max_tokens`). If that would pass the token or
 * USD budget, it lowers the call's output limit to what is left, or refuses the call when too little
 * is left for a useful answer. Pure functions: `model-proxy.ts` applies them.
 */

/** What a run may spend through the proxy. */
export interface RunBudget {
  maxRequests?: number;
  maxTokens?: number;
  maxCostUsd?: number;
}

/** What a run has used (finished calls), or holds for calls in flight. */
export interface BudgetAmount {
  tokens: number;
  costUsd: number;
}

/** Why a call was refused: which limit, how much was used and held, and how much the call needed. */
export interface BudgetStop {
  limit: 'requests' | 'tokens' | 'usd';
  /** Used by finished calls plus held by calls in flight. */
  used: number;
  max: number;
  /** What the refused call needed at least (its input estimate plus the smallest useful answer). */
  needed?: number;
}

/** Lowering an answer below this many tokens makes it useless; the call is refused instead. */
export const MIN_USEFUL_OUTPUT_TOKENS = 256;

/**
 * Input tokens a request body is taken to cost: one per 4 bytes, the usual ratio of English text
 * and code (JSON syntax makes it generous for prose; dense non-Latin text can exceed it).
 */
export function estimateInputTokens(bodyBytes: number): number {
  return Math.ceil(bodyBytes / 4);
}

/** Room in the estimate for the output-limit field the proxy may add (`"max_completion_tokens":1234567,`). */
const ADDED_FIELD_BYTES = 32;

/** The body field that caps a call's output on a route, and its current value when the client set one. */
export interface OutputLimit {
  field: 'max_tokens' | 'max_completion_tokens' | 'max_output_tokens';
  requested?: number;
}

function positiveInt(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : undefined;
}

/**
 * Where a route's output limit lives. Chat Completions keeps the field the client used (OpenAI's
 * reasoning models refuse `max_tokens`; many compatible servers know only `max_tokens`); without
 * one, OpenAI gets `max_completion_tokens` and compatible servers `max_tokens`. Routes that
 * generate nothing (`count_tokens`, `embeddings`, `models`) have none.
 */
export function outputLimitOf(route: string, kind: ProviderKind, body: Record<string, unknown>): OutputLimit | undefined {
  switch (route) {
    case '/v1/messages':
      return { field: 'max_tokens', requested: positiveInt(body.max_tokens) };
    case '/v1/responses':
      return { field: 'max_output_tokens', requested: positiveInt(body.max_output_tokens) };
    case '/v1/chat/completions': {
      const completion = positiveInt(body.max_completion_tokens);
      const legacy = positiveInt(body.max_tokens);
      if (completion !== undefined && (legacy === undefined || completion <= legacy)) return { field: 'max_completion_tokens', requested: completion };
      if (legacy !== undefined) return { field: 'max_tokens', requested: legacy };
      return { field: kind === 'openai' ? 'max_completion_tokens' : 'max_tokens' };
    }
    default:
      return undefined;
  }
}

export type BudgetDecision =
  | { action: 'forward'; hold: BudgetAmount }
  /** Forward with the output limit set to `maxOutput` (lower than asked, or set where none was); `stop` if that cannot be done. */
  | { action: 'lower'; field: OutputLimit['field']; maxOutput: number; hold: BudgetAmount; stop: BudgetStop }
  | { action: 'refuse'; stop: BudgetStop };

export interface BudgetCheck {
  budget: RunBudget | undefined;
  used: BudgetAmount & { requests: number };
  /** Held by this run's calls in flight. */
  held: BudgetAmount;
  bodyBytes: number;
  /** Undefined for routes that generate nothing. */
  output: OutputLimit | undefined;
  model: string;
  prices: PriceTable;
}

/**
 * Decides whether a call may go out as asked, with a lower output limit, or not at all. The call
 * holds its input estimate and output limit (tokens and cost) until it finishes, so calls in
 * parallel cannot together pass the budget.
 */
export function checkBudget(c: BudgetCheck): BudgetDecision {
  const b = c.budget;
  const input = estimateInputTokens(c.bodyBytes + (c.output ? ADDED_FIELD_BYTES : 0));
  if (!b) return { action: 'forward', hold: { tokens: 0, costUsd: 0 } };
  if (b.maxRequests !== undefined && c.used.requests >= b.maxRequests) return { action: 'refuse', stop: { limit: 'requests', used: c.used.requests, max: b.maxRequests } };

  // Output tokens each limit still allows after the input estimate (Infinity: no such limit).
  let room = Number.POSITIVE_INFINITY;
  let tightest: BudgetStop | undefined;
  const tokensSpent = c.used.tokens + c.held.tokens;
  if (b.maxTokens !== undefined) {
    room = b.maxTokens - tokensSpent - input;
    tightest = { limit: 'tokens', used: tokensSpent, max: b.maxTokens, needed: input + MIN_USEFUL_OUTPUT_TOKENS };
  }
  // A model the price table does not know has no cost: a USD budget cannot hold for it (§9).
  const price = priceOf(c.prices, c.model);
  let inputCost = 0;
  if (price) {
    // Input is priced at the model's dearest input rate (a cache write, for Anthropic), never cheaper.
    inputCost = (input * Math.max(price.input, price.cacheWrite ?? price.input)) / 1e6;
    const costSpent = c.used.costUsd + c.held.costUsd;
    if (b.maxCostUsd !== undefined) {
      const perOutput = price.output / 1e6;
      // (+1e-9: floating-point dust must not cost a token.)
      const usdRoom = perOutput > 0 ? Math.floor((b.maxCostUsd - costSpent - inputCost) / perOutput + 1e-9) : Number.POSITIVE_INFINITY;
      if (usdRoom < room) {
        room = usdRoom;
        tightest = { limit: 'usd', used: costSpent, max: b.maxCostUsd, needed: inputCost + MIN_USEFUL_OUTPUT_TOKENS * perOutput };
      }
    }
  }
  const costOfOutput = (n: number) => (price ? (n * price.output) / 1e6 : 0);

  if (!c.output) {
    // Nothing generated: only the input counts.
    if (room < 0 && tightest) return { action: 'refuse', stop: { ...tightest, needed: tightest.limit === 'tokens' ? input : inputCost } };
    return { action: 'forward', hold: { tokens: input, costUsd: inputCost } };
  }
  const requested = c.output.requested;
  if (requested !== undefined && requested <= room) return { action: 'forward', hold: { tokens: input + requested, costUsd: inputCost + costOfOutput(requested) } };
  if (!tightest) return { action: 'forward', hold: { tokens: input, costUsd: inputCost } };
  if (room < MIN_USEFUL_OUTPUT_TOKENS) return { action: 'refuse', stop: tightest };
  return { action: 'lower', field: c.output.field, maxOutput: room, hold: { tokens: input + room, costUsd: inputCost + costOfOutput(room) }, stop: tightest };
}

/**
 * Applies a lowered output limit to a request body. Anthropic's extended thinking needs its own
 * budget below `max_tokens` (and at least 1024): it is lowered too, or the call cannot be kept.
 */
export function lowerOutput(body: Record<string, unknown>, field: OutputLimit['field'], maxOutput: number): Record<string, unknown> | undefined {
  const next: Record<string, unknown> = { ...body, [field]: maxOutput };
  const thinking = body.thinking;
  if (field === 'max_tokens' && thinking && typeof thinking === 'object' && !Array.isArray(thinking)) {
    const t = thinking as Record<string, unknown>;
    const thinkingBudget = positiveInt(t.budget_tokens);
    if (t.type === 'enabled' && thinkingBudget !== undefined && thinkingBudget >= maxOutput) {
      if (maxOutput <= 1024) return undefined;
      next.thinking = { ...t, budget_tokens: maxOutput - 1 };
    }
  }
  return next;
}

function tokens(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

function usd(n: number): string {
  return `$${n.toFixed(n < 1 ? 4 : 2)}`;
}

/**
 * What stopped the run, in plain words, for the user and the CLI (under the title "Budget reached");
 * the agent gets it after `AGENT_PREFIX`.
 */
export const AGENT_PREFIX = 'Airlock budget reached: ';

export function budgetMessage(stop: BudgetStop): string {
  switch (stop.limit) {
    case 'requests':
      return `This run made its ${tokens(stop.max)} allowed model calls. Run again with a higher limit to go further.`;
    case 'tokens': {
      const left = Math.max(0, stop.max - stop.used);
      const next = stop.needed !== undefined ? ` The next call needs about ${tokens(stop.needed)}.` : '';
      return `This run used ${tokens(stop.used)} of its ${tokens(stop.max)} tokens; ${tokens(left)} are left.${next} Run again with a higher token budget to go further.`;
    }
    case 'usd': {
      const left = Math.max(0, stop.max - stop.used);
      const next = stop.needed !== undefined ? ` The next call could cost up to ${usd(stop.needed)}.` : '';
      return `This run spent ${usd(stop.used)} of its ${usd(stop.max)}; ${usd(left)} is left.${next} Run again with a higher cost budget to go further.`;
    }
  }
}
