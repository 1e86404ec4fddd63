/**
 * Issue 44: a service exposed with `closeIdle` (the egress proxy) at its cap. Clients such as npm
 * keep hundreds of connections open and idle far longer than the host server's own idle timeout;
 * a connection waiting for a slot must get one as soon as an idle connection has been silent for
 * IDLE_CLOSE_MS, as from a busy server closing idle keep-alive sockets, and not only when the
 * waiting times out. Nothing is closed while nobody waits, and a connection whose request waits for
 * its answer is never cut (docs/architecture.md §4). Real Docker sandbox, real channel.
 */
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChannelClient } from '../../core/channel/channel-client';
import { IDLE_CLOSE_MS } from '../../core/channel/protocol';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage, testRunId, testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

/**
 * In the sandbox: runs `steps` (JSON) over line-based connections to 127.0.0.1:port and prints what
 * each connection saw: its answers and how it ended (`end`: the other side closed it cleanly; an
 * error code; `open`: still open when the script finished). Steps: `open` a named connection,
 * `ask` it (sends `req:<name>`, by default waits for `res:<name>`), `wait` ms (setup only),
 * `check` (records which connections are still open).
 */
const CLIENT = `
const net = require('net');
const port = Number(process.argv[1]);
const steps = JSON.parse(process.argv[2]);
const conns = {};
const checks = [];
function open(name) {
  const c = { socket: net.connect(port, '127.0.0.1'), got: [], ended: 'open', waiters: [] };
  let buf = '';
  c.socket.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      c.got.push(line);
      c.waiters.splice(0).forEach((w) => w());
    }
  });
  c.socket.on('end', () => { if (c.ended === 'open') c.ended = 'end'; c.socket.end(); });
  c.socket.on('error', (e) => { c.ended = e.code || e.message; });
  c.socket.on('close', () => { if (c.ended === 'open') c.ended = 'closed'; c.waiters.splice(0).forEach((w) => w()); });
  conns[name] = c;
}
function answered(c, name) {
  return new Promise((resolve) => {
    const look = () => (c.got.includes('res:' + name) || c.ended !== 'open' ? resolve() : c.waiters.push(look));
    look();
  });
}
(async () => {
  const pending = [];
  for (const step of steps) {
    if (step.open) open(step.open);
    if (step.ask) {
      const c = conns[step.ask];
      const started = Date.now();
      c.socket.write('req:' + step.ask + '\\n');
      const p = answered(c, step.ask).then(() => (c.waitedMs = Date.now() - started));
      if (step.noWait) pending.push(p); else await p;
    }
    if (step.wait) await new Promise((r) => setTimeout(r, step.wait));
    if (step.check) checks.push(Object.keys(conns).filter((n) => conns[n].ended === 'open'));
  }
  await Promise.all(pending);
  const out = {};
  for (const [name, c] of Object.entries(conns)) out[name] = { got: c.got, ended: c.ended, waitedMs: c.waitedMs };
  console.log(JSON.stringify({ conns: out, checks }));
  for (const c of Object.values(conns)) c.socket.destroy();
})();
`;

interface Seen {
  conns: Record<string, { got: string[]; ended: string; waitedMs?: number }>;
  checks: string[][];
}

describe.skipIf(!docker.ok)('idle connections closed for waiting ones at a service’s cap (issue 44)', () => {
  let manager: SandboxManager;
  let sandbox: Sandbox;
  let channel: ChannelClient;
  let server: Server;
  /** Requests named `slow…` are answered only once a request named `release` arrives. */
  let held: Array<{ socket: Socket; name: string }> = [];

  beforeAll(async () => {
    manager = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
    sandbox = await manager.create({ runId: testRunId(), image: await sandboxImage(), limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
    channel = sandbox.channel;
    // Like the egress proxy's tunnels: answers each request and never closes an idle connection itself.
    server = createServer((socket) => {
      let buf = '';
      socket.on('data', (d) => {
        buf += d.toString();
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const name = buf.slice(0, i).replace(/^req:/, '');
          buf = buf.slice(i + 1);
          if (name.startsWith('slow')) {
            held.push({ socket, name });
            continue;
          }
          socket.write(`res:${name}\n`);
          if (name.startsWith('release')) for (const h of held.splice(0)) h.socket.write(`res:${h.name}\n`);
        }
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  }, 300_000);

  afterAll(async () => {
    await manager?.shutdown().catch(() => undefined);
    await new Promise((resolve) => server?.close(resolve));
  });

  async function expose(maxConnections: number): Promise<{ port: number; dispose(): void }> {
    const port = (server.address() as AddressInfo).port;
    return channel.exposeHostService(0, () => connect(port, '127.0.0.1'), { name: 'keep-alive service', maxConnections, closeIdle: true });
  }

  async function runSteps(port: number, steps: object[]): Promise<Seen> {
    // Past ACCEPT_WAIT_MS (60 s) a waiting connection is refused; the run outlives that, so the old
    // helper's behaviour shows as a refusal, not as a timeout of the test.
    const r = await channel.run({ argv: ['node', '-e', CLIENT, String(port), JSON.stringify(steps)], timeoutMs: 120_000 });
    expect(r.stderr.toString()).toBe('');
    const seen = JSON.parse(r.stdout.toString()) as Seen;
    console.log(`[idle-close] ${JSON.stringify(seen)}`);
    return seen;
  }

  it('a connection past the cap is served once an idle one has been silent for the idle window, not when it times out; none is closed while nobody waits', async () => {
    const refused: number[] = [];
    const watching = channel.onDidRefuseConnections((e) => refused.push(e.refused));
    const exposed = await expose(3);
    const before = (await channel.helperStats()).closedIdle;
    try {
      const seen = await runSteps(exposed.port, [
        // Three keep-alive connections, each answered and then left idle (the first the longest).
        { open: 'a' }, { ask: 'a' },
        { open: 'b' }, { ask: 'b' },
        { open: 'c' }, { ask: 'c' },
        // Idle past the window with nobody waiting: nothing may be closed.
        { wait: IDLE_CLOSE_MS + 1500 },
        { check: true },
        // A fourth: it waits for a slot; the longest-idle connection is closed for it.
        { open: 'd' }, { ask: 'd' },
        { check: true },
      ]);
      expect(seen.checks[0]).toEqual(['a', 'b', 'c']);
      expect(seen.conns.d).toMatchObject({ got: ['res:d'], ended: 'open' });
      // The longest idle went, with a clean close (a FIN, as from a server), the others stayed.
      expect(seen.conns).toMatchObject({ a: { ended: 'end' } });
      expect(seen.checks[1]).toEqual(['b', 'c', 'd']);
      expect((await channel.helperStats()).closedIdle - before).toBe(1);
      expect(refused).toEqual([]);
      await vi.waitFor(() => expect(channel.openConnections).toBe(0), { timeout: 10_000, interval: 50 });
    } finally {
      watching.dispose();
      exposed.dispose();
    }
  }, 200_000);

  it('a connection whose answer is slow is never closed, even when it has been silent the longest', async () => {
    const refused: number[] = [];
    const watching = channel.onDidRefuseConnections((e) => refused.push(e.refused));
    const exposed = await expose(2);
    const before = (await channel.helperStats()).closedIdle;
    held = [];
    try {
      const seen = await runSteps(exposed.port, [
        // `slow` asks first and gets no answer (the server is slow); then `idle` asks, is answered, goes idle.
        { open: 'slow' }, { ask: 'slow', noWait: true },
        { open: 'idle' }, { ask: 'idle' },
        // `release` waits for a slot: only `idle` may be closed for it, though `slow` is silent longer.
        { open: 'release' }, { ask: 'release' },
        { check: true },
      ]);
      expect(seen.conns.release).toMatchObject({ got: ['res:release'], ended: 'open' });
      expect(seen.conns.idle).toMatchObject({ got: ['res:idle'], ended: 'end' });
      // The slow answer arrived, on a connection that was never cut.
      expect(seen.conns.slow).toMatchObject({ got: ['res:slow'], ended: 'open' });
      expect(seen.checks[0]).toEqual(['slow', 'release']);
      expect((await channel.helperStats()).closedIdle - before).toBe(1);
      expect(refused).toEqual([]);
      await vi.waitFor(() => expect(channel.openConnections).toBe(0), { timeout: 10_000, interval: 50 });
    } finally {
      watching.dispose();
      exposed.dispose();
    }
  }, 200_000);
});
