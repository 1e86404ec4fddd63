/**
 * Issue 44: connections the sandbox opens into a host service through the channel hold a slot of
 * the host's cap (MAX_SANDBOX_CONNECTIONS) exactly while they are open. Keep-alive clients whose
 * server closes the idle sockets first (what every agent between two model calls sees) must not use
 * the slots up: past the cap, fresh connections still work. Run in every isolation that is here:
 * Docker (runc), gVisor and the QEMU VM (docs/architecture.md §4).
 */
import { createServer, type Server } from 'node:http';
import { connect as netConnect, type AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MAX_SANDBOX_CONNECTIONS, type ChannelClient } from '../../core/channel/channel-client';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import type { SandboxDriver } from '../../core/sandbox/driver';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage, testRunId, testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');
const runsc = docker.ok ? await requirePrerequisite('runsc') : docker;
const qemu = docker.ok ? await requirePrerequisite('qemu') : docker;

/**
 * In the sandbox: `batches` rounds of `size` concurrent keep-alive requests; after each round it
 * waits until the server has closed every socket (the client never closes first), then `fresh`
 * one-shot requests. Prints a JSON summary.
 */
const KEEPALIVE_CLIENT = `
const http = require('http');
const [port, batches, size, fresh] = process.argv.slice(1).map(Number);
const agent = new http.Agent({ keepAlive: true, maxSockets: size });
const codes = {};
let ok = 0, failed = 0, serverClosed = 0;
function get(opts) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', ...opts }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(res.statusCode === 200 && body === 'ok' ? 'ok' : 'status ' + res.statusCode));
    });
    req.on('error', (e) => resolve(e.code || e.message));
    if (opts.onSocket) req.on('socket', opts.onSocket);
  });
}
function count(r) { if (r === 'ok') ok++; else { failed++; codes[r] = (codes[r] || 0) + 1; } }
// The agent's idle sockets do not keep the process alive: this does, until the summary is out.
const alive = setInterval(() => undefined, 1000);
(async () => {
  for (let b = 0; b < batches; b++) {
    const seen = new Set();
    const closed = [];
    const onSocket = (s) => {
      if (seen.has(s)) return;
      seen.add(s);
      // A socket the server ends: the client only answers the FIN (Node's default), never closes first.
      closed.push(new Promise((r) => s.once('close', () => { serverClosed++; r(); })));
    };
    const results = await Promise.all(Array.from({ length: size }, () => get({ agent, onSocket })));
    results.forEach(count);
    await Promise.all(closed);
  }
  const freshResults = [];
  for (let i = 0; i < fresh; i++) freshResults.push(await get({ agent: false }));
  const freshOk = freshResults.filter((r) => r === 'ok').length;
  console.log(JSON.stringify({ ok, failed, codes, serverClosed, freshOk, fresh: freshResults.filter((r) => r !== 'ok') }));
  clearInterval(alive);
})();
`;

interface ClientSummary {
  ok: number;
  failed: number;
  codes: Record<string, number>;
  serverClosed: number;
  freshOk: number;
  fresh: string[];
}

interface Way {
  name: string;
  ok: boolean;
  /**
   * The cap to cross. The VM runs under emulation here (a request costs most of a second), so it
   * crosses a lowered cap: the same accounting, a tenth of the connections.
   */
  limit?: number;
  driver(): Promise<{ driver: SandboxDriver; cleanup(): Promise<void> }>;
}

const WAYS: Way[] = [
  { name: 'Docker (runc)', ok: docker.ok, driver: async () => ({ driver: new DockerDriver({ env: process.env, engine: testEngine() }), cleanup: async () => undefined }) },
  { name: 'gVisor', ok: runsc.ok, driver: async () => ({ driver: new DockerDriver({ env: process.env, engine: testEngine(), isolation: 'gvisor' }), cleanup: async () => undefined }) },
  {
    name: 'QEMU VM',
    ok: qemu.ok,
    limit: 20,
    driver: async () => {
      const { QemuDriver } = await import('../../core/sandbox/qemu/qemu-driver');
      const runsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-keepalive-vm-'));
      const driver = new QemuDriver({ env: process.env, engine: testEngine, paths: { runsDir }, diskBytes: 1024 ** 3 });
      await driver.checkAvailable();
      return {
        driver,
        cleanup: async () => {
          for (const sb of await driver.list()) await driver.destroy(sb.runId);
          driver.dispose();
          await rm(runsDir, { recursive: true, force: true });
        },
      };
    },
  },
];

for (const way of WAYS) {
  describe.skipIf(!way.ok)(`keep-alive connections the server closes first: ${way.name}`, () => {
    let manager: SandboxManager;
    let sandbox: Sandbox;
    let channel: ChannelClient;
    let cleanup: () => Promise<void> = async () => undefined;
    let server: Server;
    let accepted = 0;

    beforeAll(async () => {
      const chosen = await way.driver();
      cleanup = chosen.cleanup;
      manager = new SandboxManager(chosen.driver);
      const image = await sandboxImage();
      sandbox = await manager.create({ runId: testRunId(), image, limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
      channel = sandbox.channel;
      server = createServer((_req, res) => res.end('ok'));
      // The server closes idle keep-alive sockets first, and soon, so the test runs fast.
      server.keepAliveTimeout = 150;
      server.on('connection', () => (accepted += 1));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    });

    afterAll(async () => {
      await manager?.shutdown().catch(() => undefined);
      await cleanup();
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
    });

    it(`serves more than the cap (${way.limit ?? MAX_SANDBOX_CONNECTIONS}) of them, then fresh connections, and holds no slot afterwards`, async () => {
      const hostPort = (server.address() as AddressInfo).port;
      if (way.limit) channel.lowerConnectionLimit(way.limit);
      const exposed = await channel.exposeHostService(0, () => netConnect(hostPort, '127.0.0.1'));
      let refused = 0;
      channel.onDidRefuseConnections((e) => (refused = Math.max(refused, e.refused)));
      const limit = channel.maxConnections;
      // Batches whose total crosses the cap (6 × 50 = 300 past 256).
      const size = Math.min(50, Math.ceil(limit / 2));
      const batches = Math.floor(limit / size) + 2;
      const fresh = way.limit ? 3 : 10;
      const r = await channel.run({ argv: ['node', '-e', KEEPALIVE_CLIENT, String(exposed.port), String(batches), String(size), String(fresh)], timeoutMs: 300_000 });
      expect(r.stderr.toString()).toBe('');
      const summary = JSON.parse(r.stdout.toString()) as ClientSummary;
      console.log(`[keepalive ${way.name}] ${JSON.stringify(summary)}; host accepted ${accepted}; open on the host: ${channel.openConnections}`);
      expect(batches * size).toBeGreaterThan(limit);
      expect(summary).toMatchObject({ ok: batches * size, failed: 0, serverClosed: batches * size, freshOk: fresh });
      expect(refused).toBe(0);
      // Every connection is over on both ends: no slot is held, on the host or in the helper.
      await vi.waitFor(() => expect(channel.openConnections).toBe(0), { timeout: 10_000, interval: 50 });
      await vi.waitFor(async () => expect((await channel.helperStats()).streams).toBe(0), { timeout: 10_000, interval: 50 });
      exposed.dispose();
    }, 400_000);
  });
}
