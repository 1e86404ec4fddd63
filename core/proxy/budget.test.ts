import { describe, expect, it } from 'vitest';
import { budgetMessage, checkBudget, estimateInputTokens, lowerOutput, MIN_USEFUL_OUTPUT_TOKENS, outputLimitOf, type BudgetCheck } from './budget';

const prices = { asOf: 'test', prices: { priced: { input: 2, output: 10, cacheWrite: 2.5 } } };
const nothing = { tokens: 0, costUsd: 0 };

function check(over: Partial<BudgetCheck>): ReturnType<typeof checkBudget> {
  return checkBudget({
    budget: undefined,
    used: { ...nothing, requests: 0 },
    held: nothing,
    // 368 bytes + room for an added output field = 400 bytes = 100 tokens.
    bodyBytes: 368,
    output: { field: 'max_tokens', requested: 1000 },
    model: 'unpriced',
    prices,
    ...over,
  });
}

describe('budget: stop before overshooting', () => {
  it('forwards as asked when the call fits, holding its input estimate and output limit', () => {
    expect(check({ budget: { maxTokens: 10_000 } })).toEqual({ action: 'forward', hold: { tokens: 100 + 1000, costUsd: 0 } });
  });

  it('lowers the output limit to what is left, counting calls in flight', () => {
    const d = check({ budget: { maxTokens: 5000 }, used: { tokens: 3000, costUsd: 0, requests: 3 }, held: { tokens: 1000, costUsd: 0 } });
    // 5000 - 3000 used - 1000 held - 100 input estimate
    expect(d).toMatchObject({ action: 'lower', field: 'max_tokens', maxOutput: 900, hold: { tokens: 1000 } });
  });

  it('refuses when less than a useful answer is left, saying how much was needed', () => {
    const d = check({ budget: { maxTokens: 5000 }, used: { tokens: 4700, costUsd: 0, requests: 3 } });
    expect(d).toEqual({ action: 'refuse', stop: { limit: 'tokens', used: 4700, max: 5000, needed: 100 + MIN_USEFUL_OUTPUT_TOKENS } });
  });

  it('sets an output limit where the client set none', () => {
    const d = check({ budget: { maxTokens: 2000 }, output: { field: 'max_completion_tokens' } });
    expect(d).toMatchObject({ action: 'lower', field: 'max_completion_tokens', maxOutput: 1900 });
    expect(check({ budget: { maxRequests: 5 }, output: { field: 'max_completion_tokens' } })).toMatchObject({ action: 'forward' });
  });

  it('holds a USD budget with the price table, pricing input at the dearest input rate', () => {
    // $0.02 left after $0.98; input 100 tokens × $2.5/M = $0.00025; output at $10/M → 1975 tokens.
    const d = check({ budget: { maxCostUsd: 1 }, used: { tokens: 0, costUsd: 0.98, requests: 1 }, model: 'priced-2025', output: { field: 'max_tokens', requested: 4096 } });
    expect(d).toMatchObject({ action: 'lower', maxOutput: 1975 });
    const refused = check({ budget: { maxCostUsd: 1 }, used: { tokens: 0, costUsd: 0.999, requests: 1 }, model: 'priced' });
    expect(refused).toMatchObject({ action: 'refuse', stop: { limit: 'usd', max: 1 } });
    // A model without a price cannot be held to a USD budget (§9): the call goes as asked.
    expect(check({ budget: { maxCostUsd: 1 }, used: { tokens: 0, costUsd: 5, requests: 1 } })).toMatchObject({ action: 'forward' });
  });

  it('takes the tighter of the token and USD limits', () => {
    const d = check({ budget: { maxTokens: 100_000, maxCostUsd: 0.01 }, model: 'priced', output: { field: 'max_tokens', requested: 8192 } });
    expect(d).toMatchObject({ action: 'lower', maxOutput: 975, stop: { limit: 'usd' } });
  });

  it('counts only the input of calls that generate nothing, and refuses the requests budget', () => {
    expect(check({ budget: { maxTokens: 50 }, output: undefined, bodyBytes: 400 })).toMatchObject({ action: 'refuse', stop: { limit: 'tokens', needed: 100 } });
    expect(check({ budget: { maxTokens: 500 }, output: undefined, bodyBytes: 400 })).toEqual({ action: 'forward', hold: { tokens: 100, costUsd: 0 } });
    expect(check({ budget: { maxRequests: 2 }, used: { ...nothing, requests: 2 } })).toEqual({ action: 'refuse', stop: { limit: 'requests', used: 2, max: 2 } });
  });

  it('finds the output field of each route', () => {
    expect(outputLimitOf('/v1/messages', 'anthropic', { max_tokens: 64 })).toEqual({ field: 'max_tokens', requested: 64 });
    expect(outputLimitOf('/v1/responses', 'openai', { max_output_tokens: 9 })).toEqual({ field: 'max_output_tokens', requested: 9 });
    expect(outputLimitOf('/v1/chat/completions', 'openai', { max_tokens: 9 })).toEqual({ field: 'max_tokens', requested: 9 });
    expect(outputLimitOf('/v1/chat/completions', 'openai', { max_tokens: 90, max_completion_tokens: 9 })).toEqual({ field: 'max_completion_tokens', requested: 9 });
    expect(outputLimitOf('/v1/chat/completions', 'openai', {})).toEqual({ field: 'max_completion_tokens' });
    expect(outputLimitOf('/v1/chat/completions', 'openai-compatible', {})).toEqual({ field: 'max_tokens' });
    expect(outputLimitOf('/v1/embeddings', 'openai', {})).toBeUndefined();
  });

  it('lowers extended thinking with max_tokens, or gives up when it cannot fit', () => {
    const body = { max_tokens: 16_000, thinking: { type: 'enabled', budget_tokens: 10_000 } };
    expect(lowerOutput(body, 'max_tokens', 4000)).toEqual({ max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 3999 } });
    expect(lowerOutput(body, 'max_tokens', 1000)).toBeUndefined();
    expect(lowerOutput({ max_output_tokens: 50 }, 'max_output_tokens', 20)).toEqual({ max_output_tokens: 20 });
  });

  it('says it plainly', () => {
    expect(budgetMessage({ limit: 'tokens', used: 29_800, max: 30_000, needed: 1356 })).toBe(
      'This run used 29,800 of its 30,000 tokens; 200 are left. The next call needs about 1,356. Run again with a higher token budget to go further.',
    );
    expect(budgetMessage({ limit: 'usd', used: 0.4992, max: 0.5 })).toBe('This run spent $0.4992 of its $0.5000; $0.0008 is left. Run again with a higher cost budget to go further.');
    expect(budgetMessage({ limit: 'requests', used: 3, max: 3 })).toBe('This run made its 3 allowed model calls. Run again with a higher limit to go further.');
    expect(estimateInputTokens(401)).toBe(101);
  });
});
