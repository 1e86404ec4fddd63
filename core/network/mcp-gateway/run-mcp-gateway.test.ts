import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MCP_CANARY, startLoopbackMcpServer, type LoopbackMcpServer } from '../../../test/support/mcp-upstream';
import { Secret } from '../../keys/secret';
import type { ResolvedMcpServer } from './mcp-server-registry';
import { GATEWAY_PATH, MAX_RESULT_BYTES, openRunMcpGateway, SCRUBBED, type McpCallEvent, type RunMcpGateway } from './run-mcp-gateway';

/**
 * The run gateway between real SDK parts: a real MCP server on loopback that answers only with the
 * bearer canary, the gateway's SDK client toward it, and an SDK client in the sandbox's place.
 */
function demo(upstream: LoopbackMcpServer, token = MCP_CANARY): ResolvedMcpServer {
  return { entry: { name: 'demo', url: upstream.url, transport: 'http', auth: { type: 'bearer' }, addedAt: new Date().toISOString() }, credential: new Secret(token) };
}

async function sandboxClient(gw: RunMcpGateway, token = gw.token): Promise<Client> {
  const client = new Client({ name: 'sandbox', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${gw.port}${GATEWAY_PATH}`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return client;
}

describe('run MCP gateway (real SDK server on loopback, real SDK clients)', () => {
  let upstream: LoopbackMcpServer;
  let gw: RunMcpGateway;
  const events: McpCallEvent[] = [];
  beforeAll(async () => {
    upstream = await startLoopbackMcpServer();
    gw = await openRunMcpGateway({ runId: 'run-test', servers: [demo(upstream)] });
    gw.onDidCall((e) => events.push(e));
  });
  afterAll(async () => {
    gw?.dispose();
    await upstream?.close();
  });

  it('serves the server tools under its prefix and forwards a call with the credential', async () => {
    const client = await sandboxClient(gw);
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['demo__big', 'demo__delete_item', 'demo__echo', 'demo__fetch_page', 'demo__whoami']);
    expect(tools.find((t) => t.name === 'demo__echo')?.annotations).toEqual({ readOnlyHint: true });
    const res = await client.callTool({ name: 'demo__echo', arguments: { text: 'hi there' } });
    expect(res.content).toEqual([{ type: 'text', text: 'echo: hi there' }]);
    expect(upstream.calls.at(-1)).toEqual({ tool: 'echo', args: { text: 'hi there' }, authorization: `Bearer ${MCP_CANARY}` });
    expect(gw.record.servers).toEqual([{ name: 'demo', origin: new URL(upstream.url).origin, transport: 'http', tools: 5 }]);
    const e = events.at(-1);
    expect(e).toMatchObject({ server: 'demo', tool: 'echo', decision: 'allow', isError: false });
    expect(e?.argsSha256).toMatch(/^[0-9a-f]{64}$/);
    expect(e?.resultBytes).toBeGreaterThan(0);
    await client.close();
  });

  it('scrubs the credential from an answer that echoes it (text and structured content)', async () => {
    const client = await sandboxClient(gw);
    const res = await client.callTool({ name: 'demo__whoami', arguments: {} });
    const text = JSON.stringify(res);
    expect(upstream.calls.at(-1)?.authorization).toBe(`Bearer ${MCP_CANARY}`);
    expect(text).not.toContain(MCP_CANARY);
    expect(text).toContain(`Bearer ${SCRUBBED}`);
    // Encoded forms too: base64 of the token does not pass either.
    expect(text).not.toContain(Buffer.from(MCP_CANARY).toString('base64').slice(4, 30));
    await client.close();
  });

  it('caps an answer over the limit as a tool error, and says so in the call event', async () => {
    const client = await sandboxClient(gw);
    const res = await client.callTool({ name: 'demo__big', arguments: {} });
    expect(res.isError).toBe(true);
    expect(JSON.stringify(res.content)).toContain(`cap of ${MAX_RESULT_BYTES} bytes`);
    expect(events.at(-1)).toMatchObject({ tool: 'big', capped: true, isError: true });
    await client.close();
  });

  it('refuses a client without the run token, with a wrong one, and from a web page', async () => {
    await expect(sandboxClient(gw, 'airlock-run-wrong')).rejects.toThrow(/401|Unauthorized/);
    const noToken = await fetch(`http://127.0.0.1:${gw.port}${GATEWAY_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(noToken.status).toBe(401);
    const page = await fetch(`http://127.0.0.1:${gw.port}${GATEWAY_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', origin: 'http://evil.test', authorization: `Bearer ${gw.token}` }, body: '{}' });
    expect(page.status).toBe(403);
  });

  it('a policy deny reaches the client as a tool error and is never forwarded', async () => {
    const denied = await openRunMcpGateway({ runId: 'run-deny', servers: [demo(upstream)], policy: async (t) => (t.tool === 'delete_item' ? { decision: 'deny', reason: 'destructive' } : { decision: 'allow' }) });
    const seen: McpCallEvent[] = [];
    denied.onDidCall((e) => seen.push(e));
    try {
      const client = await sandboxClient(denied);
      const before = upstream.calls.length;
      const res = await client.callTool({ name: 'demo__delete_item', arguments: { id: '7' } });
      expect(res.isError).toBe(true);
      expect(JSON.stringify(res.content)).toContain('Airlock refused this call to demo/delete_item: destructive');
      expect(upstream.calls.length).toBe(before);
      expect(seen).toMatchObject([{ tool: 'delete_item', decision: 'deny', reason: 'destructive', isError: true }]);
      await client.close();
    } finally {
      denied.dispose();
    }
  });

  it('a server that refuses the credential fails the gateway with a scrubbed, actionable error', async () => {
    await expect(openRunMcpGateway({ runId: 'run-bad', servers: [demo(upstream, 'not-the-token-1234')] })).rejects.toThrow(/MCP server "demo" .* could not be reached: .*airlock mcp-servers list/);
  });

  it('the token dies with the gateway', async () => {
    const once = await openRunMcpGateway({ runId: 'run-once', servers: [demo(upstream)] });
    const client = await sandboxClient(once);
    await client.close();
    once.dispose();
    await expect(fetch(`http://127.0.0.1:${once.port}${GATEWAY_PATH}`, { method: 'POST', headers: { authorization: `Bearer ${once.token}` }, body: '{}' })).rejects.toThrow();
  });
});
