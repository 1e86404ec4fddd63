import http from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';

// The fixture itself must speak formats the official SDKs accept, or every proxy test proves nothing.
describe('fake upstream speaks the real wire formats', () => {
  let up: FakeUpstream;
  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: 'sk-fixture-key' });
  });
  afterAll(async () => {
    await up.close();
  });

  const anthropic = () => new Anthropic({ apiKey: 'sk-fixture-key', baseURL: up.url, maxRetries: 0 });
  const openai = () => new OpenAI({ apiKey: 'sk-fixture-key', baseURL: `${up.url}/v1`, maxRetries: 0 });

  it('Anthropic messages, JSON and streamed, with tool use', async () => {
    up.setScript([
      { text: 'Hello there', usage: { input: 11, output: 7 } },
      { text: 'Let me look.', toolCalls: [{ id: 'toolu_1', name: 'read_file', input: { path: 'a.txt' } }], usage: { input: 20, output: 9 } },
    ]);
    const msg = await anthropic().messages.create({ model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    expect(msg.content[0]).toMatchObject({ type: 'text', text: 'Hello there' });
    expect(msg.usage).toMatchObject({ input_tokens: 11, output_tokens: 7 });

    const stream = anthropic().messages.stream({ model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] });
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe('tool_use');
    expect(final.content).toEqual([
      { type: 'text', text: 'Let me look.', citations: null },
      { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { path: 'a.txt' } },
    ].map((b) => (b.type === 'text' ? expect.objectContaining({ type: 'text', text: 'Let me look.' }) : b)));
    expect(final.usage.output_tokens).toBe(9);
    const h = up.requests.at(-1)?.headers ?? {};
    expect([h['x-api-key'], h.authorization]).toContain(h['x-api-key'] ? 'sk-fixture-key' : 'Bearer sk-fixture-key');
  });

  it('repeats a final text turn when the script runs out', async () => {
    up.setScript([{ toolCalls: [{ name: 't', input: {} }] }, { text: 'All done' }]);
    const c = anthropic();
    const ask = () => c.messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] });
    expect((await ask()).stop_reason).toBe('tool_use');
    expect((await ask()).content[0]).toMatchObject({ text: 'All done' });
    expect((await ask()).content[0]).toMatchObject({ text: 'All done' });
  });

  it('OpenAI chat completions, JSON and streamed with tool_calls and usage', async () => {
    up.setScript([
      { text: 'plain answer', usage: { input: 5, output: 3 } },
      { toolCalls: [{ id: 'call_1', name: 'run', input: { cmd: 'ls -la' } }], usage: { input: 6, output: 4 } },
    ]);
    const res = await openai().chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }] });
    expect(res.choices[0]?.message.content).toBe('plain answer');
    expect(res.usage?.total_tokens).toBe(8);

    const stream = openai().chat.completions.stream({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } });
    const done = await stream.finalChatCompletion();
    expect(done.choices[0]?.message.tool_calls?.[0]).toMatchObject({ id: 'call_1', function: { name: 'run', arguments: '{"cmd":"ls -la"}' } });
    expect(done.usage).toMatchObject({ prompt_tokens: 6, completion_tokens: 4 });
  });

  it('OpenAI responses, JSON and streamed, with a function call', async () => {
    up.setScript([
      { text: 'resp text', usage: { input: 3, output: 2 } },
      { text: 'calling', toolCalls: [{ id: 'call_9', name: 'shell', input: { cmd: 'pwd' } }], usage: { input: 4, output: 5 } },
    ]);
    const r = await openai().responses.create({ model: 'gpt-x', input: 'hi' });
    expect(r.output_text).toBe('resp text');
    const stream = openai().responses.stream({ model: 'gpt-x', input: 'hi' });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(deltas.join('')).toBe('calling');
    expect(final.output.find((o) => o.type === 'function_call')).toMatchObject({ call_id: 'call_9', name: 'shell', arguments: '{"cmd":"pwd"}' });
    expect(final.usage?.output_tokens).toBe(5);
  });

  it('embeddings, models, count_tokens, HEAD /, 401 and scripted errors', async () => {
    const emb = await openai().embeddings.create({ model: 'text-embedding-3-small', input: ['a', 'b'] });
    expect(emb.data).toHaveLength(2);
    expect(emb.data[0]?.embedding).toHaveLength(8);
    expect((await openai().models.list()).data.length).toBeGreaterThan(0);
    expect((await anthropic().models.list()).data.length).toBeGreaterThan(0);
    const count = await anthropic().messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'hello' }] });
    expect(count.input_tokens).toBeGreaterThan(0);
    expect((await fetch(up.url, { method: 'HEAD' })).status).toBe(200);
    const bad = new Anthropic({ apiKey: 'wrong', baseURL: up.url, maxRetries: 0 });
    await expect(bad.models.list()).rejects.toMatchObject({ status: 401 });
    up.setScript([{ status: 429 }]);
    await expect(openai().models.list()).rejects.toMatchObject({ status: 429 });
    const refused = await new Promise<number | undefined>((resolve, reject) => {
      const req = http.get(`${up.url}/v1/responses`, { headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' } });
      req.on('response', (res) => { res.resume(); resolve(res.statusCode); });
      req.on('upgrade', () => resolve(101));
      req.on('error', reject);
    });
    expect(refused).toBe(426);
  });
});
