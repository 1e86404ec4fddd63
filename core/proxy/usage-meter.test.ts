import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { costOf, DEFAULT_PRICES, priceOf, priceTableFor, withOverrides } from './price-table';
import { SseUsageScanner, usageFromJson } from './usage-meter';
import { matchRoute } from './wire-format';
import { upstreamUrl } from '../upstream/upstream-client';

const u = (inputTokens: number, outputTokens: number, cacheReadTokens = 0, cacheWriteTokens = 0) => ({ inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens });

describe('usage metering', () => {
  it('reads usage from JSON answers of every format, cache reads and writes apart from plain input', () => {
    expect(usageFromJson('{"usage":{"input_tokens":5,"cache_read_input_tokens":2,"cache_creation_input_tokens":4,"output_tokens":3}}')).toEqual(u(5, 3, 2, 4));
    // OpenAI counts cached input inside the prompt total.
    expect(usageFromJson('{"usage":{"prompt_tokens":10,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":4}}}')).toEqual(u(6, 6, 4));
    expect(usageFromJson('{"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":8},"output_tokens":1}}')).toEqual(u(1, 1, 8));
    expect(usageFromJson('not json')).toEqual(u(0, 0));
  });
  it('reads usage from SSE streams split at arbitrary byte boundaries', () => {
    const anthropic =
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":25,"cache_read_input_tokens":900,"cache_creation_input_tokens":40,"output_tokens":1}}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"usage is fine"}}\n\n' +
      'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":15}}\n\n';
    const responses = 'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"input_tokens":9,"output_tokens":4}}}\n\n';
    const chat = 'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2}}\n\ndata: [DONE]\n\n';
    for (const [text, want] of [[anthropic, u(25, 15, 900, 40)], [responses, u(9, 4)], [chat, u(8, 2)]] as const) {
      for (const step of [1, 7, 64, 10_000]) {
        const s = new SseUsageScanner();
        for (let i = 0; i < text.length; i += step) s.push(Buffer.from(text.slice(i, i + step)));
        expect(s.usage).toEqual(want);
      }
    }
  });
});

describe('price table', () => {
  const perMillion = (model: string, tokens: Partial<ReturnType<typeof u>>) => costOf(DEFAULT_PRICES, model, { ...u(0, 0), ...tokens });

  it('is dated', () => {
    expect(DEFAULT_PRICES.asOf).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });
  it('bills the published list prices per million tokens', () => {
    // [model id, input, output, cache read, 5-minute cache write] as the providers publish them.
    const published: Array<[string, number, number, number, number]> = [
      ['claude-opus-4-5-20251101', 5, 25, 0.5, 6.25],
      ['claude-opus-4-1-20250805', 15, 75, 1.5, 18.75],
      ['claude-opus-4-20250514', 15, 75, 1.5, 18.75],
      ['claude-sonnet-4-5-20250929', 3, 15, 0.3, 3.75],
      ['claude-haiku-4-5-20251001', 1, 5, 0.1, 1.25],
      ['claude-3-5-haiku-20241022', 0.8, 4, 0.08, 1],
    ];
    for (const [model, input, output, read, write] of published) {
      expect(perMillion(model, { inputTokens: 1_000_000 }), model).toBeCloseTo(input, 9);
      expect(perMillion(model, { outputTokens: 1_000_000 }), model).toBeCloseTo(output, 9);
      expect(perMillion(model, { cacheReadTokens: 1_000_000 }), model).toBeCloseTo(read, 9);
      expect(perMillion(model, { cacheWriteTokens: 1_000_000 }), model).toBeCloseTo(write, 9);
    }
    expect(perMillion('gpt-5-mini', { outputTokens: 1_000_000 })).toBe(2);
    expect(perMillion('gpt-5-2025-08-07', { inputTokens: 1_000_000, cacheReadTokens: 1_000_000 })).toBeCloseTo(1.25 + 0.125, 9);
  });
  it('matches whole model-id segments, and leaves unknown models unpriced', () => {
    expect(priceOf(DEFAULT_PRICES, 'gpt-5.3')).toBeUndefined(); // not gpt-5's price
    expect(priceOf(DEFAULT_PRICES, 'claude-opus-4-5')).toMatchObject({ input: 5 }); // not claude-opus-4's
    expect(perMillion('llama3', { inputTokens: 10 })).toBeUndefined();
  });
  it('takes the user\'s entries over the built-in ones, and adds models', () => {
    const table = withOverrides(DEFAULT_PRICES, { 'claude-opus-4-5': { input: 4, output: 20 }, llama3: { input: 0.1, output: 0.2 } });
    expect(costOf(table, 'claude-opus-4-5-20251101', u(1_000_000, 0))).toBe(4);
    // A cache rate the entry does not state is billed as plain input.
    expect(costOf(table, 'claude-opus-4-5-20251101', u(0, 0, 1_000_000))).toBe(4);
    expect(costOf(table, 'llama3', u(0, 1_000_000))).toBe(0.2);
    expect(table.asOf).toBe(DEFAULT_PRICES.asOf);
    expect(costOf(DEFAULT_PRICES, 'llama3', u(1, 1))).toBeUndefined();
  });
  it('reads the prices setting, and refuses an entry that is not a price with where to fix it', () => {
    expect(priceTableFor(undefined)).toBe(DEFAULT_PRICES);
    expect(costOf(priceTableFor({ llama3: { input: 1, output: 2 } }), 'llama3', u(1_000_000, 0))).toBe(1);
    expect(() => priceTableFor({ llama3: { input: -1, output: 2 } })).toThrow(/settings\.json: "prices\.llama3\.input"/);
    expect(() => priceTableFor({ llama3: { input: '5' } })).toThrow(AirlockError);
  });
});

describe('routing', () => {
  it('matches only exact known paths and methods', () => {
    expect(matchRoute('POST', '/v1/messages', {}, 'openai')).toMatchObject({ ok: true, format: 'anthropic' });
    expect(matchRoute('GET', '/v1/models', { 'anthropic-version': 'x' }, 'openai')).toMatchObject({ ok: true, format: 'anthropic' });
    expect(matchRoute('GET', '/v1/models', {}, 'openai')).toMatchObject({ ok: true, format: 'openai' });
    expect(matchRoute('GET', '/v1/messages', {}, 'openai')).toMatchObject({ ok: false, status: 405 });
    for (const p of ['/v1/../v1/messages', '/v1/%2e%2e/messages', '/v1/messages/', '//v1/messages', '/v1/files', '/v1/chat/completions/../../admin']) {
      expect(matchRoute('POST', p, {}, 'openai')).toMatchObject({ ok: false, status: 404 });
    }
  });
  it('builds upstream URLs for both base URL conventions, keeping the query', () => {
    const a = { id: 'anthropic', label: 'A', kind: 'anthropic' as const, baseUrl: 'https://gw.test/anthropic', requiresKey: true, builtin: true, models: [] };
    const o = { ...a, id: 'or', kind: 'openai-compatible' as const, baseUrl: 'https://openrouter.test/api/v1' };
    expect(upstreamUrl(a, '/v1/messages?beta=true').href).toBe('https://gw.test/anthropic/v1/messages?beta=true');
    expect(upstreamUrl(o, '/v1/chat/completions').href).toBe('https://openrouter.test/api/v1/chat/completions');
  });
});
