import http from 'node:http';
import net from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxy, type EgressEvent, type EgressProxyOptions, type Resolver } from './egress-proxy';
import { ProjectNetworkStore } from './project-network-store';

// Everything here stays on 127.0.0.1: the resolver below maps fixture `.test` names to loopback
// (echo servers this file starts) or to addresses that must be refused before any connection.

let echo: net.Server;
let echoPort = 0;
let web: http.Server;
let webPort = 0;
let webSeen: Array<{ url: string; headers: http.IncomingHttpHeaders }> = [];

const resolver: Resolver = async (host) => {
  const table: Record<string, string[]> = {
    'echo.test': ['127.0.0.1'],
    'a.echo.test': ['127.0.0.1'],
    'deep.a.echo.test': ['127.0.0.1'],
    'web.test': ['127.0.0.1'],
    'other.test': ['127.0.0.1'],
    'private.test': ['10.20.30.40'],
    'meta.test': ['169.254.169.254'],
    'mixed.test': ['127.0.0.1', '192.168.1.10'],
    'mapped.test': ['::ffff:10.0.0.1'],
    'ula.test': ['fd00:ec2::254'],
    'multi.test': ['127.0.0.2', '127.0.0.1'],
    'dead.test': ['127.0.0.3'],
  };
  const found = table[host];
  if (!found) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return found;
};

async function startProxy(allow: string[], extra: Partial<EgressProxyOptions> = {}): Promise<EgressProxy> {
  return EgressProxy.start({
    runId: 'run-test',
    allow,
    resolve: resolver,
    [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
    ...extra,
  });
}

/** Sends raw bytes to the proxy and collects everything until the proxy closes. */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let out = '';
    s.on('data', (d) => (out += d.toString('utf8')));
    s.on('error', reject);
    s.on('close', () => resolve(out));
    s.write(text);
  });
}

/** Opens a CONNECT tunnel and resolves with the socket once the 200 arrived. */
function openTunnel(port: number, target: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    let head = '';
    const onData = (d: Buffer) => {
      head += d.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      s.off('data', onData);
      if (!head.startsWith('HTTP/1.1 200')) {
        s.destroy();
        reject(new Error(`tunnel refused: ${head}`));
        return;
      }
      resolve(s);
    };
    s.on('data', onData);
    s.on('error', reject);
    s.on('close', () => reject(new Error(`closed before the tunnel opened: ${head}`)));
    s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  });
}

function roundTrip(s: net.Socket, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const onData = (d: Buffer) => {
      got += d.toString('utf8');
      if (got.length >= text.length) {
        s.off('data', onData);
        resolve(got);
      }
    };
    s.on('data', onData);
    s.write(text);
  });
}

function collect(proxy: EgressProxy): EgressEvent[] {
  const events: EgressEvent[] = [];
  proxy.onDidConnect((e) => events.push(e));
  return events;
}


beforeAll(async () => {
  echo = net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  echoPort = (echo.address() as net.AddressInfo).port;
  web = http.createServer((req, res) => {
    webSeen.push({ url: req.url ?? '', headers: req.headers });
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      res.end(`hello ${req.method} ${req.url} ${body}`);
    });
  });
  await new Promise<void>((r) => web.listen(0, '127.0.0.1', r));
  webPort = (web.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await new Promise((r) => echo.close(r));
  await new Promise((r) => web.close(r));
});

const proxies: EgressProxy[] = [];
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
  webSeen = [];
});

async function proxyWith(allow: string[], extra: Partial<EgressProxyOptions> = {}): Promise<EgressProxy> {
  const p = await startProxy(allow, extra);
  proxies.push(p);
  return p;
}

describe('EgressProxy: allowed traffic', () => {
  it('tunnels CONNECT to an allowed name and port, and records bytes', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`]);
    const events = collect(proxy);
    expect(proxy.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const s = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    expect(await roundTrip(s, 'ping-through-tunnel')).toBe('ping-through-tunnel');
    s.end();
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    const e = events[0] as EgressEvent;
    expect(e).toMatchObject({ runId: 'run-test', host: 'echo.test', port: echoPort, method: 'CONNECT', allowed: true, address: '127.0.0.1' });
    expect(e.bytesUp).toBe('ping-through-tunnel'.length);
    expect(e.bytesDown).toBe('ping-through-tunnel'.length);
    expect(e.reason).toBeUndefined();
    expect(e.durationMs).toBeGreaterThan(0);
  });

  it('tries the checked addresses in order and never looks the name up twice', async () => {
    let lookups = 0;
    const proxy = await proxyWith([`multi.test:${echoPort}`, `dead.test:${echoPort}`], {
      resolve: async (h) => {
        lookups += 1;
        return resolver(h);
      },
    });
    const events = collect(proxy);
    // Nothing listens on 127.0.0.2:<port>: the proxy falls through to 127.0.0.1.
    const s = await openTunnel(proxy.port, `multi.test:${echoPort}`);
    expect(await roundTrip(s, 'x')).toBe('x');
    s.end();
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]?.address).toBe('127.0.0.1');
    expect(lookups).toBe(1);
    const dead = await rawExchange(proxy.port, `CONNECT dead.test:${echoPort} HTTP/1.1\r\nHost: dead.test:${echoPort}\r\n\r\n`);
    expect(dead).toMatch(/^HTTP\/1\.1 502/);
    expect(dead).toContain('ECONNREFUSED');
    await vi.waitFor(() => expect(events.length === 2).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[1]).toMatchObject({ allowed: true, reason: 'connect failed (127.0.0.3: ECONNREFUSED)' });
  });

  it('looks a name up once for many connections at once, and checks every answer it reuses (issue 44)', async () => {
    let lookups = 0;
    const answer = ['127.0.0.1'];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const proxy = await proxyWith([`echo.test:${echoPort}`], {
      resolve: async () => {
        lookups += 1;
        await gate;
        return answer;
      },
    });
    // 100 tunnels asked for while the one lookup is still out: they all share it.
    const opening = Array.from({ length: 100 }, () => openTunnel(proxy.port, `echo.test:${echoPort}`));
    await vi.waitFor(() => expect(lookups).toBe(1), { timeout: 4000, interval: 10 });
    release();
    const tunnels = await Promise.all(opening);
    expect(lookups).toBe(1);
    for (const t of tunnels) t.destroy();
    // The answer is reused for a few seconds, and its addresses are checked again on each use.
    (await openTunnel(proxy.port, `echo.test:${echoPort}`)).destroy();
    expect(lookups).toBe(1);
  });

  it('checks a reused answer again: a refused address stays refused (issue 44)', async () => {
    let lookups = 0;
    const proxy = await proxyWith(['private.test:443'], {
      resolve: async (h) => {
        lookups += 1;
        return resolver(h);
      },
    });
    for (let i = 0; i < 2; i++) {
      expect(await rawExchange(proxy.port, 'CONNECT private.test:443 HTTP/1.1\r\nHost: private.test:443\r\n\r\n')).toMatch(/^HTTP\/1\.1 403[\s\S]*10\.20\.30\.40/);
    }
    expect(lookups).toBe(1);
  });

  it('matches wildcards on subdomains only', async () => {
    const proxy = await proxyWith([`*.echo.test:${echoPort}`]);
    const s1 = await openTunnel(proxy.port, `a.echo.test:${echoPort}`);
    const s2 = await openTunnel(proxy.port, `deep.a.echo.test:${echoPort}`);
    s1.destroy();
    s2.destroy();
    const bare = await rawExchange(proxy.port, `CONNECT echo.test:${echoPort} HTTP/1.1\r\nHost: echo.test:${echoPort}\r\n\r\n`);
    expect(bare).toMatch(/^HTTP\/1\.1 403/);
  });

  it('forwards plain HTTP in absolute form without adding credentials', async () => {
    const proxy = await proxyWith([`web.test:${webPort}`]);
    const events = collect(proxy);
    const reply = await rawExchange(
      proxy.port,
      `POST http://web.test:${webPort}/pkg?x=1 HTTP/1.1\r\nHost: web.test:${webPort}\r\nProxy-Authorization: Basic c2VjcmV0\r\n` +
        `Content-Length: 4\r\nConnection: close\r\n\r\nbody`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 200/);
    expect(reply).toContain(`hello POST /pkg?x=1 body`);
    expect(webSeen).toHaveLength(1);
    expect(webSeen[0]?.headers.host).toBe(`web.test:${webPort}`);
    // Proxy credentials are for the proxy, and nothing is injected toward the destination.
    expect(webSeen[0]?.headers['proxy-authorization']).toBeUndefined();
    expect(webSeen[0]?.headers.authorization).toBeUndefined();
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]).toMatchObject({ host: 'web.test', port: webPort, method: 'POST', allowed: true, bytesUp: 4 });
    expect(events[0]?.bytesDown).toBe('hello POST /pkg?x=1 body'.length);
  });

  it('allowOnce admits exactly one attempt; allowForRun admits the rest of the run', async () => {
    const proxy = await proxyWith([]);
    const events = collect(proxy);
    const req = `CONNECT other.test:${echoPort} HTTP/1.1\r\nHost: other.test:${echoPort}\r\n\r\n`;
    expect(await rawExchange(proxy.port, req)).toMatch(/^HTTP\/1\.1 403/);
    proxy.allowOnce('other.test', echoPort);
    (await openTunnel(proxy.port, `other.test:${echoPort}`)).destroy();
    expect(await rawExchange(proxy.port, req)).toMatch(/^HTTP\/1\.1 403/);
    proxy.allowForRun(`other.test:${echoPort}`);
    (await openTunnel(proxy.port, `other.test:${echoPort}`)).destroy();
    (await openTunnel(proxy.port, `other.test:${echoPort}`)).destroy();
    await vi.waitFor(() => expect(events.length === 5).toBe(true), { timeout: 4000, interval: 10 });
    expect(events.map((e) => e.allowed).sort()).toEqual([false, false, true, true, true]);
  });

  it('allowForProject persists under the project dir and the next run starts with it', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-net-'));
    try {
      const store = new ProjectNetworkStore('/some/project', home);
      const first = await proxyWith([], { projectStore: store });
      await first.allowForProject(`web.test:${webPort}`);
      expect(store.file.startsWith(path.join(home, 'projects'))).toBe(true);
      expect(await store.load()).toEqual([{ host: 'web.test', ports: [webPort] }]);
      const second = await proxyWith([], { projectStore: new ProjectNetworkStore('/some/project', home) });
      expect(second.entries()).toEqual([{ host: 'web.test', ports: [webPort] }]);
      const reply = await rawExchange(second.port, `GET http://web.test:${webPort}/ HTTP/1.1\r\nHost: web.test:${webPort}\r\nConnection: close\r\n\r\n`);
      expect(reply).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

describe('EgressProxy: project entries added from another process', () => {
  it('take effect in the running run', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-net-'));
    try {
      const proxy = await proxyWith([], { projectStore: new ProjectNetworkStore('/other/project', home) });
      const req = `GET http://web.test:${webPort}/ HTTP/1.1\r\nHost: web.test:${webPort}\r\nConnection: close\r\n\r\n`;
      expect(await rawExchange(proxy.port, req)).toMatch(/^HTTP\/1\.1 403/);
      // What `airlock network allow web.test:<port> --project /other/project` does.
      await new ProjectNetworkStore('/other/project', home).add(`web.test:${webPort}`);
      expect(await rawExchange(proxy.port, req)).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      await rm(home, { recursive: true, force: true });
    }
  });
});

describe('EgressProxy: refusals', () => {
  async function refusedConnect(proxy: EgressProxy, target: string, host = target): Promise<string> {
    return rawExchange(proxy.port, `CONNECT ${target} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  }

  it('answers a name not on the list with 403 and the allow hint, and records it', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`]);
    const events = collect(proxy);
    const reply = await refusedConnect(proxy, 'other.test:443');
    expect(reply).toMatch(/^HTTP\/1\.1 403 Forbidden/);
    expect(reply).toContain("airlock: other.test:443 is not on this run's allowlist — allow it from the run view or with `airlock network allow other.test:443 --run run-test`");
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]).toMatchObject({ host: 'other.test', port: 443, method: 'CONNECT', allowed: false, reason: 'not on the allowlist', bytesUp: 0, bytesDown: 0 });
  });

  it.each([
    ['127.0.0.1'],
    ['10.0.0.1'],
    ['169.254.169.254'],
    ['2130706433'],
    ['0x7f000001'],
    ['0x7f.1'],
    ['0177.0.0.1'],
    ['127.1'],
    ['[::1]'],
    ['[::ffff:127.0.0.1]'],
    ['[fe80::1%25eth0]'],
  ])('refuses the IP literal %s even when the port is allowed', async (host) => {
    const proxy = await proxyWith([`echo.test:${echoPort}`]);
    const events = collect(proxy);
    const reply = await refusedConnect(proxy, `${host}:${echoPort}`);
    expect(reply).toMatch(/^HTTP\/1\.1 403/);
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]?.allowed).toBe(false);
    expect(events[0]?.reason).toMatch(/IP address literal|not host:port|characters/);
  });

  it.each([
    ['private.test', /private address \(10\.20\.30\.40\)/],
    ['meta.test', /metadata address \(169\.254\.169\.254\)/],
    ['mixed.test', /private address \(192\.168\.1\.10\)/],
    ['mapped.test', /private address \(::ffff:10\.0\.0\.1\)/],
    ['ula.test', /unique-local/],
  ])('refuses the allowed name %s when it resolves into a blocked range', async (host, reason) => {
    const proxy = await proxyWith([`${host}:${echoPort}`]);
    const events = collect(proxy);
    const reply = await refusedConnect(proxy, `${host}:${echoPort}`);
    expect(reply).toMatch(/^HTTP\/1\.1 403/);
    expect(reply).toContain('which the sandbox may not reach');
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]?.reason).toMatch(reason);
  });

  it('refuses loopback targets without the test-only override', async () => {
    const proxy = await EgressProxy.start({ runId: 'run-test', allow: [`echo.test:${echoPort}`], resolve: resolver });
    proxies.push(proxy);
    const reply = await refusedConnect(proxy, `echo.test:${echoPort}`);
    expect(reply).toMatch(/^HTTP\/1\.1 403/);
    expect(reply).toContain('loopback address (127.0.0.1)');
  });

  it('ignores the override when it arrives as JSON (settings cannot carry a symbol)', async () => {
    const fromSettings = JSON.parse(JSON.stringify({ runId: 'run-test', allow: [`echo.test:${echoPort}`], allowLoopbackTargetsForTests: true }));
    const proxy = await EgressProxy.start({ ...fromSettings, resolve: resolver });
    proxies.push(proxy);
    expect(await refusedConnect(proxy, `echo.test:${echoPort}`)).toContain('loopback address');
  });

  it('refuses CONNECT to a port not allowed for the host', async () => {
    const proxy = await proxyWith(['echo.test']);
    const events = collect(proxy);
    const reply = await refusedConnect(proxy, 'echo.test:22');
    expect(reply).toMatch(/^HTTP\/1\.1 403/);
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]?.reason).toBe('port 22 is not allowed for echo.test (CONNECT)');
  });

  it('refuses a name under .invalid and other special-use names before any lookup', async () => {
    let lookups = 0;
    const proxy = await EgressProxy.start({
      runId: 'run-test',
      allow: ['*.example.invalid', 'localhost', '*.svc.local'],
      resolve: async (h) => {
        lookups += 1;
        return resolver(h);
      },
    });
    proxies.push(proxy);
    for (const target of ['x.example.invalid:443', 'localhost:443', 'a.svc.local:443']) {
      const reply = await refusedConnect(proxy, target);
      expect(reply).toMatch(/^HTTP\/1\.1 403/);
      expect(reply).toContain('special-use name');
    }
    expect(lookups).toBe(0);
  });

  it('answers 502 when an allowed name does not resolve', async () => {
    const proxy = await proxyWith(['nowhere.test']);
    const events = collect(proxy);
    const reply = await refusedConnect(proxy, 'nowhere.test:443');
    expect(reply).toMatch(/^HTTP\/1\.1 502/);
    expect(reply).toContain('could not resolve nowhere.test (ENOTFOUND)');
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]).toMatchObject({ allowed: true, reason: 'DNS lookup failed (ENOTFOUND)' });
  });

  it('refuses a Host header that disagrees with the target (smuggling)', async () => {
    const proxy = await proxyWith([`web.test:${webPort}`, `echo.test:${echoPort}`]);
    const events = collect(proxy);
    const viaHttp = await rawExchange(
      proxy.port,
      `GET http://web.test:${webPort}/ HTTP/1.1\r\nHost: private.test\r\nConnection: close\r\n\r\n`,
    );
    expect(viaHttp).toMatch(/^HTTP\/1\.1 403/);
    expect(viaHttp).toContain('does not match the request target');
    const viaConnect = await refusedConnect(proxy, `echo.test:${echoPort}`, `other.test:${echoPort}`);
    expect(viaConnect).toMatch(/^HTTP\/1\.1 403/);
    const twoHosts = await rawExchange(
      proxy.port,
      `GET http://web.test:${webPort}/ HTTP/1.1\r\nHost: web.test:${webPort}\r\nHost: other.test\r\nConnection: close\r\n\r\n`,
    );
    expect(twoHosts).toMatch(/^HTTP\/1\.1 (400|403)/);
    expect(webSeen).toHaveLength(0);
    await vi.waitFor(() => expect(events.length === 3).toBe(true), { timeout: 4000, interval: 10 });
    expect(events.every((e) => !e.allowed)).toBe(true);
  });

  it.each([
    [`http://web.test@private.test/`, /user information/],
    [`http://user:pw@web.test/`, /user information/],
    [`http://web.test..private.test/`, /not a valid host name/],
    [`http://web.test%2eprivate.test/`, /characters/],
    [`https://web.test/`, /must use CONNECT/],
    [`/relative/path`, /absolute-form/],
  ])('refuses the request target %s', async (target, reason) => {
    const proxy = await proxyWith(['web.test']);
    const events = collect(proxy);
    const reply = await rawExchange(proxy.port, `GET ${target} HTTP/1.1\r\nConnection: close\r\n\r\n`);
    expect(reply).toMatch(/^HTTP\/1\.1 40[03]/);
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]?.allowed).toBe(false);
    expect(events[0]?.reason).toMatch(reason);
  });

  it('refuses a request with both Content-Length and Transfer-Encoding (body smuggling)', async () => {
    const proxy = await proxyWith([`web.test:${webPort}`]);
    const reply = await rawExchange(
      proxy.port,
      `POST http://web.test:${webPort}/ HTTP/1.1\r\nHost: web.test:${webPort}\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://private.test/ HTTP/1.1\r\n\r\n`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 400/);
    expect(webSeen).toHaveLength(0);
  });

  it('caps concurrent client connections', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`], { maxConnections: 2 });
    const a = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    const b = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    await expect(openTunnel(proxy.port, `echo.test:${echoPort}`)).rejects.toBeDefined();
    a.destroy();
    b.destroy();
  });

  it('answers 431 to oversize headers', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`], { maxHeaderBytes: 4096 });
    const events = collect(proxy);
    const reply = await rawExchange(proxy.port, `CONNECT echo.test:${echoPort} HTTP/1.1\r\nX-Big: ${'a'.repeat(8000)}\r\n\r\n`);
    expect(reply).toMatch(/^HTTP\/1\.1 431/);
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]?.reason).toBe('request head too large');
  });

  it('refuses WebSocket upgrades over plain HTTP', async () => {
    const proxy = await proxyWith([`web.test:${webPort}`]);
    const reply = await rawExchange(
      proxy.port,
      `GET http://web.test:${webPort}/ws HTTP/1.1\r\nHost: web.test:${webPort}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`,
    );
    expect(reply).toMatch(/^HTTP\/1\.1 403/);
    expect(webSeen).toHaveLength(0);
  });
});

describe('EgressProxy: load', () => {
  it('holds 100 concurrent tunnels', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`]);
    const events = collect(proxy);
    const tunnels = await Promise.all(Array.from({ length: 100 }, () => openTunnel(proxy.port, `echo.test:${echoPort}`)));
    expect(proxy.activeConnections).toBeGreaterThanOrEqual(200);
    const replies = await Promise.all(tunnels.map((s, i) => roundTrip(s, `message-${i}-`.padEnd(200, 'x'))));
    replies.forEach((r, i) => expect(r).toBe(`message-${i}-`.padEnd(200, 'x')));
    for (const s of tunnels) s.end();
    await vi.waitFor(() => expect(events.length === 100).toBe(true), { timeout: 4000, interval: 10 });
    expect(events.every((e) => e.allowed && e.bytesUp === 200 && e.bytesDown === 200)).toBe(true);
  });

  it('answers every client that half-closes right after its request: refused, forwarded or tunnelled (issue 44)', async () => {
    const proxy = await proxyWith([`web.test:${webPort}`, `echo.test:${echoPort}`]);
    /** Writes the request, half-closes at once, and keeps reading until the proxy closes. */
    const halfClosed = (text: string) =>
      new Promise<{ reply: string; error?: string }>((resolve) => {
        const s = net.connect({ port: proxy.port, host: '127.0.0.1', allowHalfOpen: true });
        let reply = '';
        let error: string | undefined;
        s.on('data', (d: Buffer) => (reply += d.toString('utf8')));
        s.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
        s.on('close', () => resolve(error ? { reply, error } : { reply }));
        s.end(text);
      });
    const kinds = {
      refused: 'GET http://blocked.invalid/ HTTP/1.1\r\nHost: blocked.invalid\r\n\r\n',
      denied: 'GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n',
      forwarded: `GET http://web.test:${webPort}/half HTTP/1.1\r\nHost: web.test:${webPort}\r\n\r\n`,
      tunnelled: `CONNECT echo.test:${echoPort} HTTP/1.1\r\nHost: echo.test:${echoPort}\r\n\r\nping`,
    };
    for (const [kind, text] of Object.entries(kinds)) {
      const results = await Promise.all(Array.from({ length: 100 }, () => halfClosed(text)));
      const expected = kind === 'forwarded' ? /^HTTP\/1\.1 200[\s\S]*hello GET \/half \r\n0\r\n\r\n$/ : kind === 'tunnelled' ? /^HTTP\/1\.1 200[\s\S]*\r\n\r\nping$/ : /^HTTP\/1\.1 403[\s\S]*airlock: /;
      const wrong = results.filter((r) => r.error || !expected.test(r.reply));
      expect(wrong.length, `${kind}: ${JSON.stringify(wrong[0])}`).toBe(0);
    }
  });

  it('lets a tunnel go as soon as its server closed first and the client closed too, not at the idle timeout (issue 44)', async () => {
    // The server answers and closes at once; each client reads to the end, then, once the server's
    // side is gone, sends its last bytes and closes (a TLS client's close_notify: what npm does).
    let serverClosed = 0;
    const closer = net.createServer((socket) => {
      socket.on('close', () => (serverClosed += 1));
      socket.end('bye');
    });
    await new Promise<void>((r) => closer.listen(0, '127.0.0.1', r));
    const closerPort = (closer.address() as net.AddressInfo).port;
    try {
      const proxy = await proxyWith([`other.test:${closerPort}`], { idleTimeoutMs: 600_000 });
      const events = collect(proxy);
      const replies: string[] = [];
      for (let i = 1; i <= 5; i++) {
        const s = net.connect({ port: proxy.port, host: '127.0.0.1', allowHalfOpen: true });
        let got = '';
        s.on('data', (d: Buffer) => (got += d.toString('latin1')));
        s.on('error', (e: NodeJS.ErrnoException) => (got += ` ERR ${e.code ?? e.message}`));
        const ended = new Promise<void>((r) => s.once('end', () => r()));
        const closed = new Promise<void>((r) => s.once('close', () => r()));
        s.write(`CONNECT other.test:${closerPort} HTTP/1.1\r\nHost: other.test:${closerPort}\r\n\r\n`);
        await ended;
        await vi.waitFor(() => expect(serverClosed).toBe(i), { timeout: 10_000, interval: 5 });
        s.end('last words');
        await closed;
        replies.push(got);
      }
      expect(replies.filter((r) => !/^HTTP\/1\.1 200[\s\S]*\r\n\r\nbye$/.test(r))).toEqual([]);
      // Every tunnel is over on the proxy too: it holds none of its maxConnections and ended for no
      // reason (before the fix each waited for the idle timeout, and npm's used all 512).
      await vi.waitFor(() => expect(proxy.activeConnections).toBe(0), { timeout: 10_000, interval: 20 });
      await vi.waitFor(() => expect(events).toHaveLength(5), { timeout: 10_000, interval: 20 });
      expect(events.filter((e) => e.reason)).toEqual([]);
    } finally {
      await new Promise<void>((r) => closer.close(() => r()));
    }
  });

  it('serves others while a slow client dribbles its request head, then cuts the idle one off', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`], { handshakeTimeoutMs: 400 });
    const events = collect(proxy);
    const slow = net.connect(proxy.port, '127.0.0.1');
    let slowReply = '';
    slow.on('data', (d) => (slowReply += d.toString()));
    const slowClosed = new Promise<void>((r) => slow.on('close', () => r()));
    slow.write('CONNECT echo.t');
    // While the slow head is pending, other clients are served normally.
    const fast = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    expect(await roundTrip(fast, 'fast')).toBe('fast');
    fast.end();
    await slowClosed;
    expect(slowReply).toMatch(/^HTTP\/1\.1 408/);
    await vi.waitFor(() => expect(events.some((e) => e.reason === 'request head not received in time')).toBe(true), { timeout: 4000, interval: 10 });
  });

  it('answers a silent client 408 and closes it', async () => {
    const proxy = await proxyWith([], { handshakeTimeoutMs: 300 });
    const reply = await new Promise<string>((resolve) => {
      const s = net.connect(proxy.port, '127.0.0.1');
      let out = '';
      s.on('data', (d) => (out += d.toString()));
      s.on('close', () => resolve(out));
    });
    expect(reply).toMatch(/^HTTP\/1\.1 408/);
  });

  it('closes an idle tunnel and records why', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`], { idleTimeoutMs: 300 });
    const events = collect(proxy);
    const s = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    await new Promise<void>((r) => s.on('close', () => r()));
    await vi.waitFor(() => expect(events.length === 1).toBe(true), { timeout: 4000, interval: 10 });
    expect(events[0]).toMatchObject({ allowed: true, reason: 'idle timeout', bytesUp: 0, bytesDown: 0 });
  });

  it('a client that stops reading does not stall other tunnels', async () => {
    const proxy = await proxyWith([`echo.test:${echoPort}`]);
    const stalled = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    stalled.pause();
    // Far more than socket buffers hold: the echo back-pressures into this tunnel only.
    const big = Buffer.alloc(8 * 1024 * 1024, 0x61);
    stalled.write(big);
    const other = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    expect(await roundTrip(other, 'still-flowing')).toBe('still-flowing');
    other.destroy();
    stalled.destroy();
  });

  it('close() cuts open tunnels and still reports them', async () => {
    const proxy = await startProxy([`echo.test:${echoPort}`]);
    const events = collect(proxy);
    const s = await openTunnel(proxy.port, `echo.test:${echoPort}`);
    const closed = new Promise<void>((r) => s.on('close', () => r()));
    await proxy.close();
    await closed;
    expect(events).toHaveLength(1);
    expect(events[0]?.allowed).toBe(true);
  });
});
