import http from 'node:http';
import type net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelClient } from '../channel/channel-client';
import { startLocalHelper, type LocalHelper } from '../channel/local-helper';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, type EgressEvent, type Resolver } from './egress-proxy';
import { applyNetworkPolicy, type PolicyChannel, type PolicySandbox } from './network-policy';

// A real channel to a local helper process stands in for the sandbox. It runs on this machine, so
// its procfs shows the host's interfaces: the wrapper below serves an isolated sandbox's procfs
// (only `lo`) while exposeHostService and processes go through the real channel.
let helper: LocalHelper;
let client: ChannelClient;
let web: http.Server;
let webPort = 0;
let home: string;

const LO_ONLY_DEV = 'Inter-|   Receive\n face |bytes\n    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n';
const ROUTE_EMPTY = 'Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n';
const BRIDGED_DEV = `${LO_ONLY_DEV}  eth0: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n`;
const ROUTE_DEFAULT = `${ROUTE_EMPTY}eth0\t00000000\t010011AC\t0003\t0\t0\t0\t00000000\t0\t0\t0\n`;

function sandboxWith(procfs: { dev: string; route: string }): PolicySandbox & { channel: PolicyChannel } {
  return {
    runId: 'run-policy',
    channel: {
      exposeHostService: (port, connect) => client.exposeHostService(port, connect),
      readFile: async (p) => Buffer.from(p === '/proc/net/dev' ? procfs.dev : procfs.route),
      writeFile: async () => {
        throw new Error('no gateway in these policies: nothing is written into the sandbox');
      },
    },
  };
}

const resolver: Resolver = async (host) => {
  if (host === 'web.test' || host === 'other.test') return ['127.0.0.1'];
  throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
};

beforeAll(async () => {
  helper = await startLocalHelper({ env: process.env });
  client = await ChannelClient.connect(helper.stream);
  web = http.createServer((req, res) => res.end(`reached ${req.headers.host}${req.url}`));
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  webPort = (web.address() as net.AddressInfo).port;
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-policy-'));
}, 60_000);

afterAll(async () => {
  client?.dispose();
  await helper?.dispose();
  await new Promise((r) => web.close(r));
  await rm(home, { recursive: true, force: true });
});

describe('applyNetworkPolicy', () => {
  it('none: nothing to set up on an isolated sandbox', async () => {
    const applied = await applyNetworkPolicy(sandboxWith({ dev: LO_ONLY_DEV, route: ROUTE_EMPTY }), { mode: 'none' }, { presetContext: { env: process.env }, sandboxNetwork: 'none' });
    expect(applied.env).toEqual({});
    expect(applied.record).toEqual({ policy: 'none', allow: [], interfaces: [], defaultRoute: false });
    expect(applied.proxy).toBeUndefined();
    await applied.close();
  });

  it('none/allowlist refuse a sandbox that has a way out', async () => {
    const leaky = sandboxWith({ dev: BRIDGED_DEV, route: ROUTE_DEFAULT });
    await expect(applyNetworkPolicy(leaky, { mode: 'none' }, { presetContext: { env: process.env }, sandboxNetwork: 'none' })).rejects.toMatchObject({ kind: 'SANDBOX_FAILED' });
    await expect(applyNetworkPolicy(leaky, { mode: 'allowlist' }, { presetContext: { env: process.env }, sandboxNetwork: 'open' })).rejects.toMatchObject({ kind: 'CONFLICT' });
  });

  it('open: needs an open sandbox and is recorded as open with a warning', async () => {
    const isolated = sandboxWith({ dev: LO_ONLY_DEV, route: ROUTE_EMPTY });
    await expect(applyNetworkPolicy(isolated, { mode: 'open' }, { presetContext: { env: process.env }, sandboxNetwork: 'none' })).rejects.toMatchObject({ kind: 'CONFLICT' });
    const applied = await applyNetworkPolicy(sandboxWith({ dev: BRIDGED_DEV, route: ROUTE_DEFAULT }), { mode: 'open' }, { presetContext: { env: process.env }, sandboxNetwork: 'open' });
    expect(applied.env).toEqual({});
    expect(applied.record).toMatchObject({ policy: 'open', allow: [], interfaces: ['eth0'], defaultRoute: true });
    expect(applied.record.warning).toMatch(/Open network/);
  });

  it('rejects malformed policies and entries with typed errors', async () => {
    const isolated = sandboxWith({ dev: LO_ONLY_DEV, route: ROUTE_EMPTY });
    await expect(applyNetworkPolicy(isolated, { mode: 'wide' } as never, { presetContext: { env: process.env }, sandboxNetwork: 'none' })).rejects.toThrow();
    await expect(
      applyNetworkPolicy(isolated, { mode: 'allowlist', allow: ['10.0.0.1'] }, { presetContext: { env: process.env }, sandboxNetwork: 'none' }),
    ).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });

  it('allowlist: an injected resolver alone does not open loopback (the test switch must be set too)', async () => {
    const applied = await applyNetworkPolicy(
      sandboxWith({ dev: LO_ONLY_DEV, route: ROUTE_EMPTY }),
      { mode: 'allowlist', allow: [`web.test:${webPort}`] },
      { presetContext: { env: process.env }, sandboxNetwork: 'none', proxyOptions: { resolve: resolver } },
    );
    const events: EgressEvent[] = [];
    applied.onDidConnect((e) => events.push(e));
    try {
      const r = await client.run({ argv: ['curl', '-sS', `http://web.test:${webPort}/`], env: applied.env });
      expect(r.stdout.toString()).toContain('resolves to a loopback address (127.0.0.1)');
      expect(r.stdout.toString()).not.toContain('reached');
      expect(events.map((e) => [e.host, e.allowed, e.reason])).toEqual([['web.test', false, 'resolves to a loopback address (127.0.0.1)']]);
    } finally {
      await applied.close();
    }
  });

  it('allowlist: a process in the "sandbox" reaches an allowed host through the channel-exposed proxy, and is refused elsewhere', async () => {
    const applied = await applyNetworkPolicy(
      sandboxWith({ dev: LO_ONLY_DEV, route: ROUTE_EMPTY }),
      { mode: 'allowlist', presets: [], allow: [`web.test:${webPort}`] },
      {
        presetContext: { env: process.env },
        sandboxNetwork: 'none',
        project: { path: '/projects/demo', home },
        proxyOptions: { resolve: resolver, [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true },
      },
    );
    const events: EgressEvent[] = [];
    applied.onDidConnect((e) => events.push(e));
    try {
      const proxyUrl = applied.env.HTTP_PROXY as string;
      expect(proxyUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      // The in-sandbox address is the channel listener, not the host proxy's own port.
      expect(proxyUrl).not.toBe(applied.proxy?.url);
      expect(applied.env).toMatchObject({ HTTPS_PROXY: proxyUrl, http_proxy: proxyUrl, https_proxy: proxyUrl, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' });
      expect(applied.record).toMatchObject({ policy: 'allowlist', allow: [`web.test:${webPort}`], projectAllow: [] });

      const ok = await client.run({ argv: ['curl', '-sS', `http://web.test:${webPort}/pkg`], env: applied.env });
      expect(ok.stdout.toString()).toBe(`reached web.test:${webPort}/pkg`);
      const denied = await client.run({ argv: ['curl', '-sS', `http://other.test:${webPort}/`], env: applied.env });
      expect(denied.stdout.toString()).toContain(`airlock: other.test:${webPort} is not on this run's allowlist`);

      // Allowing it for the project takes effect in this run at once and is remembered.
      await applied.proxy?.allowForProject(`other.test:${webPort}`);
      const after = await client.run({ argv: ['curl', '-sS', `http://other.test:${webPort}/again`], env: applied.env });
      expect(after.stdout.toString()).toBe(`reached other.test:${webPort}/again`);
      expect(events.map((e) => [e.host, e.allowed])).toEqual([
        ['web.test', true],
        ['other.test', false],
        ['other.test', true],
      ]);
    } finally {
      await applied.close();
    }
    const next = await applyNetworkPolicy(
      sandboxWith({ dev: LO_ONLY_DEV, route: ROUTE_EMPTY }),
      { mode: 'allowlist' },
      { presetContext: { env: process.env }, sandboxNetwork: 'none', project: { path: '/projects/demo', home } },
    );
    expect(next.record.projectAllow).toEqual([`other.test:${webPort}`]);
    expect(next.record.allow).toEqual([`other.test:${webPort}`]);
    const port = Number(new URL(next.env.HTTP_PROXY as string).port);
    await next.close();
    // After close, the in-sandbox listener is gone too.
    const probe = await client.run({ argv: ['curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${port}/`] });
    expect(probe.stdout.toString()).toBe('000');
  });
});
