/**
 * Issue 44, the long session in two minutes: thousands of connections through every service a
 * sandbox reaches over the channel (the model proxy and the egress proxy, sandbox → host; a preview
 * port, host → sandbox), ended every way a connection ends: the client first, the server first, a
 * reset, a half-close, an idle connection the server times out. Afterwards nothing holds a slot:
 * the host's count of open connections, its stream table, the helper's and the preview's are all
 * zero, and fresh connections work (docs/architecture.md §4). No timing is asserted.
 */
import { execFile } from 'node:child_process';
import { connect as netConnect } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChannelClient } from '../../core/channel/channel-client';
import { EgressProxy } from '../../core/network/egress-proxy';
import { publishPort, type PublishedPort } from '../../core/network/preview-ports';
import { ModelProxy } from '../../core/proxy/model-proxy';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { AirlockError } from '../../contracts/errors';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage, testRunId, testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

const MODES = ['client-first', 'server-first', 'reset', 'half-close', 'idle'] as const;
type Mode = (typeof MODES)[number];

/**
 * Opens `count` connections to 127.0.0.1:port (`concurrency` at once, below the cap), each ended in
 * `mode`, and prints per mode how many closed, how many got an answer, and the errors seen. Plain
 * sockets, so the script decides who ends first. Runs in the sandbox (Node 18) and on the host.
 */
const CONNECTOR = `
const net = require('net');
const [port, count, concurrency] = process.argv.slice(1, 4).map(Number);
const modes = process.argv[4].split(',');
const request = Buffer.from(process.argv[5], 'base64');
function one(mode) {
  return new Promise((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port, allowHalfOpen: mode === 'half-close' });
    let answered = false, error = '', stuck = false;
    // Never wait forever: a connection nobody ends is reported as stuck (and fails the test).
    const timer = setTimeout(() => { stuck = true; s.destroy(); }, 20000);
    s.on('error', (e) => (error = e.code || e.message));
    s.on('connect', () => {
      if (mode === 'idle') return; // The server times the silent connection out.
      s.write(request);
      if (mode === 'reset') s.resetAndDestroy();
      else if (mode === 'half-close') s.end(); // Keeps reading: the answer, then the server's end.
    });
    s.on('data', () => {
      answered = true;
      if (mode === 'client-first') s.end();
    });
    s.on('close', () => { clearTimeout(timer); resolve({ answered, error, stuck }); });
  });
}
(async () => {
  const out = {};
  for (const mode of modes) {
    const r = (out[mode] = { closed: 0, answered: 0, stuck: 0, errors: {} });
    let next = 0;
    await Promise.all(Array.from({ length: concurrency }, async () => {
      while (next < count) {
        next++;
        const { answered, error, stuck } = await one(mode);
        if (stuck) r.stuck++;
        else r.closed++;
        if (answered) r.answered++;
        if (error) r.errors[error] = (r.errors[error] || 0) + 1;
      }
    }));
  }
  console.log(JSON.stringify(out));
})();
`;

/** A small HTTP server inside the sandbox for the preview: short keep-alive and header timeouts. */
const PREVIEW_SERVER = `
const http = require('http');
const server = http.createServer({ keepAliveTimeout: 200, headersTimeout: 1000, requestTimeout: 1000, connectionsCheckingInterval: 100 }, (req, res) => res.end('preview'));
server.listen(Number(process.argv[1]), '127.0.0.1', () => console.log('listening'));
`;

type ModeResult = { closed: number; answered: number; stuck: number; errors: Record<string, number> };
type Results = Record<Mode, ModeResult>;

const PER_MODE = Number(process.env.AIRLOCK_SOAK_PER_MODE ?? 300);
const CONCURRENCY = 100;
const execFileP = promisify(execFile);

describe.skipIf(!docker.ok)('the channel under a long session’s connections (soak)', () => {
  let manager: SandboxManager;
  let sandbox: Sandbox;
  let channel: ChannelClient;
  let model: ModelProxy;
  let egress: EgressProxy;
  let preview: PublishedPort;
  const ports = { model: 0, egress: 0 };
  const totals = { connections: 0 };

  beforeAll(async () => {
    manager = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
    sandbox = await manager.create({ runId: testRunId(), image: await sandboxImage(), limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
    channel = sandbox.channel;
    // Short timeouts, so "the server closes first" and "idle" happen within the test.
    model = new ModelProxy({ resolveUpstream: async () => Promise.reject(new AirlockError('NOT_FOUND', 'no upstream in this test')), keepAliveTimeoutMs: 100, requestTimeoutMs: 1000 });
    const { port: modelPort } = await model.start();
    egress = await EgressProxy.start({ runId: 'r-soak', allow: [], handshakeTimeoutMs: 1000 });
    ports.model = (await channel.exposeHostService(0, () => netConnect(modelPort, '127.0.0.1'), { name: 'model proxy' })).port;
    // As applyNetworkPolicy exposes it: idle connections may be closed, but only for waiting ones.
    ports.egress = (await channel.exposeHostService(0, () => egress.connect(), { name: 'egress proxy', closeIdle: true })).port;
  });

  afterAll(async () => {
    await preview?.close();
    await manager?.shutdown().catch(() => undefined);
    await model?.stop();
    await egress?.close();
  });

  async function inSandbox(port: number, request: string): Promise<Results> {
    const r = await channel.run({ argv: ['node', '-e', CONNECTOR, String(port), String(PER_MODE), String(CONCURRENCY), MODES.join(','), Buffer.from(request).toString('base64')], timeoutMs: 110_000 });
    expect(r.stderr.toString()).toBe('');
    return JSON.parse(r.stdout.toString()) as Results;
  }

  function expectEveryEnding(service: string, results: Results): void {
    console.log(`[soak] ${service}: ${JSON.stringify(results)}`);
    for (const mode of MODES) {
      totals.connections += results[mode].closed;
      expect(results[mode], `${service} ${mode}`).toMatchObject({ closed: PER_MODE, stuck: 0 });
      // Every connection that asked got its answer, whoever ended it (a client that half-closed
      // before the answer too: no reset), except those reset at once.
      if (mode !== 'reset' && mode !== 'idle') expect(results[mode], `${service} ${mode}`).toMatchObject({ answered: PER_MODE, errors: {} });
    }
  }

  it(`the model proxy: ${PER_MODE} connections ended each way, from inside the sandbox`, async () => {
    expectEveryEnding('model proxy', await inSandbox(ports.model, 'HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'));
  }, 120_000);

  it(`the egress proxy: ${PER_MODE} connections ended each way, from inside the sandbox`, async () => {
    // Refused by the allow-list on the host; no name is resolved and nothing leaves the machine.
    expectEveryEnding('egress proxy', await inSandbox(ports.egress, 'GET http://blocked.invalid/ HTTP/1.1\r\nHost: blocked.invalid\r\n\r\n'));
  }, 120_000);

  it(`a preview port: ${PER_MODE} connections ended each way, from the host into the sandbox`, async () => {
    const server = channel.spawn({ argv: ['node', '-e', PREVIEW_SERVER, '8123'] });
    let out = '';
    server.onStdout((b) => (out += b.toString()));
    await vi.waitFor(() => expect(out).toContain('listening'), { timeout: 30_000, interval: 50 });
    preview = await publishPort(channel, 8123);
    const request = `GET / HTTP/1.1\r\nHost: localhost:${preview.hostPort}\r\n\r\n`;
    const { stdout } = await execFileP(process.execPath, ['-e', CONNECTOR, String(preview.hostPort), String(PER_MODE), String(CONCURRENCY), MODES.join(','), Buffer.from(request).toString('base64')], { timeout: 100_000 });
    expectEveryEnding('preview', JSON.parse(stdout) as Results);
    await vi.waitFor(() => expect(preview.activeConnections).toBe(0), { timeout: 10_000, interval: 50 });
    // Its process stream too is over before the books are checked.
    server.kill('SIGKILL');
    await server.exited;
  }, 120_000);

  it('holds no slot afterwards, on the host or in the helper, and fresh connections work', async () => {
    await vi.waitFor(() => expect(channel.openConnections).toBe(0), { timeout: 10_000, interval: 50 });
    await vi.waitFor(() => expect(channel.openStreams).toBe(0), { timeout: 10_000, interval: 50 });
    await vi.waitFor(async () => expect(await channel.helperStats()).toEqual({ streams: 0, sinks: 0, mux: 0, closedIdle: 0 }), { timeout: 10_000, interval: 50 });
    console.log(`[soak] ${totals.connections} connections; open afterwards: host ${channel.openConnections}, host streams ${channel.openStreams}, helper ${JSON.stringify(await channel.helperStats())}`);
    const r = await channel.run({ argv: ['node', '-e', CONNECTOR, String(ports.model), '20', '20', 'client-first', Buffer.from('HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n').toString('base64')] });
    expect(JSON.parse(r.stdout.toString())).toEqual({ 'client-first': { closed: 20, answered: 20, stuck: 0, errors: {} } });
  }, 60_000);
});
