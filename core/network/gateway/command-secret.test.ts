/**
 * Secrets a host command prints (docs/architecture.md §2.8, "Secrets fetched when used"): the
 * command line is split without a shell, run once on first use, and again on a 401 — through the
 * real egress proxy and gateway, against a real TLS server on loopback that takes only the second
 * token. The command is a real script that counts its runs in a file.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxy, type EgressEvent } from '../egress-proxy';
import { CredentialBroker } from './credential-broker';
import { RETRY_BODY_LIMIT } from './held-body';
import { commandText, HostCommandSecret, parseCommandLine, type SecretFetchEvent } from './host-command-secret';
import { RunCa } from './run-ca';
import { RuleSet } from './rules';
import { normalizeBinding } from './secret-store';
import { TlsGateway } from './tls-gateway';

const HOST = 'api.cmd.airlock.test';
// Made at run time, so the source holds no token a search could trip over.
const SALT = randomBytes(8).toString('hex');
const token = (n: number) => `tok_${SALT}_${n}`;

/** Prints tok_SALT_N (N = its run count, kept in the file $1), with spaces around; says the token on stderr too. */
const COUNTER = `#!/bin/sh
n=$(( $(cat "$1" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$1"
echo "debug: about to print tok_\${SALT}_$n" >&2
printf '  tok_%s_%s  \\n' "$SALT" "$n"
`;

describe('parseCommandLine: argv as a shell would quote it, nothing a shell would do', () => {
  it('splits on blanks and honours quotes and escapes', () => {
    expect(parseCommandLine('gh auth token')).toEqual(['gh', 'auth', 'token']);
    expect(parseCommandLine(`op read 'op://Private/Git Hub/token'`)).toEqual(['op', 'read', 'op://Private/Git Hub/token']);
    expect(parseCommandLine(`sh -c 'cat ~/.token | tr -d "\\n"'`)).toEqual(['sh', '-c', 'cat ~/.token | tr -d "\\n"']);
    expect(parseCommandLine(`a "b \\"c\\" d" e\\ f`)).toEqual(['a', 'b "c" d', 'e f']);
  });

  it('refuses what only a shell would understand, saying to write sh -c', () => {
    for (const bad of ['gh auth token | tr -d x', 'cat $HOME/t', 'cat ~/t', 'a; b', 'cat *.tok', 'a && b', 'echo "$X"', "echo 'open", '']) {
      expect(() => parseCommandLine(bad), bad).toThrow(/without a shell — write sh -c/);
    }
  });

  it('prints argv back as a line that parses to the same argv', () => {
    const argv = ['op', 'read', "op://it's/x y"];
    expect(parseCommandLine(commandText(argv))).toEqual(argv);
  });
});

describe('HostCommandSecret: the command runs on the host, once per need', () => {
  let dir: string;
  let script: string;
  const env = { ...process.env, SALT };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-cmd-secret-'));
    script = path.join(dir, 'counter.sh');
    await writeFile(script, COUNTER);
    await chmod(script, 0o755);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('runs lazily, once for concurrent users, trims the output, and refreshes once per stale value', async () => {
    const counter = path.join(dir, 'lazy');
    const s = new HostCommandSecret('gh', [script, counter], { env });
    const events: SecretFetchEvent[] = [];
    s.onDidFetch((e) => events.push(e));
    expect(s.held()).toBeUndefined();
    await expect(readFile(counter)).rejects.toThrow();
    const [a, b] = await Promise.all([s.get(), s.get()]);
    expect(a.reveal()).toBe(token(1));
    expect(b).toBe(a);
    expect((await readFile(counter, 'utf8')).trim()).toBe('1');
    // Two requests saw a 401 for the same stale value: one run.
    const [c, d] = await Promise.all([s.refresh(a), s.refresh(a)]);
    expect(c.reveal()).toBe(token(2));
    expect(d).toBe(c);
    expect(await s.refresh(a)).toBe(c);
    expect((await readFile(counter, 'utf8')).trim()).toBe('2');
    expect(s.values().map((v) => v.reveal())).toEqual([token(1), token(2)]);
    expect(events.map((e) => [e.trigger, e.ok])).toEqual([['first use', true], ['401', true]]);
    expect(JSON.stringify(events)).not.toContain(SALT);
  });

  it('a value with a life is fetched again once it has run out', async () => {
    const counter = path.join(dir, 'ttl');
    const s = new HostCommandSecret('gh', [script, counter], { env, ttlMs: 0 });
    expect((await s.get()).reveal()).toBe(token(1));
    expect(s.held()).toBeUndefined();
    expect((await s.get()).reveal()).toBe(token(2));
  });

  it('a failing command says its exit code, never its error output (it held the token)', async () => {
    const failing = path.join(dir, 'fail.sh');
    await writeFile(failing, `#!/bin/sh\necho "rejected tok_\${SALT}_9" >&2\nexit 3\n`);
    await chmod(failing, 0o755);
    const err = await new HostCommandSecret('gh', [failing], { env }).get().catch((e: Error) => e);
    expect((err as Error).message).toMatch(/the command of secret "gh" \(.*fail\.sh\) exited with 3; its error output is not shown/);
    expect((err as Error).message).not.toContain(SALT);
  });

  it('a command that does not finish in time is stopped with a clear error', async () => {
    const err = await new HostCommandSecret('slow', ['sleep', '30'], { env: process.env, timeoutMs: 200 }).get().catch((e: Error) => e);
    expect(err).toMatchObject({ kind: 'COMMAND_TIMEOUT' });
    expect((err as Error).message).toMatch(/did not finish within .* s; it was stopped/);
  });

  it('refuses output that is not one line, and a command not on PATH', async () => {
    await expect(new HostCommandSecret('x', ['printf', 'a-token\\nsecond-line'], { env: process.env }).get()).rejects.toThrow(/did not print one line .*printed 2 line/);
    await expect(new HostCommandSecret('x', ['true'], { env: process.env }).get()).rejects.toThrow(/printed nothing/);
    await expect(new HostCommandSecret('x', [`airlock-no-such-tool-${SALT}`], { env: process.env }).get()).rejects.toThrow(/was not found on this machine's PATH/);
  });
});

interface Seen {
  url: string;
  authorization: string;
  body: string;
  /** How many times the command had run when this request arrived. */
  runs: number;
}

describe('the gateway fetches a command secret on first use and again on a 401 (real proxy, gateway and TLS server)', () => {
  let dir: string;
  let counter: string;
  let upstreamCa: RunCa;
  let runCa: RunCa;
  let server: https.Server;
  let port: number;
  let proxy: EgressProxy;
  let broker: CredentialBroker;
  let failingBroker: CredentialBroker;
  const seen: Seen[] = [];
  const events: EgressEvent[] = [];
  const fetches: SecretFetchEvent[] = [];
  const runs = async () => Number((await readFile(counter, 'utf8').catch(() => '0')).trim());
  /** The run count whose token the server takes. */
  let valid = 2;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-cmd-gateway-'));
    const script = path.join(dir, 'counter.sh');
    counter = path.join(dir, 'count');
    await writeFile(script, COUNTER);
    await chmod(script, 0o755);
    [upstreamCa, runCa] = await Promise.all([RunCa.create('cmd-upstream'), RunCa.create('cmd-run')]);
    // Takes only the second token; a 401 echoes the token it refused (the gateway must scrub it).
    server = https.createServer({ key: upstreamCa.leafKeyPem, cert: await upstreamCa.leafFor(HOST) }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => void (async () => {
        const authorization = req.headers.authorization ?? '';
        seen.push({ url: req.url ?? '', authorization, body: Buffer.concat(chunks).toString(), runs: await runs() });
        if (req.url === '/always-401' || authorization !== `Bearer ${token(valid)}`) {
          res.writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': 'Bearer' });
          res.end(`bad credentials: ${authorization}`);
          return;
        }
        res.end(`ok ${req.method} ${req.url} got ${Buffer.concat(chunks).length} bytes with ${authorization}`);
      })());
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as net.AddressInfo).port;
    const binding = normalizeBinding({ name: 'api', hosts: [HOST], forms: [{ type: 'bearer' }], env: ['API_TOKEN'], command: { argv: [script, counter] } });
    broker = new CredentialBroker([{ binding, value: new HostCommandSecret('api', [script, counter], { env: { ...process.env, SALT } }) }]);
    broker.onDidFetch((e) => fetches.push(e));
    const gateway = new TlsGateway({ ca: runCa, rules: new RuleSet([]), broker, upstreamCa: [upstreamCa.certificatePem], idleTimeoutMs: 30_000 });
    proxy = await EgressProxy.start({ runId: 'cmd-secret-test', allow: [`${HOST}:${port}`], resolve: async () => ['127.0.0.1'], gateway, [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true });
    proxy.onDidConnect((e) => events.push(e));
    failingBroker = new CredentialBroker([{ binding: normalizeBinding({ name: 'broken', hosts: [HOST], forms: [{ type: 'bearer' }], env: ['BROKEN_TOKEN'] }), value: new HostCommandSecret('broken', ['sh', '-c', `echo "nope tok_${SALT}_x" >&2; exit 7`], { env: process.env }) }]);
  });

  afterAll(async () => {
    await proxy?.close();
    broker?.dispose();
    failingBroker?.dispose();
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('first use runs the command once; the 401 runs it once more and the same request goes again with the same body; the client sees 200 and no token', async () => {
    const placeholder = broker.env().API_TOKEN as string;
    expect(await runs()).toBe(0);
    const body = JSON.stringify({ ask: 'something', pad: 'x'.repeat(70_000) });
    const s = await tunnel(proxy.port, HOST, port, runCa.certificatePem);
    const r = await request(s, HOST, { method: 'POST', path: '/v1/things?id=7', headers: { authorization: `Bearer ${placeholder}`, 'content-type': 'application/json' }, body: Buffer.from(body) });
    expect(r.status, r.body.toString()).toBe(200);
    expect(r.body.toString()).toBe(`ok POST /v1/things?id=7 got ${body.length} bytes with Bearer ${placeholder}`);
    // The command had run once when the first request arrived (401), twice when the retry did.
    expect(seen.map((x) => [x.url, x.authorization, x.runs])).toEqual([
      ['/v1/things?id=7', `Bearer ${token(1)}`, 1],
      ['/v1/things?id=7', `Bearer ${token(2)}`, 2],
    ]);
    expect(seen[1]?.body).toBe(body);
    expect(seen[0]?.body).toBe(body);
    expect(await runs()).toBe(2);

    // The value is held: the next request runs nothing.
    s.destroy();
    const s2 = await tunnel(proxy.port, HOST, port, runCa.certificatePem);
    const again = await request(s2, HOST, { path: '/next', headers: { authorization: `Bearer ${placeholder}` } });
    expect(again.status).toBe(200);
    expect(await runs()).toBe(2);
    s2.destroy();

    await vi.waitFor(() => expect(events.filter((e) => e.intercepted).length).toBe(2));
    expect(events[0]).toMatchObject({ intercepted: true, method: 'POST', status: 200, secret: 'api', reason: 'sent again after a 401 with a fresh value of secret "api"' });
    expect(fetches.map((f) => [f.secret, f.trigger, f.ok])).toEqual([['api', 'first use', true], ['api', '401', true]]);
    expect(JSON.stringify({ events, fetches })).not.toContain(SALT);
  });

  it('a 401 to a body over the bound is not sent again: the client gets the 401, scrubbed of the stale and the current token', async () => {
    const placeholder = broker.env().API_TOKEN as string;
    const before = seen.length;
    const s = await tunnel(proxy.port, HOST, port, runCa.certificatePem);
    const big = Buffer.alloc(RETRY_BODY_LIMIT + 1, 0x61);
    const r = await request(s, HOST, { method: 'PUT', path: '/always-401', headers: { authorization: `Bearer ${placeholder}` }, body: big });
    expect(r.status).toBe(401);
    expect(r.body.toString()).toBe(`bad credentials: Bearer ${placeholder}`);
    expect(seen.length - before).toBe(1);
    expect(await runs()).toBe(2);

    // A small body to the same always-401 path is sent once more after one more run; its 401 comes back.
    s.destroy();
    const s2 = await tunnel(proxy.port, HOST, port, runCa.certificatePem);
    const small = await request(s2, HOST, { method: 'POST', path: '/always-401', headers: { authorization: `Bearer ${placeholder}` }, body: Buffer.from('{"x":1}') });
    expect(small.status).toBe(401);
    expect(small.body.toString()).toBe(`bad credentials: Bearer ${placeholder}`);
    expect(seen.slice(before + 1).map((x) => [x.authorization, x.body])).toEqual([
      [`Bearer ${token(2)}`, '{"x":1}'],
      [`Bearer ${token(3)}`, '{"x":1}'],
    ]);
    expect(await runs()).toBe(3);
    s2.destroy();
  });

  it('over HTTP/2 too: the held token went stale, the 401 runs the command once more and the stream gets the 200', async () => {
    const placeholder = broker.env().API_TOKEN as string;
    valid = 4;
    const before = seen.length;
    const s = await tunnel(proxy.port, HOST, port, runCa.certificatePem, ['h2']);
    expect(s.alpnProtocol).toBe('h2');
    const session = http2.connect(`https://${HOST}:${port}`, { createConnection: () => s });
    const r = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const stream = session.request({ ':method': 'POST', ':path': '/v1/h2', authorization: `Bearer ${placeholder}` });
      let status = 0;
      let body = '';
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => (body += c.toString()));
      stream.on('end', () => resolve({ status, body }));
      stream.on('error', reject);
      stream.end('h2 body');
    });
    session.destroy();
    expect(r).toEqual({ status: 200, body: `ok POST /v1/h2 got 7 bytes with Bearer ${placeholder}` });
    expect(seen.slice(before).map((x) => [x.authorization, x.body, x.runs])).toEqual([
      [`Bearer ${token(3)}`, 'h2 body', 3],
      [`Bearer ${token(4)}`, 'h2 body', 4],
    ]);
  });

  it('a command that fails answers 502 naming the secret and the exit code, without its output', async () => {
    const gateway = new TlsGateway({ ca: runCa, rules: new RuleSet([]), broker: failingBroker, upstreamCa: [upstreamCa.certificatePem], idleTimeoutMs: 30_000 });
    const p = await EgressProxy.start({ runId: 'cmd-secret-fail', allow: [`${HOST}:${port}`], resolve: async () => ['127.0.0.1'], gateway, [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true });
    try {
      const before = seen.length;
      const s = await tunnel(p.port, HOST, port, runCa.certificatePem);
      const r = await request(s, HOST, { path: '/x', headers: { authorization: `Bearer ${failingBroker.env().BROKEN_TOKEN as string}` } });
      expect(r.status).toBe(502);
      expect(r.body.toString()).toMatch(/was not sent — the secret "broken" could not be fetched: the command of secret "broken" \(sh\) exited with 7; its error output is not shown/);
      expect(r.body.toString()).not.toContain(SALT);
      expect(seen.length).toBe(before);
      s.destroy();
    } finally {
      await p.close();
    }
  });
});

function tunnel(proxyPort: number, host: string, port: number, ca: string, alpn = ['http/1.1']): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: proxyPort, method: 'CONNECT', path: `${host}:${port}`, headers: { host: `${host}:${port}` } });
    req.on('connect', (res, socket) => {
      if (res.statusCode !== 200) return reject(new Error(`CONNECT ${res.statusCode}`));
      const s = tls.connect({ socket, servername: host, ca, ALPNProtocols: alpn }, () => resolve(s));
      s.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

function request(socket: tls.TLSSocket, host: string, opts: { method?: string; path: string; headers?: Record<string, string>; body?: Buffer }): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const agent = new https.Agent({ maxSockets: 1 });
    (agent as unknown as { createConnection: () => net.Socket }).createConnection = () => socket;
    const req = https.request({ host, method: opts.method ?? 'GET', path: opts.path, headers: { host, ...opts.headers }, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}
