import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../../test/fixtures/fake-upstream';
import type { ProviderConfig } from '../keys/provider-catalog';
import { Secret } from '../keys/secret';
import { ModelProxy } from './model-proxy';

const KEY = 'sk-echo-REALKEY-5b1e0c9a7d3f42e8b6a0c4d2e1f39a77';

interface Received {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body as it arrived, chunk by chunk. */
  chunks: string[];
}

describe('model proxy: an upstream that echoes the key', () => {
  let up: FakeUpstream;
  let proxy: ModelProxy;
  let port: number;
  let token: string;

  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: KEY });
    const config: ProviderConfig = { id: 'anthropic', label: 'Anthropic', kind: 'anthropic', baseUrl: up.url, requiresKey: true, builtin: true, models: [] };
    proxy = new ModelProxy({ resolveUpstream: async () => ({ config, key: new Secret(KEY) }) });
    ({ port } = await proxy.start());
    ({ token } = proxy.issueToken({ runId: 'r-echo', providers: ['anthropic'] }));
  });
  afterAll(async () => {
    await proxy.stop();
    await up.close();
  });

  /** One call as the sandbox makes it, through the proxy. */
  const call = (stream: boolean) =>
    new Promise<Received>((resolve, reject) => {
      const body = JSON.stringify({ model: 'm', max_tokens: 5, stream, messages: [{ role: 'user', content: 'hi' }] });
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/messages', method: 'POST', headers: { 'x-api-key': token, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        const chunks: string[] = [];
        res.setEncoding('utf8');
        res.on('data', (c: string) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, chunks }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(body);
    });

  const expectNoKey = (r: Received) => {
    const seen = JSON.stringify(r.headers) + r.chunks.join('');
    for (const piece of [KEY, KEY.slice(0, 16), KEY.slice(-12)]) expect(seen).not.toContain(piece);
  };

  it('redacts it from a 2xx JSON body cut across chunks and from the headers', async () => {
    const chunks = [`{"type":"message","echo":"you sent ${KEY.slice(0, 10)}`, KEY.slice(10, 30), `${KEY.slice(30)} ok","usage":{"input_tokens":3,"output_tokens":2}}`];
    up.setScript([{ raw: { headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(chunks.join(''))), 'x-echo': `key=${KEY}` }, chunks, chunkDelayMs: 20 } }]);
    const r = await call(false);
    expect(r.status).toBe(200);
    expectNoKey(r);
    expect(r.headers['x-echo']).toBe('key=[REDACTED]');
    // The body got shorter: it goes out whole with its own length, not the upstream's.
    expect(r.headers['content-length']).toBe(String(Buffer.byteLength(r.chunks.join(''))));
    expect(r.headers['content-length']).not.toBe(String(Buffer.byteLength(chunks.join(''))));
    expect(JSON.parse(r.chunks.join(''))).toMatchObject({ echo: 'you sent [REDACTED] ok' });
    expect(proxy.usage('r-echo')).toMatchObject({ inputTokens: 3, outputTokens: 2 });
  });

  it('redacts it from an SSE stream cut across chunks, and still streams event by event', async () => {
    const first = 'event: message_start\ndata: {"type":"message_start"}\n\n';
    const chunks = [first, `event: delta\ndata: {"text":"${KEY.slice(0, 20)}`, `${KEY.slice(20)}"}\n\n`, `data: {"text":"${KEY.slice(0, 16)} and ${KEY.slice(-12)}"}\n\n`, 'event: message_stop\ndata: {"type":"message_stop"}\n\n'];
    up.setScript([{ raw: { chunks, chunkDelayMs: 40 } }]);
    const r = await call(true);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/event-stream');
    expectNoKey(r);
    expect(r.chunks.join('')).toBe(`${first}event: delta\ndata: {"text":"[REDACTED]"}\n\ndata: {"text":"[REDACTED] and [REDACTED]"}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n`);
    // The first event was not held back for what followed; only the key's start waited for its end.
    expect(r.chunks[0]).toBe(first);
    expect(r.chunks[1]).toBe('event: delta\ndata: {"text":"');
  });

  it('passes an answer without the key through unchanged, a start of the key that goes elsewhere too', async () => {
    const chunks = ['data: {"text":"plain ', `${KEY.slice(0, 12)}`, 'and then not the key"}\n\n', 'data: [DONE]\n\n'];
    up.setScript([{ raw: { chunks, chunkDelayMs: 10 } }]);
    const r = await call(true);
    expect(r.chunks.join('')).toBe(chunks.join(''));
  });
});

describe('model proxy: cost budgets of cache-heavy calls', () => {
  let up: FakeUpstream;
  let proxy: ModelProxy;
  let port: number;

  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: KEY });
    const config: ProviderConfig = { id: 'anthropic', label: 'Anthropic', kind: 'anthropic', baseUrl: up.url, requiresKey: true, builtin: true, models: [] };
    proxy = new ModelProxy({ resolveUpstream: async () => ({ config, key: new Secret(KEY) }) });
    ({ port } = await proxy.start());
  });
  afterAll(async () => {
    await proxy.stop();
    await up.close();
  });

  const call = (token: string) =>
    new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ model: 'claude-opus-4-5-20251101', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] });
      const req = http.request({ host: '127.0.0.1', port, path: '/v1/messages', method: 'POST', headers: { 'x-api-key': token, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('error', reject);
      req.end(body);
    });

  it('prices cache reads and writes apart from input, so --budget-usd holds at the published prices', async () => {
    // Claude Code's calls are mostly cache reads: 1M read, 10k written, 1k fresh input, 1k output.
    const answer = JSON.stringify({ type: 'message', content: [], usage: { input_tokens: 1000, cache_read_input_tokens: 1_000_000, cache_creation_input_tokens: 10_000, output_tokens: 1000 } });
    const step = { raw: { headers: { 'content-type': 'application/json' }, chunks: [answer] } };
    up.setScript([step, step, step]);
    const { token } = proxy.issueToken({ runId: 'r-cache', providers: ['anthropic'], budget: { maxCostUsd: 1 } });
    expect(await call(token)).toBe(200);
    // Opus 4.5: $5 in, $25 out, cache read $0.50, cache write $6.25 per MTok.
    const oneCall = (1000 * 5 + 1000 * 25 + 1_000_000 * 0.5 + 10_000 * 6.25) / 1e6;
    const usage = proxy.usage('r-cache');
    expect(usage).toMatchObject({ inputTokens: 1000, outputTokens: 1000, cacheReadTokens: 1_000_000, cacheWriteTokens: 10_000, requests: 1 });
    expect(usage.costUsd).toBeCloseTo(oneCall, 9);
    // $0.59 of $1 spent: the second call goes through (billing cache reads as input would have
    // charged $15.24 for the first call and refused this one).
    expect(await call(token)).toBe(200);
    expect(proxy.usage('r-cache').costUsd).toBeCloseTo(2 * oneCall, 9);
    expect(await call(token)).toBe(429);
  });

  it('uses the prices it is given later (the user corrected a model)', async () => {
    const answer = JSON.stringify({ type: 'message', content: [], usage: { input_tokens: 1_000_000, output_tokens: 0 } });
    up.setScript([{ raw: { headers: { 'content-type': 'application/json' }, chunks: [answer] } }]);
    proxy.setPrices({ asOf: 'test', prices: { 'claude-opus-4-5': { input: 7, output: 7 } } });
    const { token } = proxy.issueToken({ runId: 'r-override', providers: ['anthropic'] });
    expect(await call(token)).toBe(200);
    expect(proxy.usage('r-override').costUsd).toBe(7);
  });
});
