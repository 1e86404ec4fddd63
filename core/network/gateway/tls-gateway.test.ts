/**
 * The intercepting gateway behind a real egress proxy, against real TLS servers on loopback (under
 * made-up `.test` names only the injected resolver knows). The upstream's own test CA is passed to
 * the gateway explicitly; verification stays on.
 */
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Secret } from '../../keys/secret';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxy, type EgressEvent } from '../egress-proxy';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ProjectNetworkStore } from '../project-network-store';
import { CredentialBroker } from './credential-broker';
import { NetworkApprovals, type NetworkApprovalRequest, type NetworkApprovalResolved } from './network-approvals';
import { RunCa } from './run-ca';
import { RuleSet } from './rules';
import { normalizeBinding } from './secret-store';
import { TlsGateway } from './tls-gateway';

const TOKEN = 'ghp_canaryTOKENvalue0123456789abcdef';

interface Seen {
  host: string;
  method: string;
  url: string;
  authorization?: string;
  body: number;
}

async function startUpstream(ca: RunCa, hosts: string[]): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  let lastAuth = '';
  const ctx = new Map<string, tls.SecureContext>();
  for (const h of hosts) ctx.set(h, tls.createSecureContext({ key: ca.leafKeyPem, cert: await ca.leafFor(h) }));
  const server = https.createServer({ key: ca.leafKeyPem, cert: await ca.leafFor(hosts[0] as string), SNICallback: (name, cb) => cb(null, ctx.get(name)) }, (req, res) => {
    let body = 0;
    req.on('data', (c: Buffer) => (body += c.length));
    req.on('end', () => {
      seen.push({ host: req.headers.host ?? '', method: req.method ?? '', url: req.url ?? '', ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}), body });
      const auth = req.headers.authorization;
      if (auth) lastAuth = auth;
      if (req.url === '/echo-auth') {
        res.end(`you sent ${auth ?? 'nothing'}`);
      } else if (req.url === '/echo-auth-gzip') {
        // Compressed although the gateway asked for identity.
        res.writeHead(200, { 'Content-Encoding': 'gzip', 'X-Echo': auth ?? '' });
        res.end(zlib.gzipSync(`you sent ${auth ?? 'nothing'}`));
      } else if (req.url === '/echo-auth-odd') {
        res.writeHead(200, { 'Content-Encoding': 'zstd' });
        res.end(`you sent ${auth ?? 'nothing'}`);
      } else if (req.url === '/stored') {
        // Echoes what an earlier request carried: no secret in this one.
        res.writeHead(200, `Seen ${lastAuth}`, { Location: `https://elsewhere.test/?t=${encodeURIComponent(lastAuth)}` });
        res.end(`earlier you sent ${lastAuth}`);
      } else if (req.url?.startsWith('/big')) {
        res.writeHead(200, { 'Content-Length': 8 * 1024 * 1024 });
        const chunk = Buffer.alloc(64 * 1024, 7);
        let left = 128;
        const pump = () => {
          while (left > 0) {
            left--;
            if (!res.write(chunk)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
      } else res.end(`ok ${req.method} ${req.url} ${body}`);
    });
  });
  server.on('upgrade', (req, socket) => {
    if (req.headers.authorization) lastAuth = req.headers.authorization;
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    if (req.url === '/ws-stored') socket.write(`stored ${lastAuth}|`);
    socket.on('data', (d: Buffer) => socket.write(d));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    seen,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Opens a CONNECT tunnel through the proxy and TLS inside it, trusting only `ca`, offering `alpn`. */
function tunnel(proxyPort: number, host: string, port: number, ca: string, alpn = ['http/1.1']): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: `${host}:${port}`, headers: { host: `${host}:${port}` } });
    req.on('connect', (res, socket) => {
      if (res.statusCode !== 200) {
        let text = "";
        socket.on("data", (d: Buffer) => (text += d.toString()));
        socket.on("end", () => reject(new Error(`CONNECT ${res.statusCode} ${text}`)));
        return;
      }
      const s = tls.connect({ socket, servername: host, ca, ALPNProtocols: alpn }, () => resolve(s));
      s.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function request(socket: tls.TLSSocket, host: string, opts: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer }): Promise<{ status: number; body: Buffer; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const agent = new https.Agent({ maxSockets: 1 });
    (agent as unknown as { createConnection: () => net.Socket }).createConnection = () => socket;
    const req = https.request({ host, method: opts.method ?? 'GET', path: opts.path, headers: { host, ...opts.headers }, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), headers: res.headers }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

describe('TLS gateway (interception only where a rule or secret needs it)', () => {
  let upstreamCa: RunCa;
  let runCa: RunCa;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let proxy: EgressProxy;
  let broker: CredentialBroker;
  const events: EgressEvent[] = [];
  const HOSTS = ['api.airlock.test', 'ro.airlock.test', 'plain.airlock.test', 'other.airlock.test'];

  beforeAll(async () => {
    [upstreamCa, runCa] = await Promise.all([RunCa.create('upstream-test'), RunCa.create('run-test')]);
    upstream = await startUpstream(upstreamCa, HOSTS);
    broker = new CredentialBroker([
      { binding: normalizeBinding({ name: 'gh', hosts: ['api.airlock.test'], forms: [{ type: 'bearer' }, { type: 'basic', username: 'x-access-token' }], env: ['GH_TOKEN'] }), value: new Secret(TOKEN) },
    ]);
    const gateway = new TlsGateway({
      ca: runCa,
      rules: new RuleSet(['ro.airlock.test deny /admin/**', 'ro.airlock.test read-only', 'other.airlock.test allow GET']),
      broker,
      upstreamCa: [upstreamCa.certificatePem],
      idleTimeoutMs: 30_000,
    });
    proxy = await EgressProxy.start({
      runId: 'gw-test',
      allow: HOSTS.map((h) => `${h}:${upstream.port}`),
      resolve: async () => ['127.0.0.1'],
      gateway,
      [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
    });
    proxy.onDidConnect((e) => events.push(e));
  });

  afterAll(async () => {
    await proxy?.close();
    await upstream?.close();
  });

  it('a host with no rule and no secret stays a plain tunnel: the client sees the upstream certificate', async () => {
    // Trusting only the upstream's CA works, so the gateway did not terminate TLS.
    const s = await tunnel(proxy.port, 'plain.airlock.test', upstream.port, upstreamCa.certificatePem);
    expect(s.getPeerCertificate().issuer.CN).toContain('upstream-test');
    const r = await request(s, 'plain.airlock.test', { path: '/x' });
    expect(r.body.toString()).toBe('ok GET /x 0');
    s.destroy();
  });

  it('a read-only host is intercepted with the run CA; GET passes, POST gets a readable 403, both audited', async () => {
    await expect(tunnel(proxy.port, 'ro.airlock.test', upstream.port, upstreamCa.certificatePem)).rejects.toThrow();
    const s = await tunnel(proxy.port, 'ro.airlock.test', upstream.port, runCa.certificatePem);
    expect(s.getPeerCertificate().issuer.CN).toContain('run-test');
    expect(s.alpnProtocol).toBe('http/1.1');
    const ok = await request(s, 'ro.airlock.test', { path: '/repo?token=abc&page=2' });
    expect(ok.body.toString()).toBe('ok GET /repo?token=abc&page=2 0');
    const before = upstream.seen.length;
    const s2 = await tunnel(proxy.port, 'ro.airlock.test', upstream.port, runCa.certificatePem);
    const denied = await request(s2, 'ro.airlock.test', { method: 'POST', path: '/repo', body: Buffer.from('hello') });
    expect(denied.status).toBe(403);
    expect(denied.body.toString()).toContain(`POST https://ro.airlock.test:${upstream.port}/repo refused — POST is not allowed (read-only: GET, HEAD, OPTIONS and git fetch) (rule: ro.airlock.test read-only)`);
    expect(denied.body.toString()).toContain('To go on:');
    expect(upstream.seen.length).toBe(before);
    await vi.waitFor(() => expect(events.filter((e) => e.host === 'ro.airlock.test').length).toBeGreaterThanOrEqual(2));
    const ro = events.filter((e) => e.host === 'ro.airlock.test');
    expect(ro[0]).toMatchObject({ intercepted: true, method: 'GET', path: '/repo?token=…&page=…', status: 200, allowed: true, rule: 'ro.airlock.test read-only' });
    expect(ro[0]!.bytesDown).toBeGreaterThan(0);
    expect(ro[1]).toMatchObject({ intercepted: true, method: 'POST', status: 403, allowed: false, rule: 'ro.airlock.test read-only' });
    s.destroy();
    s2.destroy();
  });

  it('the placeholder becomes the secret toward the bound host only, and an echo of it is scrubbed', async () => {
    const placeholder = broker.env().GH_TOKEN as string;
    expect(placeholder).not.toContain(TOKEN);
    const s = await tunnel(proxy.port, 'api.airlock.test', upstream.port, runCa.certificatePem);
    const r = await request(s, 'api.airlock.test', { path: '/echo-auth', headers: { authorization: `Bearer ${placeholder}` } });
    expect(upstream.seen.at(-1)?.authorization).toBe(`Bearer ${TOKEN}`);
    expect(r.body.toString()).toBe(`you sent Bearer ${placeholder}`);
    expect(r.body.toString()).not.toContain(TOKEN);
    s.destroy();

    const before = upstream.seen.length;
    const o = await tunnel(proxy.port, 'other.airlock.test', upstream.port, runCa.certificatePem);
    const refused = await request(o, 'other.airlock.test', { path: '/echo-auth', headers: { authorization: `Bearer ${placeholder}` } });
    expect(refused.status).toBe(403);
    expect(refused.body.toString()).toContain('the placeholder of secret "gh" was sent to other.airlock.test, which it is not bound to');
    expect(upstream.seen.length).toBe(before);
    o.destroy();

    // The tunnel is to the bound host, but the request names another (domain fronting): refused.
    const f = await tunnel(proxy.port, 'api.airlock.test', upstream.port, runCa.certificatePem);
    const fronted = await request(f, 'other.airlock.test', { path: '/echo-auth', headers: { authorization: `Bearer ${placeholder}` } });
    expect(fronted.status).toBe(403);
    expect(fronted.body.toString()).toContain('does not name api.airlock.test');
    expect(upstream.seen.length).toBe(before);
    f.destroy();
    await vi.waitFor(() => expect(events.some((e) => e.host === 'other.airlock.test' && !e.allowed)).toBe(true));
    expect(events.find((e) => e.host === 'api.airlock.test')).toMatchObject({ secret: 'gh', status: 200, allowed: true });
    expect(events.find((e) => e.host === 'other.airlock.test')).toMatchObject({ secret: 'gh', status: 403, allowed: false });
    expect(JSON.stringify(events)).not.toContain(TOKEN);
  });

  it('a deny on /admin/** holds however the path is spelt: //admin, ;x, case, %61, encoded slashes; never reaches upstream', async () => {
    const before = upstream.seen.length;
    for (const p of ['//admin/x', '/admin;x/y', '/ADMIN/x', '/%61dmin/x', '/x/..;/admin/y', '/x%2F..%2Fadmin/y', '/x%ff']) {
      const s = await tunnel(proxy.port, 'ro.airlock.test', upstream.port, runCa.certificatePem);
      const r = await request(s, 'ro.airlock.test', { path: p });
      expect(r.status, p).toBe(403);
      s.destroy();
    }
    expect(upstream.seen.length).toBe(before);
    const s = await tunnel(proxy.port, 'ro.airlock.test', upstream.port, runCa.certificatePem);
    expect((await request(s, 'ro.airlock.test', { path: '/administrator' })).status).toBe(200);
    s.destroy();
  });

  it('a plain-HTTP request carrying the placeholder is refused', async () => {
    const placeholder = broker.env().GH_TOKEN as string;
    const r = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port: proxy.port, path: `http://plain.airlock.test:${upstream.port}/x`, headers: { host: `plain.airlock.test:${upstream.port}`, authorization: `Bearer ${placeholder}` } }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        })
        .on('error', reject);
    });
    expect(r.status).toBe(403);
    expect(r.body).toContain('the placeholder of secret "gh" was sent over plain HTTP');
  });

  it('no form of the secret comes back: Basic base64, gzip the gateway did not ask for, a stored echo, an upgrade', async () => {
    const placeholder = broker.env().GH_TOKEN as string;
    const leaks = (text: string) => {
      const b64 = [0, 1, 2].map((shift) => Buffer.concat([Buffer.alloc(shift), Buffer.from(TOKEN)]).toString('base64').slice(4, 24));
      return text.includes(TOKEN) || text.includes(encodeURIComponent(TOKEN)) || b64.some((r) => text.includes(r));
    };
    const basic = `Basic ${Buffer.from(`x-access-token:${placeholder}`).toString('base64')}`;
    const once = async (path: string, headers: Record<string, string> = {}) => {
      const s = await tunnel(proxy.port, 'api.airlock.test', upstream.port, runCa.certificatePem);
      try {
        return await request(s, 'api.airlock.test', { path, headers });
      } finally {
        s.destroy();
      }
    };
    const echoed = await once('/echo-auth', { authorization: basic });
    expect(upstream.seen.at(-1)?.authorization).toBe(`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`);
    expect(echoed.body.toString()).toMatch(/^you sent Basic /);
    expect(leaks(echoed.body.toString())).toBe(false);

    // Asked for identity, answered gzip anyway: decoded, then scrubbed (headers too).
    const gz = await once('/echo-auth-gzip', { authorization: `Bearer ${placeholder}`, 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBeUndefined();
    expect(gz.body.toString()).toBe(`you sent Bearer ${placeholder}`);
    expect(String(gz.headers['x-echo'])).toBe(`Bearer ${placeholder}`);

    // A request without the secret still gets a scrubbed answer (reason phrase, Location, body).
    const stored = await once('/stored');
    expect(stored.body.toString()).toContain('earlier you sent Bearer');
    expect(leaks(stored.body.toString() + JSON.stringify(stored.headers))).toBe(false);

    // An encoding the gateway cannot read is refused, never relayed unread.
    const odd = await once('/echo-auth-odd', { authorization: `Bearer ${placeholder}` });
    expect(odd.status).toBe(502);
    expect(odd.body.toString()).toContain('"zstd" encoding although asked for identity');
    expect(leaks(odd.body.toString())).toBe(false);

    // An upgrade that would carry the secret is refused; one without it is scrubbed byte for byte.
    const u = await tunnel(proxy.port, 'api.airlock.test', upstream.port, runCa.certificatePem);
    u.write(`GET /ws HTTP/1.1\r\nHost: api.airlock.test\r\nAuthorization: Bearer ${placeholder}\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n`);
    const refused = await new Promise<string>((resolve) => {
      let text = '';
      u.on('data', (d: Buffer) => (text += d.toString()));
      u.on('close', () => resolve(text));
    });
    expect(refused).toMatch(/^HTTP\/1.1 403/);
    expect(refused).toContain('cannot carry the secret "gh"');
    const w = await tunnel(proxy.port, 'api.airlock.test', upstream.port, runCa.certificatePem);
    w.write('GET /ws-stored HTTP/1.1\r\nHost: api.airlock.test\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    const streamed = await new Promise<string>((resolve) => {
      let text = '';
      w.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        if (text.endsWith('|')) resolve(text);
      });
    });
    expect(streamed).toMatch(/^HTTP\/1.1 101/);
    expect(streamed).toContain('stored Bearer ****');
    expect(leaks(streamed)).toBe(false);
    w.destroy();
  });

  it('keep-alive, a large download and an upgrade all pass intercepted', async () => {
    const s = await tunnel(proxy.port, 'other.airlock.test', upstream.port, runCa.certificatePem);
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    (agent as unknown as { createConnection: () => net.Socket }).createConnection = () => s;
    const get = (path: string) =>
      new Promise<number>((resolve, reject) => {
        https
          .get({ host: 'other.airlock.test', path, agent }, (res) => {
            let n = 0;
            res.on('data', (c: Buffer) => (n += c.length));
            res.on('end', () => resolve(n));
          })
          .on('error', reject);
      });
    expect(await get('/big')).toBe(8 * 1024 * 1024);
    expect(await get('/a')).toBeGreaterThan(0); // same socket, second request
    agent.destroy();

    const w = await tunnel(proxy.port, 'api.airlock.test', upstream.port, runCa.certificatePem);
    w.write('GET /ws HTTP/1.1\r\nHost: api.airlock.test\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n');
    const echoed = await new Promise<string>((resolve) => {
      let text = '';
      w.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes('\r\n\r\n') && !text.includes('ping')) w.write('ping');
        if (text.endsWith('ping')) resolve(text);
      });
    });
    expect(echoed).toMatch(/^HTTP\/1.1 101/);
    w.destroy();
  });
});

describe('approvals while an intercepted request waits, and agent-proposed rules', () => {
  let upstreamCa: RunCa;
  let runCa: RunCa;
  let upstream: Awaited<ReturnType<typeof startUpstream>>;
  let proxy: EgressProxy;
  let approvals: NetworkApprovals;
  let store: ProjectNetworkStore;
  let home: string;
  const asked: NetworkApprovalRequest[] = [];
  const resolved: NetworkApprovalResolved[] = [];
  const HOST = 'ask.airlock.test';
  /** Answers the next question with `answer` once it is asked. */
  const answerNext = async (answer: 'once' | 'run' | 'project' | 'deny') => {
    const n = resolved.length;
    await vi.waitFor(() => expect(asked.length).toBeGreaterThan(n));
    const q = asked[asked.length - 1] as NetworkApprovalRequest;
    expect(await approvals.answer(q.id, answer)).toBe(true);
    return q;
  };
  /** A proposal, as the sandbox sends it: plain HTTP through the proxy to the reserved name. */
  const propose = (form: Record<string, string>) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const body = new URLSearchParams(form).toString();
      const req = http.request({ host: '127.0.0.1', port: proxy.port, method: 'POST', path: 'http://airlock.invalid/request-access', headers: { host: 'airlock.invalid', 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) } }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end(body);
    });

  beforeAll(async () => {
    [upstreamCa, runCa] = await Promise.all([RunCa.create('upstream-test'), RunCa.create('run-test')]);
    upstream = await startUpstream(upstreamCa, [HOST]);
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-approvals-'));
    store = new ProjectNetworkStore('/nonexistent/project-for-approvals', home);
    const rules = new RuleSet([`${HOST} allow GET /public/**`]);
    let gateway: TlsGateway | undefined;
    approvals = new NetworkApprovals({ rules, projectStore: store, intercepts: (h) => gateway?.intercepts(h) === true });
    approvals.onDidAsk((q) => asked.push(q));
    approvals.onDidResolve((r) => resolved.push(r));
    gateway = new TlsGateway({ ca: runCa, rules, approvals, upstreamCa: [upstreamCa.certificatePem], idleTimeoutMs: 30_000 });
    proxy = await EgressProxy.start({
      runId: 'gw-approvals',
      allow: [`${HOST}:${upstream.port}`],
      resolve: async () => ['127.0.0.1'],
      gateway,
      accessDesk: (body, signal) => approvals.propose(body, upstream.port, signal),
      [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
    });
  });

  afterAll(async () => {
    approvals?.dispose();
    await proxy?.close();
    await upstream?.close();
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('Allow once lets that request through, Deny refuses with the 403, Allow for this project stores the rule and asks no more', async () => {
    const s = await tunnel(proxy.port, HOST, upstream.port, runCa.certificatePem);
    const seen = upstream.seen.length;
    const once = request(s, HOST, { method: 'POST', path: '/items?token=abc', body: Buffer.from('one') });
    const q = await answerNext('once');
    expect(q).toMatchObject({ kind: 'request', host: HOST, method: 'POST', path: '/items?token=…', rule: `${HOST} allow POST /items`, deniedBy: `no rule for ${HOST} matches`, answers: ['once', 'project', 'deny'] });
    expect(upstream.seen.length).toBe(seen); // nothing went upstream while it waited
    expect((await once).body.toString()).toBe('ok POST /items?token=abc 3');

    // Once is once: the same request asks again, and Deny gives the agent the readable 403.
    const s1 = await tunnel(proxy.port, HOST, upstream.port, runCa.certificatePem);
    const denied = request(s1, HOST, { method: 'POST', path: '/items', body: Buffer.from('two') });
    await answerNext('deny');
    const d = await denied;
    expect(d.status).toBe(403);
    expect(d.body.toString()).toContain('the user denied it');
    expect(d.body.toString()).toContain('http://airlock.invalid/request-access');
    expect(upstream.seen.length).toBe(seen + 1);

    const s2 = await tunnel(proxy.port, HOST, upstream.port, runCa.certificatePem);
    const project = request(s2, HOST, { method: 'POST', path: '/items', body: Buffer.from('three') });
    await answerNext('project');
    expect((await project).status).toBe(200);
    expect(await store.loadRules()).toEqual([`${HOST} allow POST /items`]);
    const before = asked.length;
    const s3 = await tunnel(proxy.port, HOST, upstream.port, runCa.certificatePem);
    expect((await request(s3, HOST, { method: 'POST', path: '/items', body: Buffer.from('four') })).status).toBe(200);
    expect(asked.length).toBe(before);
    expect(resolved.map((r) => [r.answer, r.by])).toEqual([['once', 'user'], ['deny', 'user'], ['project', 'user']]);
    for (const x of [s, s1, s2, s3]) x.destroy();
  });

  it('an agent-proposed rule is parsed on the host, shown in its own words, and in force once approved', async () => {
    // What the host will not put to the user: wildcards, hosts without rules, rules wider than a path.
    const before = asked.length;
    expect(await propose({ rule: `*.airlock.test allow GET /x`, reason: 'r' })).toMatchObject({ status: 400 });
    expect(await propose({ rule: `plain.airlock.test allow GET /x`, reason: 'r' })).toMatchObject({ status: 400 });
    expect(await propose({ rule: `${HOST} allow DELETE /**`, reason: 'r' })).toMatchObject({ status: 400 });
    expect(await propose({ rule: `${HOST} read-only`, reason: 'r' })).toMatchObject({ status: 400 });
    expect(await propose({ rule: `${HOST} allow PUT /drafts/*` })).toMatchObject({ status: 400 });
    expect(asked.length).toBe(before);

    const answered = propose({ rule: `  ${HOST.toUpperCase()}   allow put   /drafts/*  `, reason: 'save the draft\u001b[2J\u202e now' });
    const q = await answerNext('run');
    expect(q).toMatchObject({ kind: 'proposal', host: HOST, rule: `${HOST} allow PUT /drafts/*`, reason: 'save the draft [2J now', answers: ['run', 'project', 'deny'] });
    expect(await answered).toEqual({ status: 200, text: `airlock: approved: "${HOST} allow PUT /drafts/*" is in force for this run; retry the request\n` });
    const s = await tunnel(proxy.port, HOST, upstream.port, runCa.certificatePem);
    const n = asked.length;
    expect((await request(s, HOST, { method: 'PUT', path: '/drafts/a', body: Buffer.from('x') })).status).toBe(200);
    expect(asked.length).toBe(n);
    // Refused: the agent is told so, and nothing changes.
    const refused = propose({ rule: `${HOST} allow PATCH /drafts/*`, reason: 'edit' });
    await answerNext('deny');
    expect((await refused).status).toBe(403);
    s.destroy();
  });

  it('an unanswered request is denied when the wait ends, and recorded as a timeout', async () => {
    const short = new NetworkApprovals({ rules: new RuleSet([]), intercepts: () => true, waitMs: 50 });
    const ends: NetworkApprovalResolved[] = [];
    short.onDidResolve((r) => ends.push(r));
    expect(await short.ask({ host: HOST, port: 443, method: 'GET', path: '/x', canonicalPath: '/x', deniedBy: 'r' })).toBe('deny');
    expect(ends).toMatchObject([{ answer: 'deny', by: 'timeout' }]);
    short.dispose();
  });
});
