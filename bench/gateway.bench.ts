/**
 * Egress gateway costs (docs/architecture.md §8): the same HTTPS test server on 127.0.0.1, reached
 * once through a plain CONNECT tunnel and once intercepted (TLS terminated with the run CA, judged by
 * a rule, forwarded over a pooled upstream TLS connection). Both clients keep one connection alive,
 * as git and npm do, so the figures are per request, not per handshake.
 */
import { spawn } from 'node:child_process';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxy } from '../core/network/egress-proxy';
import { RunCa } from '../core/network/gateway/run-ca';
import { RuleSet } from '../core/network/gateway/rules';
import { TlsGateway } from '../core/network/gateway/tls-gateway';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';

const BIG = 64 * 1024 * 1024;

/**
 * The server and the client run in processes of their own, as they do for real (a registry out
 * there, git in the sandbox): only the proxy and the gateway share this process, so their crypto
 * and parsing is what the comparison measures.
 */
const SERVER = `
const https = require('https'), tls = require('tls');
const { key, certs, big } = JSON.parse(process.env.PEER);
const ctx = Object.fromEntries(Object.entries(certs).map(([h, cert]) => [h, tls.createSecureContext({ key, cert })]));
const chunk = Buffer.alloc(256 * 1024, 0x61);
const server = https.createServer({ key, cert: Object.values(certs)[0], SNICallback: (n, cb) => cb(null, ctx[n]) }, (req, res) => {
  if (req.url !== '/big') return void res.end('{"ok":true}');
  res.writeHead(200, { 'Content-Length': big });
  let left = big / chunk.length;
  const pump = () => { while (left > 0) { left--; if (!res.write(chunk)) return void res.once('drain', pump); } res.end(); };
  pump();
});
server.keepAliveTimeout = 120000;
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'));
`;

const CLIENT = `
const http = require('http'), https = require('https'), tls = require('tls');
const { proxyPort, host, port, ca, small, bigRuns, big } = JSON.parse(process.env.PEER);
const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: host + ':' + port, headers: { host: host + ':' + port } });
req.on('connect', async (res, socket) => {
  socket.setNoDelay(true);
  const secure = tls.connect({ socket, servername: host, ca }, async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    agent.createConnection = () => secure;
    const get = (path) => new Promise((resolve, reject) => https.get({ host, path, agent }, (r) => { let n = 0; r.on('data', (c) => (n += c.length)); r.on('end', () => resolve(n)); }).on('error', reject));
    for (let i = 0; i < 50; i++) await get('/small');
    const rtt = [];
    for (let i = 0; i < small; i++) { const t = performance.now(); await get('/small'); rtt.push(performance.now() - t); }
    const download = [];
    for (let i = 0; i < bigRuns; i++) { const t = performance.now(); if ((await get('/big')) !== big) throw new Error('short'); download.push(performance.now() - t); }
    process.stdout.write(JSON.stringify({ rtt, download }));
    secure.destroy();
  });
});
req.end();
`;

function peer(script: string, env: object): { output: Promise<string>; kill(): void } {
  const child = spawn(process.execPath, ['-e', script], { env: { ...process.env, PEER: JSON.stringify(env) }, stdio: ['ignore', 'pipe', 'inherit'] });
  const output = new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (script === SERVER && out.endsWith('\n')) resolve(out.trim());
    });
    child.on('exit', (code) => (code === 0 || script === SERVER ? resolve(out) : reject(new Error(`bench peer exited ${code}`))));
  });
  return { output, kill: () => child.kill() };
}

async function measure(proxyPort: number, host: string, port: number, ca: string, small: number, bigRuns: number): Promise<{ rtt: number[]; download: number[] }> {
  return JSON.parse(await peer(CLIENT, { proxyPort, host, port, ca, small, bigRuns, big: BIG }).output) as { rtt: number[]; download: number[] };
}

export const benchmarks: Benchmark[] = [
  {
    name: 'network.gateway',
    async run(): Promise<BenchResult[]> {
      const [serverCa, runCa] = await Promise.all([RunCa.create('bench-server'), RunCa.create('bench-run')]);
      const certs = { 'tunnel.test': await serverCa.leafFor('tunnel.test'), 'intercepted.test': await serverCa.leafFor('intercepted.test') };
      const server = peer(SERVER, { key: serverCa.leafKeyPem, certs, big: BIG });
      const serverPort = Number(await server.output);
      const gateway = new TlsGateway({ ca: runCa, rules: new RuleSet(['intercepted.test allow GET']), upstreamCa: [serverCa.certificatePem], idleTimeoutMs: 60_000 });
      const proxy = await EgressProxy.start({
        runId: 'bench-gateway',
        allow: [`tunnel.test:${serverPort}`, `intercepted.test:${serverPort}`],
        resolve: async () => ['127.0.0.1'],
        gateway,
        [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
      });
      try {
        // Alternate the two so load on a shared machine falls on both alike.
        const tunnel = { rtt: [] as number[], download: [] as number[] };
        const seen = { rtt: [] as number[], download: [] as number[] };
        // Five downloads each (the budget is judged on the median of five).
        for (let i = 0; i < 5; i++) {
          const t = await measure(proxy.port, 'tunnel.test', serverPort, serverCa.certificatePem, i < 3 ? 400 : 0, 1);
          const s = await measure(proxy.port, 'intercepted.test', serverPort, runCa.certificatePem, i < 3 ? 400 : 0, 1);
          tunnel.rtt.push(...t.rtt);
          tunnel.download.push(...t.download);
          seen.rtt.push(...s.rtt);
          seen.download.push(...s.download);
        }
        const p50t = percentile(tunnel.rtt, 50);
        const p50i = percentile(seen.rtt, 50);
        const mb = BIG / 1024 / 1024;
        return [
          withRatio({ name: 'network.gateway.request_p50', value: p50i, unit: 'ms', baseline: p50t, note: 'small HTTPS GET, keep-alive: intercepted vs the plain tunnel to the same server' }),
          { name: 'network.gateway.added_latency_p50', value: p50i - p50t, unit: 'ms', budget: '≤ +1 ms', note: 'intercepted minus tunnel, per request' },
          withRatio({ name: 'network.gateway.download_64MiB', value: mb / (percentile(seen.download, 50) / 1000), unit: 'MB/s', baseline: mb / (percentile(tunnel.download, 50) / 1000), budget: '≥ 0.7×', note: 'intercepted vs tunnel throughput (median of 5)' }),
        ];
      } finally {
        await proxy.close();
        gateway.dispose();
        server.kill();
      }
    },
  },
];
