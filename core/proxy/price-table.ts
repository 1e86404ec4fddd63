import { AirlockError } from '../../contracts/errors';
import { Settings, type ModelPrice } from '../../contracts/settings';

export type { ModelPrice } from '../../contracts/settings';

/**
 * Prices in USD per million tokens, keyed by model-id prefix (docs/architecture.md §9). A prefix
 * matches a model id equal to it or followed by `-`, `@`, `:` or `[` (date suffixes, variants), so
 * `gpt-5` prices `gpt-5-2025-08-07` but not `gpt-5.5`; the longest matching prefix wins.
 */
export interface PriceTable {
  /** The day these prices were checked against the providers' published price lists. */
  asOf: string;
  prices: Readonly<Record<string, ModelPrice>>;
}

/** Anthropic bills cache reads at 0.1× input and 5-minute cache writes at 1.25× input. */
function anthropic(input: number, output: number, cacheReadMultiplier = 0.1): ModelPrice {
  return { input, output, cacheRead: round(input * cacheReadMultiplier), cacheWrite: round(input * 1.25) };
}

/** OpenAI bills cached input at its own rate and has no separate cache write. */
function openai(input: number, cachedInput: number, output: number): ModelPrice {
  return { input, output, cacheRead: cachedInput, cacheWrite: input };
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

/**
 * Published list prices (standard tier, no batch discount, prompts within the base context tier).
 * Models with tiered or unpublished prices are left out: they get no cost unless the user's
 * `prices` setting adds them. Update `asOf` whenever an entry is checked or changed.
 */
export const DEFAULT_PRICES: PriceTable = {
  asOf: '2026-11-30',
  prices: {
    // Anthropic
    'claude-fable-5-1': anthropic(10, 50, 0.025),
    'claude-fable-5': anthropic(10, 50),
    'claude-opus-5-5': anthropic(4, 20, 0.05),
    'claude-opus-5': anthropic(5, 25),
    'claude-opus-4-8': anthropic(5, 25),
    'claude-opus-4-7': anthropic(5, 25),
    'claude-opus-4-6': anthropic(5, 25),
    'claude-opus-4-5': anthropic(5, 25),
    'claude-opus-4-1': anthropic(15, 75),
    'claude-opus-4': anthropic(15, 75),
    'claude-3-opus': anthropic(15, 75),
    'claude-sonnet-5-5': anthropic(2, 10, 0.05),
    'claude-sonnet-5': anthropic(2, 10),
    'claude-sonnet-4': anthropic(3, 15),
    'claude-3-7-sonnet': anthropic(3, 15),
    'claude-3-5-sonnet': anthropic(3, 15),
    'claude-haiku-4': anthropic(1, 5),
    'claude-3-5-haiku': anthropic(0.8, 4),
    'claude-3-haiku': anthropic(0.25, 1.25),
    // OpenAI
    'gpt-5.5': openai(5, 0.5, 30),
    'gpt-5.4': openai(2.5, 0.25, 15),
    'gpt-5.4-mini': openai(0.75, 0.075, 4.5),
    'gpt-5.4-nano': openai(0.2, 0.02, 1.25),
    'gpt-5.2': openai(1.75, 0.175, 14),
    'gpt-5.1': openai(1.25, 0.125, 10),
    'gpt-5': openai(1.25, 0.125, 10),
    'gpt-5-mini': openai(0.25, 0.025, 2),
    'gpt-5-nano': openai(0.05, 0.005, 0.4),
    'gpt-4.1': openai(2, 0.5, 8),
    'gpt-4.1-mini': openai(0.4, 0.1, 1.6),
    'gpt-4.1-nano': openai(0.1, 0.025, 0.4),
    'gpt-4o': openai(2.5, 1.25, 10),
    'gpt-4o-mini': openai(0.15, 0.075, 0.6),
    'o3': openai(2, 0.5, 8),
    'o4-mini': openai(1.1, 0.275, 4.4),
    'text-embedding-3-small': { input: 0.02, output: 0 },
    'text-embedding-3-large': { input: 0.13, output: 0 },
  },
};

/** The built-in table with the user's entries (the `prices` setting) added or replacing built-in ones. */
export function withOverrides(table: PriceTable, overrides: Readonly<Record<string, ModelPrice>> | undefined): PriceTable {
  if (!overrides || Object.keys(overrides).length === 0) return table;
  return { asOf: table.asOf, prices: { ...table.prices, ...overrides } };
}

/**
 * The built-in table under the user's `prices` setting. A hand-edited entry that is not a valid
 * price is refused with the place to fix, since budgets depend on it.
 */
export function priceTableFor(setting: unknown): PriceTable {
  const parsed = Settings.shape.prices.safeParse(setting);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = ['prices', ...(issue?.path ?? [])].join('.');
    throw new AirlockError('INVALID_INPUT', `settings.json: "${where}" ${issue?.message ?? 'is not valid'}; a price is {"input": USD per million tokens, "output": …, "cacheRead"?: …, "cacheWrite"?: …}.`);
  }
  return withOverrides(DEFAULT_PRICES, parsed.data);
}

/** Token counts of one call, each billed at its own rate. `inputTokens` excludes cached input. */
export interface TokenCounts {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
}

/** The entry that prices a model id, or undefined when the table does not know it. */
export function priceOf(table: PriceTable, model: string): ModelPrice | undefined {
  let best: string | undefined;
  for (const prefix of Object.keys(table.prices)) {
    if (!model.startsWith(prefix) || (best && prefix.length <= best.length)) continue;
    const next = model.charAt(prefix.length);
    if (next === '' || next === '-' || next === '@' || next === ':' || next === '[') best = prefix;
  }
  return best === undefined ? undefined : table.prices[best];
}

/**
 * Cost of one call in USD, or undefined when the table does not know the model. A cache rate the
 * entry does not state is billed as plain input (never cheaper than the provider would bill).
 */
export function costOf(table: PriceTable, model: string, tokens: TokenCounts): number | undefined {
  const price = priceOf(table, model);
  if (!price) return undefined;
  const micro =
    tokens.inputTokens * price.input +
    tokens.outputTokens * price.output +
    (tokens.cacheReadTokens ?? 0) * (price.cacheRead ?? price.input) +
    (tokens.cacheWriteTokens ?? 0) * (price.cacheWrite ?? price.input);
  return micro / 1_000_000;
}
