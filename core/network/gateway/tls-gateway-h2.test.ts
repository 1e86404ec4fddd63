/**
 * HTTP/2 through the intercepting gateway (docs/architecture.md §2.8): real h2-only clients
 * (node:http2, ALPN `h2` only) through a real egress proxy, against an h2-only TLS server and an
 * HTTP/1.1-only one on loopback, under made-up `.test` names only the injected resolver knows. The
 * same rules, secrets, scrubbing, audit and denials as HTTP/1.1.
 */
import http2 from 'node:http2';
import https from 'node:https';
import http from 'node:http';
import type net from 'node:net';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Secret } from '../../keys/secret';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxy, type EgressEvent } from '../egress-proxy';
import { CredentialBroker } from './credential-broker';
import { NetworkApprovals } from './network-approvals';
import { RunCa } from './run-ca';
import { RuleSet } from './rules';
import { normalizeBinding } from './secret-store';
import { TlsGateway } from './tls-gateway';

const TOKEN = 'ghp_h2canaryTOKEN0123456789abcdefXYZ';
const H2_HOST = 'h2.airlock.test';
const H1_HOST = 'h1.airlock.test';

interface Seen {
  protocol: string;
  method: string;
  path: string;
  authority: string;
  authorization?: string;
  body: number;
}

/** Answers `/echo-auth` with the Authorization it got, `/big` with 4 MiB, anything else with a line. */
function answer(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse, seen: Seen[]): void {
  let body = 0;
  req.on('data', (c: Buffer) => (body += c.length));
  req.on('end', () => {
    seen.push({
      protocol: req.httpVersion,
      method: req.method ?? '',
      path: req.url ?? '',
      authority: (req.headers[':authority'] as string | undefined) ?? req.headers.host ?? '',
      ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
      body,
    });
    if (req.url === '/echo-auth') res.end(`you sent ${req.headers.authorization ?? 'nothing'}`);
    else if (req.url === '/echo-auth-gzip') {
      // Compressed although the gateway asked for identity.
      res.writeHead(200, { 'content-encoding': 'gzip' });
      res.end(zlib.gzipSync(`you sent ${req.headers.authorization ?? 'nothing'}`));
    }
    else if (req.url === '/big') res.end(Buffer.alloc(4 * 1024 * 1024, 7));
    else res.end(`ok ${req.method} ${req.url} ${body} over ${req.httpVersion}`);
  });
}

/** Opens a CONNECT tunnel through the proxy and an h2-only TLS session inside it, trusting only `ca`. */
function h2Through(proxyPort: number, host: string, port: number, ca: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: `${host}:${port}`, headers: { host: `${host}:${port}` } });
    req.on('connect', (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT ${res.statusCode}`));
      const session = http2.connect(`https://${host}:${port}`, { createConnection: () => tls.connect({ socket, servername: host, ca, ALPNProtocols: ['h2'] }) });
      session.once('connect', () => resolve(session));
      session.once('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function h2Request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<{ status: number; body: Buffer; headers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers);
    const chunks: Buffer[] = [];
    let head: http2.IncomingHttpHeaders = {};
    stream.on('response', (h) => (head = h));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve({ status: Number(head[':status']), body: Buffer.concat(chunks), headers: head }));
    stream.on('error', reject);
    stream.end(body);
  });
}

describe('TLS gateway over HTTP/2 (h2-only clients and servers)', () => {
  let upstreamCa: RunCa;
  let runCa: RunCa;
  let h2Server: http2.Http2SecureServer;
  let h1Server: https.Server;
  let h2Port = 0;
  let h1Port = 0;
  let proxy: EgressProxy;
  let broker: CredentialBroker;
  let approvals: NetworkApprovals;
  const seen: Seen[] = [];
  const events: EgressEvent[] = [];
  const sessions: http2.ClientHttp2Session[] = [];
  const open = async (host: string, port: number) => {
    const s = await h2Through(proxy.port, host, port, runCa.certificatePem);
    sessions.push(s);
    return s;
  };

  beforeAll(async () => {
    [upstreamCa, runCa] = await Promise.all([RunCa.create('h2-upstream'), RunCa.create('h2-run')]);
    // No allowHTTP1: a client that cannot speak h2 fails here, so passing requests prove the gateway spoke h2.
    h2Server = http2.createSecureServer({ key: upstreamCa.leafKeyPem, cert: await upstreamCa.leafFor(H2_HOST) }, (req, res) => answer(req, res, seen));
    h1Server = https.createServer({ key: upstreamCa.leafKeyPem, cert: await upstreamCa.leafFor(H1_HOST), ALPNProtocols: ['http/1.1'] }, (req, res) => answer(req, res, seen));
    await new Promise<void>((r) => h2Server.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => h1Server.listen(0, '127.0.0.1', r));
    h2Port = (h2Server.address() as net.AddressInfo).port;
    h1Port = (h1Server.address() as net.AddressInfo).port;
    broker = new CredentialBroker([{ binding: normalizeBinding({ name: 'gh', hosts: [H2_HOST], forms: [{ type: 'bearer' }, { type: 'basic', username: 'x-access-token' }], env: ['GH_TOKEN'] }), value: new Secret(TOKEN) }]);
    const rules = new RuleSet([`${H2_HOST} allow GET,POST /api/**`, `${H2_HOST} allow GET /echo-auth`, `${H2_HOST} allow GET /echo-auth-gzip`, `${H2_HOST} allow GET /big`, `${H1_HOST} read-only`]);
    approvals = new NetworkApprovals({ rules, intercepts: () => true, waitMs: 30_000 });
    // Refusals are put to the user here too; every question but the Allow-once test's is denied.
    approvals.onDidAsk((q) => {
      if (!q.path.startsWith('/asked')) void approvals.answer(q.id, 'deny');
    });
    const gateway = new TlsGateway({ ca: runCa, rules, broker, approvals, upstreamCa: [upstreamCa.certificatePem], idleTimeoutMs: 30_000 });
    proxy = await EgressProxy.start({
      runId: 'gw-h2-test',
      allow: [`${H2_HOST}:${h2Port}`, `${H1_HOST}:${h1Port}`],
      resolve: async () => ['127.0.0.1'],
      gateway,
      [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true,
    });
    proxy.onDidConnect((e) => events.push(e));
  });

  afterAll(async () => {
    for (const s of sessions) s.destroy();
    await proxy?.close();
    approvals?.dispose();
    h2Server?.close();
    h1Server?.closeAllConnections();
    h1Server?.close();
  });

  it('an h2-only client is intercepted with the run CA and reaches an h2-only server over h2; a refused request gets the readable 403', async () => {
    const s = await open(H2_HOST, h2Port);
    expect((s.socket as tls.TLSSocket).alpnProtocol).toBe('h2');
    const ok = await h2Request(s, { ':method': 'GET', ':path': '/api/items?token=abc' });
    expect(ok.status).toBe(200);
    expect(ok.body.toString()).toBe('ok GET /api/items?token=abc 0 over 2.0');
    // Two streams at once on the one session, one with a body.
    const [post, big] = await Promise.all([h2Request(s, { ':method': 'POST', ':path': '/api/items' }, Buffer.alloc(100_000, 1)), h2Request(s, { ':method': 'GET', ':path': '/big' })]);
    expect(post.body.toString()).toBe('ok POST /api/items 100000 over 2.0');
    expect(big.body.length).toBe(4 * 1024 * 1024);
    const before = seen.length;
    const denied = await h2Request(s, { ':method': 'DELETE', ':path': '/api/items/1' });
    expect(denied.status).toBe(403);
    expect(denied.headers['x-airlock-egress']).toBe('denied');
    expect(denied.body.toString()).toContain(`DELETE https://${H2_HOST}:${h2Port}/api/items/1 refused`);
    expect(seen.length).toBe(before);
    // The session survives a refusal: the next request on it passes.
    expect((await h2Request(s, { ':method': 'GET', ':path': '/api/again' })).status).toBe(200);
    await vi.waitFor(() => expect(events.filter((e) => e.host === H2_HOST).length).toBeGreaterThanOrEqual(5));
    const mine = events.filter((e) => e.host === H2_HOST);
    expect(mine.find((e) => e.method === 'GET' && e.path === '/api/items?token=…')).toMatchObject({ intercepted: true, status: 200, allowed: true });
    expect(mine.find((e) => e.method === 'POST')).toMatchObject({ status: 200, bytesUp: 100_000 });
    expect(mine.find((e) => e.path === '/big')?.bytesDown).toBe(4 * 1024 * 1024);
    expect(mine.find((e) => e.method === 'DELETE')).toMatchObject({ status: 403, allowed: false });
    expect(seen.filter((x) => x.path.startsWith('/api')).every((x) => x.protocol === '2.0' && x.authority === `${H2_HOST}:${h2Port}`)).toBe(true);
  });

  it('over h2 the placeholder becomes the secret toward the bound host, an echo of it is scrubbed, and a wrong :authority is refused', async () => {
    const placeholder = broker.env().GH_TOKEN as string;
    const s = await open(H2_HOST, h2Port);
    const r = await h2Request(s, { ':method': 'GET', ':path': '/echo-auth', authorization: `Bearer ${placeholder}` });
    expect(seen.at(-1)?.authorization).toBe(`Bearer ${TOKEN}`);
    expect(r.body.toString()).toBe(`you sent Bearer ${placeholder}`);
    const before = seen.length;
    const fronted = await h2Request(s, { ':method': 'GET', ':path': '/echo-auth', ':authority': `${H1_HOST}:${h1Port}`, authorization: `Bearer ${placeholder}` });
    expect(fronted.status).toBe(403);
    expect(fronted.body.toString()).toContain(`does not name ${H2_HOST}`);
    expect(seen.length).toBe(before);
    await vi.waitFor(() => expect(events.some((e) => e.path === '/echo-auth' && e.secret === 'gh' && e.status === 200)).toBe(true));
    expect(JSON.stringify(events)).not.toContain(TOKEN);
  });

  it('over h2 no form of the secret comes back: Basic base64, and gzip the gateway did not ask for', async () => {
    const placeholder = broker.env().GH_TOKEN as string;
    const b64 = [0, 1, 2].map((shift) => Buffer.concat([Buffer.alloc(shift), Buffer.from(TOKEN)]).toString('base64').slice(4, 24));
    const leaks = (text: string) => text.includes(TOKEN) || b64.some((r) => text.includes(r));
    const s = await open(H2_HOST, h2Port);
    const basic = await h2Request(s, { ':method': 'GET', ':path': '/echo-auth', authorization: `Basic ${Buffer.from(`x-access-token:${placeholder}`).toString('base64')}` });
    expect(seen.at(-1)?.authorization).toBe(`Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`);
    expect(basic.body.toString()).toMatch(/^you sent Basic /);
    expect(leaks(basic.body.toString())).toBe(false);
    const gz = await h2Request(s, { ':method': 'GET', ':path': '/echo-auth-gzip', authorization: `Bearer ${placeholder}`, 'accept-encoding': 'gzip' });
    expect(gz.headers['content-encoding']).toBeUndefined();
    expect(gz.body.toString()).toBe(`you sent Bearer ${placeholder}`);
  });

  it('an h2 client reaches an HTTP/1.1-only server (the gateway speaks what each side negotiates), with its rules', async () => {
    const s = await open(H1_HOST, h1Port);
    const ok = await h2Request(s, { ':method': 'GET', ':path': '/readme' });
    expect(ok.body.toString()).toBe('ok GET /readme 0 over 1.1');
    expect(seen.at(-1)?.authority).toBe(`${H1_HOST}:${h1Port}`);
    const denied = await h2Request(s, { ':method': 'POST', ':path': '/readme' }, Buffer.from('x'));
    expect(denied.status).toBe(403);
    expect(denied.body.toString()).toContain('read-only');
  });

  it('an HTTP/1.1 client reaches the h2-only server through the gateway', async () => {
    const socket = await new Promise<tls.TLSSocket>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: proxy.port, method: 'CONNECT', path: `${H2_HOST}:${h2Port}`, headers: { host: `${H2_HOST}:${h2Port}` } });
      req.on('connect', (_res, raw) => {
        const t = tls.connect({ socket: raw, servername: H2_HOST, ca: runCa.certificatePem, ALPNProtocols: ['http/1.1'] }, () => resolve(t));
        t.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    const body = await new Promise<string>((resolve, reject) => {
      const agent = new https.Agent({ maxSockets: 1 });
      (agent as unknown as { createConnection: () => net.Socket }).createConnection = () => socket;
      https
        .get({ host: H2_HOST, port: h2Port, path: '/api/from-h1', agent }, (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve(text));
        })
        .on('error', reject);
    });
    socket.destroy();
    expect(body).toBe('ok GET /api/from-h1 0 over 2.0');
  });

  it('a request a rule refuses waits on h2 too: Allow once lets it through on the same session', async () => {
    const s = await open(H2_HOST, h2Port);
    const asked = new Promise<string>((resolve) => {
      const sub = approvals.onDidAsk((q) => {
        sub.dispose();
        resolve(q.id);
      });
    });
    const pending = h2Request(s, { ':method': 'GET', ':path': '/asked/elsewhere' });
    await approvals.answer(await asked, 'once');
    const r = await pending;
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe('ok GET /asked/elsewhere 0 over 2.0');
  });
});
