/**
 * The run MCP gateway's cost (docs/architecture.md §8, §20): `mcp.gateway.call` is one `tools/call` of
 * a small tool made by the official SDK client through a run's gateway (token check, the per-tool policy,
 * forwarding over the gateway's own SDK client with the credential, scrubbing, the cap, the call
 * event), against the same call made directly to the server by the same kind of client. Samples are
 * interleaved so load drift on a shared machine hits both sides alike. The server is a real SDK server
 * on loopback that requires a bearer token. The channel's forwarding, which the sandbox's calls also
 * cross, is measured on its own by the proxy and channel rows.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Secret } from '../core/keys/secret';
import type { McpServerEntry } from '../core/network/mcp-gateway/mcp-server-registry';
import { createMcpRunPolicy } from '../core/network/mcp-gateway/mcp-tool-policy';
import { GATEWAY_PATH, listServerTools, openRunMcpGateway } from '../core/network/mcp-gateway/run-mcp-gateway';
import { MCP_CANARY, startLoopbackMcpServer } from '../test/support/mcp-upstream';
import { percentile, withRatio, type Benchmark } from './harness';

const SAMPLES = Number(process.env.AIRLOCK_BENCH_MCP_CALLS ?? 400);
const p50 = (xs: number[]) => percentile(xs, 50);

async function client(url: string, token: string): Promise<Client> {
  const c = new Client({ name: 'airlock-bench', version: '1' });
  await c.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return c;
}

/** A bare HTTP echo on loopback: what one extra hop costs on this machine right now (the gateway is one). */
async function bareHop(): Promise<{ call(): Promise<unknown>; close(): void }> {
  const server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(Buffer.concat(parts)));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return { call: async () => (await fetch(url, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } })).text(), close: () => server.close() };
}

const gatewayCall: Benchmark = {
  name: 'mcp.gateway.call',
  async run() {
    const upstream = await startLoopbackMcpServer();
    // A run's real path: the per-tool policy, with echo allowed and its description pinned (no question).
    const bare: McpServerEntry = { name: 'demo', url: upstream.url, transport: 'http', auth: { type: 'bearer' }, addedAt: new Date().toISOString(), policy: { echo: 'allow' } };
    const { tools } = await listServerTools({ entry: bare, credential: new Secret(MCP_CANARY) });
    const entry: McpServerEntry = { ...bare, pins: Object.fromEntries(tools.map((t) => [t.tool, t.descriptionHash])) };
    const { policy, hide, approvals } = createMcpRunPolicy({ entries: [entry], mode: 'ask' });
    const gateway = await openRunMcpGateway({ runId: 'bench', servers: [{ entry, credential: new Secret(MCP_CANARY) }], policy, hide, questions: approvals });
    const direct = await client(upstream.url, MCP_CANARY);
    const through = await client(`http://127.0.0.1:${gateway.port}${GATEWAY_PATH}`, gateway.token);
    const args = { text: 'x'.repeat(200) };
    const viaDirect = () => direct.callTool({ name: 'echo', arguments: args });
    const viaGateway = () => through.callTool({ name: 'demo__echo', arguments: args });
    const hop = await bareHop();
    try {
      for (let i = 0; i < 50; i++) {
        await viaDirect();
        await viaGateway();
      }
      const d: number[] = [];
      const g: number[] = [];
      const h: number[] = [];
      for (let i = 0; i < SAMPLES; i++) {
        for (const [fn, out] of (i % 2 ? [[viaDirect, d], [viaGateway, g], [hop.call, h]] : [[viaGateway, g], [hop.call, h], [viaDirect, d]]) as Array<[() => Promise<unknown>, number[]]>) {
          const t0 = performance.now();
          await fn();
          out.push(performance.now() - t0);
        }
      }
      const added = p50(g) - p50(d);
      return [
        withRatio({ name: 'mcp.gateway.call', value: p50(g), unit: 'ms', baseline: p50(d), budget: '+≤ 2 ms', note: `p50 of ${SAMPLES} tools/call (200-byte argument) through a run's gateway vs the same call direct to the server (SDK clients, bearer server on loopback); p90 ${percentile(g, 90).toFixed(2)} vs ${percentile(d, 90).toFixed(2)} ms` }),
        { name: 'mcp.gateway.call.added', value: added, unit: 'ms', budget: '≤ 2 ms', note: 'p50 through the gateway minus p50 direct' },
        withRatio({ name: 'mcp.gateway.call.added.vs_hop', value: added, unit: 'ms', baseline: p50(h), note: 'the added latency against one bare loopback HTTP round trip (fetch → node:http echo) measured interleaved: the floor of any gateway that is a hop' }),
      ];
    } finally {
      await through.close().catch(() => undefined);
      await direct.close().catch(() => undefined);
      gateway.dispose();
      hop.close();
      await upstream.close();
    }
  },
};

/**
 * `mcp.gateway.call.stdio`: the same kind of call to a local (stdio) server in its sidecar (§20) —
 * `@modelcontextprotocol/server-everything`'s echo, fetched on the host and run in Airlock's image
 * with no network — through the run's gateway (HTTP, policy, the gateway's SDK client over the
 * engine's exec stream), against the same call made directly over a second exec stream into the same
 * sidecar (a second process of the same server program), by the same kind of SDK client.
 */
const stdioCall: Benchmark = {
  name: 'mcp.gateway.call.stdio',
  requires: ['docker'],
  async run() {
    const [{ mkdtemp, rm }, os, path, { randomBytes }, { testEngine, sandboxImage }, { engineIdentity }, sidecar, { parseStdioCommand }] = await Promise.all([
      import('node:fs/promises'),
      import('node:os'),
      import('node:path'),
      import('node:crypto'),
      import('../test/integration/sandbox-support'),
      import('../core/sandbox/docker/engine'),
      import('../core/network/mcp-gateway/stdio-sidecar'),
      import('../core/network/mcp-gateway/stdio-command'),
    ]);
    const { ExecDemuxer } = await import('../core/sandbox/docker/exec-demux');
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-mcp-stdio-'));
    const engine = await testEngine();
    const image = await sandboxImage(engine);
    const runId = `bench-${randomBytes(4).toString('hex')}`;
    const spec = '@modelcontextprotocol/server-everything@2026.8.31';
    const host = { docker: engine.docker, engine: (await engineIdentity(engine)).kind, airlockImage: () => Promise.resolve(image), packageCache: path.join(home, 'mcp-packages') };
    const entry: McpServerEntry = { name: 'everything', transport: 'stdio', stdio: parseStdioCommand(['npx', '-y', spec, 'stdio']), auth: { type: 'none' }, addedAt: new Date().toISOString(), policy: { echo: 'allow' } };
    const { tools } = await listServerTools({ entry }, (s) => sidecar.openStdioSidecar(host, `${runId}-pin`, s));
    const pinned: McpServerEntry = { ...entry, pins: Object.fromEntries(tools.map((t) => [t.tool, t.descriptionHash])) };
    const { policy, hide, approvals } = createMcpRunPolicy({ entries: [pinned], mode: 'ask' });
    const gateway = await openRunMcpGateway({ runId, servers: [{ entry: pinned }], policy, hide, questions: approvals, stdio: (s) => sidecar.openStdioSidecar(host, runId, s) });
    // The direct side: a second process of the same program, in the same sidecar, over its own exec stream.
    const command = await sidecar.packageCommand(await sidecar.fetchPackage(host, spec), spec, ['stdio']);
    const exec = await engine.docker.getContainer(sidecar.mcpSidecarName(runId, 'everything')).exec({ Cmd: command, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false, User: '65534:65534', WorkingDir: '/tmp' });
    const stream = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
    const out = new ExecDemuxer(stream as unknown as NodeJS.ReadableStream & { pause(): unknown; resume(): unknown }, () => undefined);
    const direct = new Client({ name: 'airlock-bench', version: '1' });
    await direct.connect(new sidecar.EngineStdioTransport(stream, out.stdout));
    const through = await client(`http://127.0.0.1:${gateway.port}${GATEWAY_PATH}`, gateway.token);
    const args = { message: 'x'.repeat(200) };
    const viaDirect = () => direct.callTool({ name: 'echo', arguments: args });
    const viaGateway = () => through.callTool({ name: 'everything__echo', arguments: args });
    const samples = Math.min(SAMPLES, 200);
    try {
      for (let i = 0; i < 30; i++) {
        await viaDirect();
        await viaGateway();
      }
      const d: number[] = [];
      const g: number[] = [];
      for (let i = 0; i < samples; i++) {
        for (const [fn, outv] of (i % 2 ? [[viaDirect, d], [viaGateway, g]] : [[viaGateway, g], [viaDirect, d]]) as Array<[() => Promise<unknown>, number[]]>) {
          const t0 = performance.now();
          await fn();
          outv.push(performance.now() - t0);
        }
      }
      return [
        withRatio({ name: 'mcp.gateway.call.stdio', value: p50(g), unit: 'ms', baseline: p50(d), note: `p50 of ${samples} tools/call (echo, 200 bytes) to server-everything in its sidecar through the run's gateway vs the same call direct over an exec stream into the same sidecar; p90 ${percentile(g, 90).toFixed(2)} vs ${percentile(d, 90).toFixed(2)} ms` }),
        { name: 'mcp.gateway.call.stdio.added', value: p50(g) - p50(d), unit: 'ms', note: 'p50 through the gateway minus p50 direct (stdio sidecar)' },
      ];
    } finally {
      await through.close().catch(() => undefined);
      await direct.close().catch(() => undefined);
      gateway.dispose();
      await engine.docker.getContainer(sidecar.mcpSidecarName(runId, 'everything')).remove({ force: true }).catch(() => undefined);
      await rm(home, { recursive: true, force: true });
    }
  },
};

export const benchmarks: Benchmark[] = [gatewayCall, stdioCall];
