/**
 * Egress proxy and preview-port costs, all on 127.0.0.1: an echo server stands in for a registry
 * (resolved through an injected resolver with the test-only loopback override).
 */
import net from 'node:net';
import { ChannelClient } from '../core/channel/channel-client';
import { startLocalHelper } from '../core/channel/local-helper';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxy } from '../core/network/egress-proxy';
import { publishPort } from '../core/network/preview-ports';
import { percentile, sample, withRatio, type Benchmark, type BenchResult } from './harness';

async function echoServer(): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
}

function connect(port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    s.setNoDelay(true);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

function tunnel(proxyPort: number, target: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(proxyPort, '127.0.0.1');
    s.setNoDelay(true);
    let head = '';
    const onData = (d: Buffer) => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      s.off('data', onData);
      if (head.startsWith('HTTP/1.1 200')) resolve(s);
      else reject(new Error(head));
    };
    s.on('data', onData);
    s.once('error', reject);
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

function echo(s: net.Socket, payload: Buffer): Promise<void> {
  return new Promise((resolve) => {
    let got = 0;
    const onData = (d: Buffer) => {
      got += d.length;
      if (got >= payload.length) {
        s.off('data', onData);
        resolve();
      }
    };
    s.on('data', onData);
    s.write(payload);
  });
}

async function startProxy(echoPort: number): Promise<EgressProxy> {
  return EgressProxy.start({
    runId: 'bench',
    allow: [`echo.test:${echoPort}`],
    resolve: async () => ['127.0.0.1'],
    [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
  });
}

export const benchmarks: Benchmark[] = [
  {
    name: 'network.egress',
    async run(): Promise<BenchResult[]> {
      const server = await echoServer();
      const proxy = await startProxy(server.port);
      const target = `echo.test:${server.port}`;
      const small = Buffer.from('x'.repeat(64));
      try {
        const direct = await connect(server.port);
        const tunnelled = await tunnel(proxy.port, target);
        const directRtt = await sample(500, () => echo(direct, small), 50);
        const proxiedRtt = await sample(500, () => echo(tunnelled, small), 50);
        direct.destroy();
        tunnelled.destroy();

        const setupDirect = await sample(100, async () => (await connect(server.port)).destroy(), 10);
        const setupTunnel = await sample(100, async () => (await tunnel(proxy.port, target)).destroy(), 10);

        const big = Buffer.alloc(64 * 1024 * 1024, 0x61);
        const thrDirect = await sample(3, async () => {
          const s = await connect(server.port);
          await echo(s, big);
          s.destroy();
        }, 1);
        const thrTunnel = await sample(3, async () => {
          const s = await tunnel(proxy.port, target);
          await echo(s, big);
          s.destroy();
        }, 1);
        const mb = big.length / 1024 / 1024;

        const concurrent = await sample(5, async () => {
          const sockets = await Promise.all(Array.from({ length: 100 }, () => tunnel(proxy.port, target)));
          await Promise.all(sockets.map((s) => echo(s, small)));
          for (const s of sockets) s.destroy();
        }, 1);

        const p50d = percentile(directRtt, 50);
        const p50p = percentile(proxiedRtt, 50);
        return [
          withRatio({ name: 'network.egress.tunnel_rtt_p50', value: p50p, unit: 'ms', baseline: p50d, note: '64 B echo through an open CONNECT tunnel vs direct' }),
          { name: 'network.egress.tunnel_added_latency_p50', value: p50p - p50d, unit: 'ms', note: 'per round trip' },
          withRatio({ name: 'network.egress.tunnel_setup_p50', value: percentile(setupTunnel, 50), unit: 'ms', baseline: percentile(setupDirect, 50), note: 'CONNECT + policy + resolve + connect vs plain TCP connect' }),
          withRatio({ name: 'network.egress.throughput', value: mb / (percentile(thrTunnel, 50) / 1000), unit: 'MB/s', baseline: mb / (percentile(thrDirect, 50) / 1000), note: '64 MiB echoed (both directions)' }),
          { name: 'network.egress.100_concurrent_tunnels', value: percentile(concurrent, 50), unit: 'ms', note: 'open 100 tunnels + one echo each' },
        ];
      } finally {
        await proxy.close();
        await server.close();
      }
    },
  },
  {
    name: 'network.preview',
    async run(): Promise<BenchResult[]> {
      const server = await echoServer();
      const helper = await startLocalHelper({ env: process.env });
      const client = await ChannelClient.connect(helper.stream);
      try {
        const published = await publishPort(client, server.port);
        const small = Buffer.from('x'.repeat(64));
        const direct = await connect(server.port);
        const viaPreview = await connect(published.hostPort);
        await echo(viaPreview, small);
        const d = await sample(300, () => echo(direct, small), 30);
        const p = await sample(300, () => echo(viaPreview, small), 30);
        direct.destroy();
        viaPreview.destroy();
        await published.close();
        return [
          withRatio({ name: 'network.preview.rtt_p50', value: percentile(p, 50), unit: 'ms', baseline: percentile(d, 50), note: '64 B echo through a published port (local helper channel) vs direct' }),
        ];
      } finally {
        client.dispose();
        await helper.dispose();
        await server.close();
      }
    },
  },
];
