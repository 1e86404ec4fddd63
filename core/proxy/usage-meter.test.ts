import { describe, expect, it } from 'vitest';
import { costOf, DEFAULT_PRICES } from './price-table';
import { SseUsageScanner, usageFromJson } from './usage-meter';
import { matchRoute } from './wire-format';
import { upstreamUrl } from './upstream-client';

describe('usage metering', () => {
  it('reads usage from JSON answers of both formats', () => {
    expect(usageFromJson('{"usage":{"input_tokens":5,"cache_read_input_tokens":2,"output_tokens":3}}')).toEqual({ inputTokens: 7, outputTokens: 3 });
    expect(usageFromJson('{"usage":{"prompt_tokens":4,"completion_tokens":6,"total_tokens":10}}')).toEqual({ inputTokens: 4, outputTokens: 6 });
    expect(usageFromJson('not json')).toEqual({ inputTokens: 0, outputTokens: 0 });
  });
  it('reads usage from SSE streams split at arbitrary byte boundaries', () => {
    const anthropic =
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":25,"output_tokens":1}}}\n\n' +
      'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{"type":"text_delta","text":"usage is fine"}}\n\n' +
      'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":15}}\n\n';
    const responses = 'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"input_tokens":9,"output_tokens":4}}}\n\n';
    const chat = 'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":2}}\n\ndata: [DONE]\n\n';
    for (const [text, want] of [[anthropic, { inputTokens: 25, outputTokens: 15 }], [responses, { inputTokens: 9, outputTokens: 4 }], [chat, { inputTokens: 8, outputTokens: 2 }]] as const) {
      for (const step of [1, 7, 64, 10_000]) {
        const s = new SseUsageScanner();
        for (let i = 0; i < text.length; i += step) s.push(Buffer.from(text.slice(i, i + step)));
        expect(s.usage).toEqual(want);
      }
    }
  });
  it('prices known models by prefix and leaves unknown ones unpriced', () => {
    expect(costOf(DEFAULT_PRICES, 'claude-sonnet-4-5-20250929', 1_000_000, 0)).toBe(3);
    expect(costOf(DEFAULT_PRICES, 'gpt-5-mini', 0, 1_000_000)).toBe(2);
    expect(costOf(DEFAULT_PRICES, 'llama3', 10, 10)).toBeUndefined();
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
