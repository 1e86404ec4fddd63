import Anthropic from '@anthropic-ai/sdk';
import http from 'node:http';
import { connect } from 'node:net';
import OpenAI from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ModelProxy, vaultResolver, type ModelCallEvent } from '../../core/proxy/model-proxy';
import { KeyVault } from '../../core/keys/key-vault';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { ProviderConfig } from '../../core/keys/provider-catalog';
import { Secret } from '../../core/keys/secret';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';

const REAL_KEY = 'sk-canary-REALKEY-7f3a9c2e41d84b6fa0e5c1d2b3a49876';

function providers(up: FakeUpstream): Record<string, ProviderConfig> {
  return {
    anthropic: { id: 'anthropic', label: 'Anthropic', kind: 'anthropic', baseUrl: up.url, requiresKey: true, builtin: true, models: [] },
    openai: { id: 'openai', label: 'OpenAI', kind: 'openai', baseUrl: `${up.url}/v1`, requiresKey: true, builtin: true, models: [] },
  };
}

describe('model proxy with the official SDKs', () => {
  let up: FakeUpstream;
  let proxy: ModelProxy;
  let base: string;
  const events: ModelCallEvent[] = [];
  const seenByClient: string[] = [];

  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: REAL_KEY });
    const table = providers(up);
    proxy = new ModelProxy({
      resolveUpstream: async (id) => ({ config: table[id] as ProviderConfig, key: new Secret(REAL_KEY) }),
      prices: { asOf: 'test', prices: { 'claude-test': { input: 1_000_000, output: 1_000_000 } } },
    });
    proxy.onDidCall((e) => events.push(e));
    const { port } = await proxy.start();
    base = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await proxy.stop();
    await up.close();
  });
  afterEach(() => {
    // Whatever a client saw must never contain the real key.
    for (const text of seenByClient.splice(0)) expect(text).not.toContain(REAL_KEY);
  });

  const run = (runId: string, budget?: { maxRequests?: number; maxTokens?: number; maxCostUsd?: number }) =>
    proxy.issueToken({ runId, providers: ['anthropic', 'openai'], budget });

  it('Anthropic: JSON and streamed with tool use; upstream saw the real key, not the token', async () => {
    const { token } = run('r-sdk-1');
    up.setScript([
      { text: 'hi from claude', usage: { input: 12, output: 4 } },
      { text: 'checking', toolCalls: [{ id: 'toolu_9', name: 'bash', input: { cmd: 'ls' } }], usage: { input: 20, output: 6 } },
    ]);
    const client = new Anthropic({ apiKey: token, baseURL: base, maxRetries: 0 });
    const msg = await client.messages.create({ model: 'claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    seenByClient.push(JSON.stringify(msg));
    expect(msg.content[0]).toMatchObject({ type: 'text', text: 'hi from claude' });
    const final = await client.messages.stream({ model: 'claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'go' }] }).finalMessage();
    seenByClient.push(JSON.stringify(final));
    expect(final.content.find((b) => b.type === 'tool_use')).toMatchObject({ id: 'toolu_9', name: 'bash', input: { cmd: 'ls' } });

    const last2 = up.requests.slice(-2);
    for (const r of last2) {
      expect(r.headers['x-api-key']).toBe(REAL_KEY);
      expect(JSON.stringify(r.headers)).not.toContain(token);
      expect(r.headers['accept-encoding']).toBe('identity');
    }
    expect(proxy.usage('r-sdk-1')).toMatchObject({ inputTokens: 32, outputTokens: 10, requests: 2 });
    expect(proxy.usage('r-sdk-1').costUsd).toBeCloseTo(42);
    const mine = events.filter((e) => e.runId === 'r-sdk-1');
    expect(mine.map((e) => [e.provider, e.model, e.status, e.stream, e.inputTokens, e.outputTokens])).toEqual([
      ['anthropic', 'claude-test', 200, false, 12, 4],
      ['anthropic', 'claude-test', 200, true, 20, 6],
    ]);
    expect(JSON.stringify(mine)).not.toContain(REAL_KEY);
    expect(mine[0]).not.toHaveProperty('request');
  });

  it('OpenAI chat completions and responses, streamed and not, tool calls included', async () => {
    const { token } = run('r-sdk-2');
    up.setScript([
      { text: 'plain', usage: { input: 3, output: 2 } },
      { toolCalls: [{ id: 'call_a', name: 'edit', input: { file: 'x.ts' } }], usage: { input: 5, output: 7 } },
      { text: 'resp', usage: { input: 4, output: 1 } },
      { text: 'go', toolCalls: [{ id: 'call_b', name: 'shell', input: { cmd: 'pwd' } }], usage: { input: 6, output: 3 } },
    ]);
    const client = new OpenAI({ apiKey: token, baseURL: `${base}/v1`, maxRetries: 0 });
    const a = await client.chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] });
    expect(a.choices[0]?.message.content).toBe('plain');
    // No stream_options from the client: the proxy asks for usage so budgets hold.
    const b = await client.chat.completions.stream({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] }).finalChatCompletion();
    expect(b.choices[0]?.message.tool_calls?.[0]).toMatchObject({ id: 'call_a', function: { name: 'edit', arguments: '{"file":"x.ts"}' } });
    const c = await client.responses.create({ model: 'gpt-x', input: 'hi' });
    expect(c.output_text).toBe('resp');
    const d = await client.responses.stream({ model: 'gpt-x', input: 'hi' }).finalResponse();
    expect(d.output.find((o) => o.type === 'function_call')).toMatchObject({ call_id: 'call_b', name: 'shell' });
    seenByClient.push(JSON.stringify([a, b, c, d]));
    for (const r of up.requests.slice(-4)) {
      expect(r.headers.authorization).toBe(`Bearer ${REAL_KEY}`);
      expect(JSON.stringify(r.headers)).not.toContain(token);
    }
    expect(proxy.usage('r-sdk-2')).toMatchObject({ inputTokens: 18, outputTokens: 13, requests: 4 });
    expect(proxy.usage('r-sdk-2')).not.toHaveProperty('costUsd');
  });

  it('embeddings, both model lists, count_tokens, HEAD / and query strings pass through', async () => {
    const { token } = run('r-sdk-3');
    const oa = new OpenAI({ apiKey: token, baseURL: `${base}/v1`, maxRetries: 0 });
    const an = new Anthropic({ apiKey: token, baseURL: base, maxRetries: 0 });
    expect((await oa.embeddings.create({ model: 'text-embedding-3-small', input: 'abc' })).data[0]?.embedding).toHaveLength(8);
    expect((await oa.models.list()).data.map((m) => m.id)).toContain('gpt-5');
    expect((await an.models.list()).data.map((m) => m.id)).toContain('claude-sonnet-4-5');
    expect((await an.messages.countTokens({ model: 'claude-test', messages: [{ role: 'user', content: 'x' }] })).input_tokens).toBeGreaterThan(0);
    expect((await fetch(base, { method: 'HEAD' })).status).toBe(200);
    up.setScript([{ text: 'beta' }]);
    const res = await fetch(`${base}/v1/messages?beta=true`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'claude-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(200);
    seenByClient.push(await res.text());
    expect(up.requests.at(-1)?.url).toBe('/v1/messages?beta=true');
  });

  it('refuses missing, unknown and revoked tokens in the provider format, without touching the upstream', async () => {
    const before = up.requests.length;
    const noKey = await fetch(`${base}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    const wrong = new OpenAI({ apiKey: 'airlock-run-nope', baseURL: `${base}/v1`, maxRetries: 0 });
    await expect(wrong.chat.completions.create({ model: 'm', messages: [] })).rejects.toMatchObject({ status: 401, code: 'invalid_api_key' });
    const grant = run('r-sdk-4');
    const ok = new OpenAI({ apiKey: grant.token, baseURL: `${base}/v1`, maxRetries: 0 });
    await ok.models.list();
    proxy.revokeRun('r-sdk-4');
    await expect(ok.models.list()).rejects.toMatchObject({ status: 401 });
    const disposed = run('r-sdk-5');
    disposed.dispose();
    const after = new Anthropic({ apiKey: disposed.token, baseURL: base, maxRetries: 0 });
    await expect(after.models.list()).rejects.toMatchObject({ status: 401 });
    expect(up.requests.length).toBe(before + 1);
  });

  it('budgets: past maxRequests / maxTokens / maxCostUsd the answer is 429 with a plain budget message', async () => {
    const byRequests = new OpenAI({ apiKey: run('r-b-1', { maxRequests: 1 }).token, baseURL: `${base}/v1`, maxRetries: 0 });
    await byRequests.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] });
    await expect(byRequests.chat.completions.create({ model: 'm', messages: [] })).rejects.toMatchObject({ status: 429, message: expect.stringContaining('made its 1 allowed model calls') });
    // The upstream reports more input than the proxy estimated: the next call is refused.
    up.setScript([{ text: 'big', usage: { input: 800, output: 60 } }]);
    const byTokens = new Anthropic({ apiKey: run('r-b-2', { maxTokens: 1000 }).token, baseURL: base, maxRetries: 0 });
    await byTokens.messages.create({ model: 'claude-test', max_tokens: 300, messages: [{ role: 'user', content: 'x' }] });
    await expect(byTokens.messages.create({ model: 'claude-test', max_tokens: 300, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      status: 429,
      error: { error: { type: 'rate_limit_error', message: expect.stringContaining('used 860 of its 1,000 tokens') } },
    });
    // 'claude-test' costs $1 per token here: even the input estimate is past a $1.50 budget.
    const byCost = new Anthropic({ apiKey: run('r-b-3', { maxCostUsd: 1.5 }).token, baseURL: base, maxRetries: 0 });
    await expect(byCost.messages.create({ model: 'claude-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 429, message: expect.stringContaining('of its $1.50') });
  });

  it('model allow-list: other models are refused with 403', async () => {
    const { token } = proxy.issueToken({ runId: 'r-m-1', providers: ['openai'], models: ['gpt-ok'] });
    const c = new OpenAI({ apiKey: token, baseURL: `${base}/v1`, maxRetries: 0 });
    await c.chat.completions.create({ model: 'gpt-ok', messages: [{ role: 'user', content: 'x' }] });
    await expect(c.chat.completions.create({ model: 'gpt-other', messages: [] })).rejects.toMatchObject({ status: 403 });
    // A run with only an OpenAI provider cannot use the Anthropic routes.
    const an = new Anthropic({ apiKey: token, baseURL: base, maxRetries: 0 });
    await expect(an.messages.create({ model: 'gpt-ok', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({ status: 403 });
  });

  it('upstream errors pass through with the key redacted; unreachable upstream is a 502', async () => {
    const { token } = run('r-e-1');
    up.setScript([{ status: 401, errorBody: { error: { message: `Incorrect API key provided: ${REAL_KEY}. Also ${REAL_KEY.slice(0, 16)}…${REAL_KEY.slice(-12)}`, type: 'invalid_request_error', code: 'invalid_api_key' } } }]);
    const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"model":"m","messages":[]}' });
    const text = await res.text();
    expect(res.status).toBe(401);
    expect(text).toContain('Incorrect API key provided: [REDACTED]');
    seenByClient.push(text);

    const dead = await startFakeUpstream();
    const deadUrl = dead.url;
    await dead.close();
    const p2 = new ModelProxy({
      resolveUpstream: async () => ({ config: { id: 'openai', label: 'OpenAI', kind: 'openai', baseUrl: `${deadUrl}/v1`, requiresKey: true, builtin: true, models: [] }, key: new Secret(REAL_KEY) }),
    });
    const { port } = await p2.start();
    const t = p2.issueToken({ runId: 'r-e-2', providers: ['openai'] });
    const r2 = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${t.token}` }, body: '{"model":"m"}' });
    expect(r2.status).toBe(502);
    const body2 = await r2.text();
    expect(body2).toContain('could not reach openai');
    seenByClient.push(body2);
    await p2.stop();
  });

  it('SSE flows chunk by chunk: the first event arrives while the upstream is still sending', async () => {
    const { token } = run('r-s-1');
    up.setScript([{ text: 'a slow streamed answer', eventDelayMs: 150 }]);
    const startedAt = Date.now();
    const res = await fetch(`${base}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-test', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    expect(res.headers.get('content-encoding')).toBeNull();
    const reader = res.body!.getReader();
    const first = await reader.read();
    const firstAt = Date.now();
    expect(new TextDecoder().decode(first.value)).toContain('message_start');
    let rest = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    const endAt = Date.now();
    expect(rest).toContain('message_stop');
    // Ordering, not a timing threshold: ~10 events 150 ms apart, the first must come well before the last.
    expect(endAt - firstAt).toBeGreaterThan((endAt - startedAt) / 2);
  });

  it('a client that disconnects mid-stream aborts the upstream request', async () => {
    const { token } = run('r-s-2');
    up.setScript([{ text: 'this answer is long and slow', eventDelayMs: 200 }]);
    const before = up.requests.length;
    await new Promise<void>((resolve, reject) => {
      const req = http.request(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
      req.on('response', (res) => {
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (e) => ((e as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(e)));
      req.end(JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'x' }] }));
    });
    const rec = up.requests[before]!;
    await expect.poll(() => rec.aborted, { timeout: 10_000 }).toBe(true);
    await expect.poll(() => events.some((e) => e.runId === 'r-s-2' && e.aborted === true), { timeout: 5_000 }).toBe(true);
  });
  it('a keyless OpenAI-compatible provider (Ollama-style) gets no credential at all; transcripts only when on', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-proxy-'));
    const local = await startFakeUpstream();
    try {
      const catalog = new ProviderCatalog({ home });
      await catalog.add({ id: 'ollama', baseUrl: `${local.url}/v1`, requiresKey: false });
      // A vault whose keychain is never touched: keyless providers need no key lookup to succeed.
      const vault = new KeyVault(catalog, { backend: { probe: async () => undefined, get: async () => undefined, set: async () => undefined, delete: async () => false } });
      const p = new ModelProxy({ resolveUpstream: vaultResolver(catalog, vault), transcripts: true });
      const seen: ModelCallEvent[] = [];
      p.onDidCall((e) => seen.push(e));
      const { port } = await p.start();
      const { token } = p.issueToken({ runId: 'r-local', providers: ['ollama'] });
      local.setScript([{ text: 'local answer' }]);
      const c = new OpenAI({ apiKey: token, baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0 });
      const r = await c.chat.completions.create({ model: 'llama3', messages: [{ role: 'user', content: 'secret prompt text' }] });
      expect(r.choices[0]?.message.content).toBe('local answer');
      const h = local.requests.at(-1)!.headers;
      expect(h.authorization).toBeUndefined();
      expect(h['x-api-key']).toBeUndefined();
      expect(JSON.stringify(h)).not.toContain(token);
      expect(seen[0]).toMatchObject({ provider: 'ollama', model: 'llama3', status: 200 });
      expect(JSON.stringify(seen[0]?.request)).toContain('secret prompt text');
      // Turned off in Settings: the next call's prompt is not kept (ModelProxy.setTranscripts).
      p.setTranscripts(false);
      local.setScript([{ text: 'second answer' }]);
      await c.chat.completions.create({ model: 'llama3', messages: [{ role: 'user', content: 'second secret prompt' }] });
      await expect.poll(() => seen.length).toBe(2);
      expect(seen[1]).toMatchObject({ provider: 'ollama', status: 200 });
      expect(seen[1]?.request).toBeUndefined();
      expect(JSON.stringify(seen)).not.toContain('second secret prompt');
      await p.stop();
      // And with transcripts off (the default, as in the other tests here), no prompt in events.
      expect(JSON.stringify(events)).not.toContain('"messages"');
    } finally {
      await local.close();
      await rm(home, { recursive: true, force: true });
    }
  });
  it('an upstream that dies mid-stream cuts the client off (no truncated answer passed off as complete)', async () => {
    const { token } = run('r-s-3');
    up.setScript([{ text: 'this answer will never finish', dropAfterEvents: 3, eventDelayMs: 30 }]);
    const res = await fetch(`${base}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': token, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ model: 'claude-test', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(res.status).toBe(200);
    // A clean end here would look like a finished (if short) answer; the body must fail instead.
    await expect(res.text()).rejects.toThrow();
    const client = new Anthropic({ apiKey: token, baseURL: base, maxRetries: 0 });
    // The proxy is still fine afterwards.
    up.setScript([{ text: 'fine again' }]);
    const ok = await client.messages.create({ model: 'claude-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
    expect(ok.content[0]).toMatchObject({ text: 'fine again' });
  });
  it('a stream that outlasts the request timeout keeps flowing (timeouts bound receiving requests, not answers)', async () => {
    const p = new ModelProxy({
      resolveUpstream: async () => ({ config: providers(up).anthropic as ProviderConfig, key: new Secret(REAL_KEY) }),
      requestTimeoutMs: 400,
    });
    const { port } = await p.start();
    const { token } = p.issueToken({ runId: 'r-long', providers: ['anthropic'] });
    // ~12 events 150 ms apart: about 1.8 s, several times the request timeout.
    up.setScript([{ text: 'a long and patient streamed answer', eventDelayMs: 150 }]);
    const client = new Anthropic({ apiKey: token, baseURL: `http://127.0.0.1:${port}`, maxRetries: 0 });
    const final = await client.messages.stream({ model: 'claude-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).finalMessage();
    expect(final.content[0]).toMatchObject({ text: 'a long and patient streamed answer' });
    // While a client that never finishes its request is cut off.
    const slow = await new Promise<string>((resolve) => {
      const s = connect(port, '127.0.0.1', () => s.write(`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\r\ncontent-length: 100\r\n\r\n{`));
      let got = '';
      s.on('data', (c) => (got += c.toString()));
      s.on('close', () => resolve(got));
      s.on('error', () => undefined);
    });
    expect(slow).toMatch(/^HTTP\/1\.1 408/);
    await p.stop();
  });
});
