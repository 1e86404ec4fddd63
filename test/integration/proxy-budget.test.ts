import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderConfig } from '../../core/keys/provider-catalog';
import { Secret } from '../../core/keys/secret';
import { ModelProxy, type RunBudget } from '../../core/proxy/model-proxy';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';

const KEY = 'sk-budget-test-key-0123456789';

// Budgets hold before a call goes out (docs/architecture.md §9): real HTTP and SSE through the proxy
// to the scripted upstream, which answers with as many output tokens as it is allowed to.
describe('model proxy budgets stop before they overshoot', () => {
  let up: FakeUpstream;
  let proxy: ModelProxy;
  let base: string;

  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: KEY });
    const table: Record<string, ProviderConfig> = {
      anthropic: { id: 'anthropic', label: 'Anthropic', kind: 'anthropic', baseUrl: up.url, requiresKey: true, builtin: true, models: [] },
      openai: { id: 'openai', label: 'OpenAI', kind: 'openai', baseUrl: `${up.url}/v1`, requiresKey: true, builtin: true, models: [] },
    };
    proxy = new ModelProxy({
      resolveUpstream: async (id) => ({ config: table[id] as ProviderConfig, key: new Secret(KEY) }),
      // $1 per million input tokens, $100 per million output tokens.
      prices: { asOf: 'test', prices: { 'priced-model': { input: 1, output: 100 } } },
    });
    base = `http://127.0.0.1:${(await proxy.start()).port}`;
  });
  afterAll(async () => {
    await proxy.stop();
    await up.close();
  });

  const tokenFor = (runId: string, budget: RunBudget) => proxy.issueToken({ runId, providers: ['anthropic', 'openai'], budget }).token;
  const total = (runId: string) => {
    const u = proxy.usage(runId);
    return u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens;
  };
  /** A long answer: the fake counts a token per 4 characters, capped at the request's output limit. */
  const long = { text: 'x'.repeat(40_000) };

  it('an agent loop streaming over SSE never passes its token budget; the last calls get a lowered max_tokens, then a refusal', async () => {
    const budget = 5000;
    up.setScript(Array.from({ length: 20 }, () => long));
    const client = new Anthropic({ apiKey: tokenFor('r-loop', { maxTokens: budget }), baseURL: base, maxRetries: 0 });
    const seenBefore = up.requests.length;
    let refusal: unknown;
    const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'write a lot' }];
    for (let i = 0; i < 20 && !refusal; i++) {
      try {
        const m = await client.messages.stream({ model: 'claude-test', max_tokens: 2048, messages }).finalMessage();
        expect(m.usage.output_tokens).toBeLessThanOrEqual(2048);
        messages.push({ role: 'assistant', content: 'written' }, { role: 'user', content: 'more' });
      } catch (err) {
        refusal = err;
      }
    }
    // Usage never passes the budget, and the run is stopped with a plain message in Anthropic's format.
    expect(total('r-loop')).toBeLessThanOrEqual(budget);
    expect(refusal).toMatchObject({ status: 429, error: { type: 'error', error: { type: 'rate_limit_error', message: expect.stringMatching(/^Airlock budget reached: This run used [\d,]+ of its 5,000 tokens/) } } });
    const seen = up.requests.slice(seenBefore).map((r) => (r.body as { max_tokens: number }).max_tokens);
    expect(seen[0]).toBe(2048);
    // The upstream saw a max_tokens lowered to what was left (not the 2048 asked for) before the refusal.
    expect(seen.some((n) => n < 2048)).toBe(true);
    expect(proxy.budgetStop('r-loop')).toMatchObject({ limit: 'tokens', max: budget });
  });

  it('OpenAI Chat without an output limit gets max_completion_tokens; Responses get max_output_tokens lowered', async () => {
    up.setScript([long, long]);
    const client = new OpenAI({ apiKey: tokenFor('r-openai', { maxTokens: 1500 }), baseURL: `${base}/v1`, maxRetries: 0 });
    const seenBefore = up.requests.length;
    const chat = await client.chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }], stream: true });
    for await (const chunk of chat) void chunk;
    const chatBody = up.requests[seenBefore]?.body as Record<string, unknown>;
    expect(chatBody.max_completion_tokens).toBeGreaterThan(0);
    expect(chatBody.max_completion_tokens).toBeLessThan(1500);
    expect(chatBody.max_tokens).toBeUndefined();
    const used = total('r-openai');
    expect(used).toBeLessThanOrEqual(1500);
    // What is left is under a useful answer: refused in OpenAI's own error format.
    await expect(client.responses.create({ model: 'gpt-x', input: 'more', max_output_tokens: 4000 })).rejects.toMatchObject({
      status: 429,
      error: { type: 'insufficient_quota', code: 'budget_exceeded', message: expect.stringContaining('Airlock budget reached') },
    });
    expect(up.requests.length).toBe(seenBefore + 1);

    const roomy = new OpenAI({ apiKey: tokenFor('r-responses', { maxTokens: 3000 }), baseURL: `${base}/v1`, maxRetries: 0 });
    await roomy.responses.create({ model: 'gpt-x', input: 'hi', max_output_tokens: 8000 });
    const lowered = (up.requests.at(-1)?.body as Record<string, number>).max_output_tokens;
    expect(lowered).toBeLessThan(3000);
    expect(total('r-responses')).toBeLessThanOrEqual(3000);
  });

  it('a USD budget lowers the output limit by the price table and never overspends', async () => {
    up.setScript(Array.from({ length: 10 }, () => long));
    // $0.10 at $100/M output is at most 1000 output tokens in all.
    const client = new Anthropic({ apiKey: tokenFor('r-usd', { maxCostUsd: 0.1 }), baseURL: base, maxRetries: 0 });
    const seenBefore = up.requests.length;
    let refused: unknown;
    for (let i = 0; i < 10 && !refused; i++) {
      await client.messages.create({ model: 'priced-model', max_tokens: 600, messages: [{ role: 'user', content: 'go' }] }).catch((err: unknown) => { refused = err; });
    }
    expect(proxy.usage('r-usd').costUsd).toBeLessThanOrEqual(0.1);
    expect(refused).toMatchObject({ status: 429, error: { error: { message: expect.stringMatching(/^Airlock budget reached: This run spent \$0\.\d{4} of its \$0\.1000/) } } });
    const seen = up.requests.slice(seenBefore).map((r) => (r.body as { max_tokens: number }).max_tokens);
    expect(seen[0]).toBe(600);
    expect(seen[1]).toBeLessThan(600);
  });

  it('calls in parallel hold their share, so together they cannot pass the budget', async () => {
    up.setScript(Array.from({ length: 4 }, () => ({ ...long, delayMs: 100 })));
    const client = new Anthropic({ apiKey: tokenFor('r-parallel', { maxTokens: 3000 }), baseURL: base, maxRetries: 0 });
    const results = await Promise.allSettled(
      Array.from({ length: 4 }, () => client.messages.create({ model: 'claude-test', max_tokens: 1024, messages: [{ role: 'user', content: 'go' }] })),
    );
    expect(results.filter((r) => r.status === 'rejected').length).toBeGreaterThan(0);
    expect(total('r-parallel')).toBeLessThanOrEqual(3000);
  });
});
