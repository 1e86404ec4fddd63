/**
 * Model proxy benchmarks (docs/architecture.md §8: ≤ 0.3 ms added p50, and to first streamed byte).
 * The proxy runs in its own process (this file, started as a child) so its RSS is its own and it
 * does not share an event loop with the load generator; the fake upstream runs here.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';

const CHILD_FLAG = 'AIRLOCK_PROXY_BENCH_UPSTREAM';

/** Child mode: a proxy toward the given upstream; prints `port token`, answers `rss` with peak RSS. */
async function childMain(upstream: string): Promise<void> {
  const { ModelProxy } = await import('../core/proxy/model-proxy');
  const { Secret } = await import('../core/keys/secret');
  const proxy = new ModelProxy({
    resolveUpstream: async (id) => ({
      config: id === 'anthropic'
        ? { id, label: 'A', kind: 'anthropic', baseUrl: upstream, requiresKey: true, builtin: true, models: [] }
        : { id, label: 'O', kind: 'openai', baseUrl: `${upstream}/v1`, requiresKey: true, builtin: true, models: [] },
      key: new Secret('sk-bench-key-0123456789abcdef'),
    }),
  });
  const { port } = await proxy.start();
  const { token } = proxy.issueToken({ runId: 'bench', providers: ['anthropic', 'openai'] });
  let peak = process.memoryUsage().rss;
  setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20).unref();
  process.stdout.write(`${port} ${token}\n`);
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'rss') process.stdout.write(`${Math.max(peak, process.memoryUsage().rss)}\n`);
    if (line === 'reset') {
      peak = process.memoryUsage().rss;
      process.stdout.write('ok\n');
    }
  }
  await proxy.stop();
  process.exit(0);
}

if (process.env[CHILD_FLAG]) void childMain(process.env[CHILD_FLAG]);

interface ChildProxy {
  port: number;
  token: string;
  ask(cmd: string): Promise<string>;
  stop(): void;
}

async function startChildProxy(upstream: string): Promise<ChildProxy> {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, [CHILD_FLAG]: upstream },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  const queue: ((l: string) => void)[] = [];
  lines.on('line', (l) => queue.shift()?.(l));
  const next = () => new Promise<string>((resolve) => queue.push(resolve));
  const [port, token] = (await next()).split(' ');
  return {
    port: Number(port),
    token: token ?? '',
    ask: (cmd) => {
      const p = next();
      child.stdin!.write(`${cmd}\n`);
      return p;
    },
    stop: () => child.stdin!.end(),
  };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

/** One POST; resolves with [ms to first body byte, ms to end]. */
function call(base: string, path: string, body: string, headers: Record<string, string>): Promise<[number, number, number]> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(`${base}${path}`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers } });
    req.on('response', (res) => {
      let first = 0;
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        if (!first) first = performance.now() - t0;
        bytes += c.length;
      });
      res.on('end', () => resolve([first, performance.now() - t0, bytes]));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The reference point of docs/architecture.md §8: the least a Node HTTP pass-through can do (no auth, no metering). */
async function startBarePassThrough(upstream: string): Promise<{ url: string; close(): Promise<void> }> {
  const target = new URL(upstream);
  const server = http.createServer((req, res) => {
    const out = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers, agent }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    req.pipe(out);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => { server.closeAllConnections(); server.close(() => r()); }) };
}

export const benchmarks: Benchmark[] = [
  {
    name: 'proxy',
    async run(): Promise<BenchResult[]> {
      const { startFakeUpstream } = await import('../test/fixtures/fake-upstream');
      const { ModelProxy } = await import('../core/proxy/model-proxy');
      const { Secret } = await import('../core/keys/secret');
      const up = await startFakeUpstream();
      const bare = await startBarePassThrough(up.url);
      // Latency: proxy in this process, like the bare pass-through reference (no cross-process scheduling noise).
      const local = new ModelProxy({
        resolveUpstream: async (id) => ({ config: { id, label: 'A', kind: 'anthropic', baseUrl: up.url, requiresKey: true, builtin: true, models: [] }, key: new Secret('sk-bench-key-0123456789abcdef') }),
      });
      const localPort = (await local.start()).port;
      const localToken = local.issueToken({ runId: 'bench', providers: ['anthropic'] }).token;
      const proxied = `http://127.0.0.1:${localPort}`;
      const auth = { 'x-api-key': localToken, 'anthropic-version': '2023-06-01' };
      const json = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'x'.repeat(2000) }] });
      const streamBody = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hello' }] });
      const results: BenchResult[] = [];
      let child: ChildProxy | undefined;
      try {
        up.setScript([]);
        // Interleave direct, bare and proxied calls so drift on a shared machine hits all alike.
        const direct: number[] = [];
        const via: number[] = [];
        const viaBare: number[] = [];
        const firstDirect: number[] = [];
        const firstVia: number[] = [];
        for (let i = 0; i < 300; i++) {
          await call(up.url, '/v1/messages', json, auth);
          await call(bare.url, '/v1/messages', json, auth);
          await call(proxied, '/v1/messages', json, auth);
        }
        for (let i = 0; i < 2000; i++) {
          direct.push((await call(up.url, '/v1/messages', json, auth))[1]);
          viaBare.push((await call(bare.url, '/v1/messages', json, auth))[1]);
          via.push((await call(proxied, '/v1/messages', json, auth))[1]);
        }
        for (let i = 0; i < 1000; i++) {
          firstDirect.push((await call(up.url, '/v1/messages', streamBody, auth))[0]);
          firstVia.push((await call(proxied, '/v1/messages', streamBody, auth))[0]);
        }
        // Side doors stripped on every call (as for Codex's hosted web_search): the body is re-serialised.
        const clientTools = Array.from({ length: 12 }, (_, i) => ({ name: `tool_${i}`, description: 'd'.repeat(400), input_schema: { type: 'object', properties: { a: { type: 'string' } } } }));
        const conversation = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i} `.repeat(120) }));
        const doorsBody = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: conversation, tools: [...clientTools, { type: 'web_search_20250305', name: 'web_search' }], mcp_servers: [{ type: 'url', url: 'https://mcp.invalid', name: 'x' }] });
        // The same conversation without tools: what a 44 KB body costs the proxy anyway.
        const plainBody = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: conversation });
        // A Claude Code-shaped conversation (content blocks: text, tool_use, tool_result) whose last turn
        // carries a URL image: the content walk reads every block, replaces the image, and the
        // conversation goes out serialised from the parse (url-content.ts).
        const blocks: Array<{ role: string; content: unknown[] }> = Array.from({ length: 60 }, (_, i) =>
          i % 2
            ? { role: 'assistant', content: [{ type: 'text', text: `step ${i} `.repeat(30) }, { type: 'tool_use', id: `toolu_${i}`, name: 'Bash', input: { command: 'ls -la src', description: 'list' } }] }
            : { role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${i - 1}`, content: [{ type: 'text', text: `out ${i}\n`.repeat(50) }] }] });
        blocks.push({ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.invalid/x.png' } }] });
        const urlBody = JSON.stringify({ model: 'claude-sonnet-4-5', max_tokens: 64, messages: blocks, tools: clientTools });
        const urlDirect: number[] = [];
        const urlVia: number[] = [];
        const doorsDirect: number[] = [];
        const doorsVia: number[] = [];
        const plainDirect: number[] = [];
        const plainVia: number[] = [];
        for (let i = 0; i < 1000; i++) {
          doorsDirect.push((await call(up.url, '/v1/messages', doorsBody, auth))[1]);
          doorsVia.push((await call(proxied, '/v1/messages', doorsBody, auth))[1]);
          plainDirect.push((await call(up.url, '/v1/messages', plainBody, auth))[1]);
          plainVia.push((await call(proxied, '/v1/messages', plainBody, auth))[1]);
          urlDirect.push((await call(up.url, '/v1/messages', urlBody, auth))[1]);
          urlVia.push((await call(proxied, '/v1/messages', urlBody, auth))[1]);
        }
        const d50 = percentile(direct, 50);
        const d95 = percentile(direct, 95);
        const v50 = percentile(via, 50);
        const v95 = percentile(via, 95);
        const b50 = percentile(viaBare, 50);
        results.push(
          { name: 'proxy.overhead.p50', value: v50 - d50, unit: 'ms added', budget: '≤ 0.3 ms', note: `non-streaming Messages call: ${v50.toFixed(3)} ms via proxy vs ${d50.toFixed(3)} ms direct (n=2000)` },
          { name: 'proxy.overhead.p95', value: v95 - d95, unit: 'ms added', note: `${v95.toFixed(3)} ms via proxy vs ${d95.toFixed(3)} ms direct` },
          { name: 'proxy.overhead.bare_passthrough_p50', value: b50 - d50, unit: 'ms added', note: 'reference: a bare Node http pass-through, same run' },
          { name: 'proxy.overhead.side_doors_p50', value: percentile(doorsVia, 50) - percentile(doorsDirect, 50), unit: 'ms added', budget: '≤ 0.3 ms', note: `${(Buffer.byteLength(doorsBody) / 1024).toFixed(0)} KB Messages call with a server tool and mcp_servers stripped: ${percentile(doorsVia, 50).toFixed(3)} ms via proxy vs ${percentile(doorsDirect, 50).toFixed(3)} ms direct (n=1000)` },
          { name: 'proxy.overhead.large_body_p50', value: percentile(plainVia, 50) - percentile(plainDirect, 50), unit: 'ms added', note: `reference for the row above: the same conversation without tools (${(Buffer.byteLength(plainBody) / 1024).toFixed(0)} KB), nothing to strip (n=1000)` },
          { name: 'proxy.overhead.url_content_p50', value: percentile(urlVia, 50) - percentile(urlDirect, 50), unit: 'ms added', note: `reported: ${(Buffer.byteLength(urlBody) / 1024).toFixed(0)} KB Claude Code-shaped conversation (${blocks.length} turns of content blocks) with a URL image replaced: the content walk reads it all and the conversation is serialised (n=1000)` },
          { name: 'proxy.ttfb.p50', value: percentile(firstVia, 50) - percentile(firstDirect, 50), unit: 'ms added', budget: '≤ 0.3 ms', note: `first streamed byte: ${percentile(firstVia, 50).toFixed(3)} ms via proxy vs ${percentile(firstDirect, 50).toFixed(3)} ms direct (n=1000)` },
        );

        // Concurrency: the proxy in its own process (its RSS is its own); 200 streams at once.
        child = await startChildProxy(up.url);
        const childUrl = `http://127.0.0.1:${child.port}`;
        const childAuth = { 'x-api-key': child.token, 'anthropic-version': '2023-06-01' };
        for (let i = 0; i < 20; i++) await call(childUrl, '/v1/messages', streamBody, childAuth);
        await child.ask('reset');
        const idleRss = Number(await child.ask('rss'));
        const text = 'streamed token '.repeat(40);
        up.setScript(Array.from({ length: 400 }, () => ({ text, eventDelayMs: 5 })));
        const td0 = performance.now();
        await Promise.all(Array.from({ length: 200 }, () => call(up.url, '/v1/messages', streamBody, childAuth)));
        const wallDirect = performance.now() - td0;
        const t0 = performance.now();
        const all = await Promise.all(Array.from({ length: 200 }, () => call(childUrl, '/v1/messages', streamBody, childAuth)));
        const wall = performance.now() - t0;
        const peakRss = Number(await child.ask('rss'));
        const bytes = all.reduce((n, r) => n + r[2], 0);
        results.push(
          withRatio({ name: 'proxy.concurrency.wall', value: wall, unit: 'ms', baseline: wallDirect, note: `200 concurrent streams (${(bytes / 1e6).toFixed(2)} MB of SSE) via proxy vs direct` }),
          { name: 'proxy.concurrency.throughput', value: 200 / (wall / 1000), unit: 'streams/s', note: `${(bytes / 1e6 / (wall / 1000)).toFixed(2)} MB/s` },
          { name: 'proxy.concurrency.rss', value: peakRss / 1e6, unit: 'MB', note: `proxy process peak RSS during 200 streams (idle ${(idleRss / 1e6).toFixed(0)} MB)` },
        );
      } finally {
        child?.stop();
        await local.stop();
        await bare.close();
        await up.close();
        agent.destroy();
      }
      return results;
    },
  },
];
