import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { createApiRouter } from '../api/router';
import { createFakeServices, type FakeServices } from '../../test/support/fake-services';
import { startHostServer, type HostServer } from './host-server';
import { TERMINAL_FLOW_WINDOW } from './flow-window';

interface Reply { status: number; headers: Record<string, string | string[] | undefined>; body: string }

function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Opens a WebSocket; resolves 'open' or the HTTP status of a refused upgrade. */
function connect(url: string, headers: Record<string, string>): Promise<{ outcome: 'open'; ws: WebSocket } | { outcome: number }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => resolve({ outcome: 'open', ws }));
    ws.once('unexpected-response', (_req, res) => resolve({ outcome: res.statusCode ?? 0 }));
    ws.once('error', () => resolve({ outcome: -1 }));
  });
}

/** POSTs to the terminal stream; its records (JSON line, then a data record's bytes) come out through `next`. */
function openStream(port: number, headers: Record<string, string>, path = '/api/terminal-stream'): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; records: Array<{ header: Record<string, unknown>; data?: Buffer }>; next(pred: (r: { header: Record<string, unknown>; data?: Buffer }) => boolean): Promise<{ header: Record<string, unknown>; data?: Buffer }>; close(): void }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers }, (res) => {
      const records: Array<{ header: Record<string, unknown>; data?: Buffer }> = [];
      let buf = Buffer.alloc(0);
      res.on('data', (c: Buffer) => {
        if (res.statusCode !== 200) return;
        buf = Buffer.concat([buf, c]);
        for (;;) {
          const nl = buf.indexOf(0x0a);
          if (nl < 0) return;
          const header = JSON.parse(buf.subarray(0, nl).toString()) as Record<string, unknown>;
          const n = header.kind === 'data' ? Number(header.bytes) : 0;
          if (buf.length < nl + 1 + n) return;
          records.push({ header, ...(header.kind === 'data' ? { data: buf.subarray(nl + 1, nl + 1 + n) } : {}) });
          buf = buf.subarray(nl + 1 + n);
        }
      });
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        records,
        next: (pred) =>
          vi.waitFor(
            () => {
              const hit = records.find(pred);
              if (!hit) throw new Error('no such record yet');
              return hit;
            },
            { timeout: 10_000, interval: 5 },
          ),
        close: () => req.destroy(),
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('host server (real HTTP and WebSocket on loopback)', () => {
  let dir: string;
  let host: HostServer;
  let services: FakeServices;
  let origin: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'airlock-host-'));
    await mkdir(join(dir, 'assets'));
    await writeFile(join(dir, 'index.html'), '<!doctype html><title>Airlock</title>');
    await writeFile(join(dir, 'assets', 'app.js'), 'console.log(1)');
    await writeFile(join(tmpdir(), 'airlock-host-outside.txt'), 'outside');
    services = createFakeServices({ autoFinish: false });
    host = await startHostServer({ router: createApiRouter(services), rendererDir: dir });
    origin = `http://127.0.0.1:${host.port}`;
  });
  afterAll(async () => {
    await host.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('binds 127.0.0.1 and prints a URL with a 256-bit token', () => {
    expect(host.url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:${host.port}/\\?token=[A-Za-z0-9_-]{43}$`));
  });

  it('refuses a page request without the token or with a wrong one', async () => {
    expect((await get(host.port, '/')).status).toBe(403);
    expect((await get(host.port, '/assets/app.js')).status).toBe(403);
    expect((await get(host.port, '/?token=wrong')).status).toBe(403);
    expect((await get(host.port, `/?token=${host.token}x`)).status).toBe(403);
  });

  it('trades the token for an HttpOnly cookie, then serves the UI with a strict CSP', async () => {
    const first = await get(host.port, `/?token=${host.token}`);
    expect(first.status).toBe(303);
    expect(first.headers.location).toBe('/');
    const cookie = String(first.headers['set-cookie']).split(';')[0] as string;
    expect(String(first.headers['set-cookie'])).toContain('HttpOnly');
    const page = await get(host.port, '/', { cookie });
    expect(page.status).toBe(200);
    expect(page.body).toContain('<title>Airlock</title>');
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain("'unsafe-eval'");
    expect((await get(host.port, '/assets/app.js', { cookie })).status).toBe(200);
    expect((await get(host.port, '/../airlock-host-outside.txt', { cookie })).status).toBe(404);
    expect((await get(host.port, '/%2e%2e/airlock-host-outside.txt', { cookie })).status).toBe(404);
  });

  it('refuses a foreign Origin and a foreign Host even with the token', async () => {
    expect((await get(host.port, `/?token=${host.token}`, { origin: 'http://evil.example' })).status).toBe(403);
    expect((await get(host.port, `/?token=${host.token}`, { host: `attacker.invalid:${host.port}` })).status).toBe(403);
  });

  it('refuses WebSocket upgrades without the token, with a wrong one, or from another Origin', async () => {
    const ws = `ws://127.0.0.1:${host.port}/api`;
    expect((await connect(ws, { origin })).outcome).toBe(403);
    expect((await connect(`${ws}?token=nope`, { origin })).outcome).toBe(403);
    expect((await connect(`${ws}?token=${host.token}`, { origin: 'http://evil.example' })).outcome).toBe(403);
    expect((await connect(`${ws}?token=${host.token}`, { origin: `http://127.0.0.1:${host.port + 1}` })).outcome).toBe(403);
    expect((await connect(`${ws}?token=${host.token}`, {})).outcome).toBe(403);
  });

  it('serves contract calls and push events over an accepted WebSocket', async () => {
    const c = await connect(`ws://127.0.0.1:${host.port}/api?token=${host.token}`, { origin });
    expect(c.outcome).toBe('open');
    if (c.outcome !== 'open') return;
    const frames: Array<{ t: string; id?: number; envelope?: { ok: boolean; value?: unknown; error?: { kind: string } }; event?: string }> = [];
    c.ws.on('message', (d) => frames.push(JSON.parse(d.toString())));

    c.ws.send(JSON.stringify({ t: 'sub', event: 'runs:onDidChangeStatus' }));
    c.ws.send(JSON.stringify({ t: 'invoke', id: 1, channel: 'keys:set', input: { provider: 'openai', key: 'sk-test-1234567890' } }));
    c.ws.send(JSON.stringify({ t: 'invoke', id: 2, channel: 'runs:start', input: { task: 'x' } }));
    c.ws.send(JSON.stringify({ t: 'invoke', id: 3, channel: 'runs:start', input: { projectDir: '/p', task: 't', provider: 'openai', model: 'm' } }));
    await vi.waitFor(() => expect(frames.some((f) => f.id === 3) && frames.some((f) => f.t === 'event')).toBe(true), { timeout: 10_000, interval: 5 });
    const byId = (id: number) => frames.find((f) => f.id === id)?.envelope;
    expect(byId(1)).toMatchObject({ ok: true, value: { provider: 'openai', hasKey: true, last4: '7890' } });
    expect(JSON.stringify(byId(1))).not.toContain('sk-test');
    expect(byId(2)).toMatchObject({ ok: false, error: { kind: 'INVALID_INPUT' } });
    expect(byId(3)).toMatchObject({ ok: true });
    expect(frames.find((f) => f.t === 'event')?.event).toBe('runs:onDidChangeStatus');
    c.ws.close();
  });

  it('serves a patch download only to a same-origin POST with the token, as an attachment', async () => {
    const cookie = `airlock_token_${host.port}=${host.token}`;
    const post = (headers: Record<string, string>, body: string) => new Promise<Reply>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: host.port, path: '/api/patch', method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      });
      req.on('error', reject);
      req.end(body);
    });
    const run = await services.runs.start({ projectDir: '/p', task: 't', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 60 } });
    const body = JSON.stringify({ runId: run.id, files: ['README.md'] });
    expect((await post({ origin }, body)).status).toBe(403); // no token
    expect((await post({ cookie }, body)).status).toBe(403); // no Origin
    expect((await post({ cookie, origin: 'http://evil.example' }, body)).status).toBe(403);
    expect((await post({ cookie, origin, host: `attacker.invalid:${host.port}` }, body)).status).toBe(403);
    expect((await post({ cookie, origin }, '{not json')).status).toBe(400);
    expect((await post({ cookie, origin }, JSON.stringify({ runId: run.id, selection: [{ path: 'a', lines: ['7'] }] }))).status).toBe(400);
    const ok = await post({ cookie, origin }, body);
    expect(ok.status).toBe(200);
    expect(ok.headers['content-disposition']).toBe(`attachment; filename="airlock-${run.id}.patch"`);
    expect(ok.headers['content-security-policy']).toBeTruthy();
    expect(ok.body).toBe('diff --git');
  });

  it('streams terminal output as binary records to a same-origin POST with the token, and refuses anything else', async () => {
    const cookie = `airlock_token_${host.port}=${host.token}`;
    const post = (headers: Record<string, string>) => openStream(host.port, headers);
    expect((await post({ origin })).status).toBe(403); // no token
    expect((await post({ origin, cookie: `airlock_token_${host.port}=nope` })).status).toBe(403);
    expect((await post({ cookie })).status).toBe(403); // no Origin
    expect((await post({ cookie, origin: 'http://evil.example' })).status).toBe(403);
    expect((await post({ cookie, origin, host: `attacker.invalid:${host.port}` })).status).toBe(403);

    const s = await post({ cookie, origin });
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toBe('application/octet-stream');
    const run = await services.runs.start({ projectDir: '/p', task: 't', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 60 } });
    services.emitOutput(run.id, 'streamed \x1b[1mbold\x1b[0m — ünïcode\r\n');
    const record = await s.next((r) => Boolean(r.data?.includes('streamed')));
    expect(record.header).toMatchObject({ kind: 'data', terminalId: `run:${run.id}`, runId: run.id });
    expect(record.header.bytes).toBe(record.data?.length);
    // The bytes travel as they are: escapes and UTF-8 intact, no JSON around them.
    expect(record.data?.toString('utf8')).toContain('streamed \x1b[1mbold\x1b[0m — ünïcode\r\n');
    s.close();
  });

  it('with flow control, sends no more than the page acknowledged plus a window, then the newest output after a gap', async () => {
    const cookie = `airlock_token_${host.port}=${host.token}`;
    const s = await openStream(host.port, { cookie, origin }, '/api/terminal-stream?ack=1');
    const hello = await s.next((r) => r.header.kind === 'hello');
    expect(hello.header.window).toBe(TERMINAL_FLOW_WINDOW);
    const run = await services.runs.start({ projectDir: '/p', task: 't', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 60 } });
    const chunk = (i: number) => `chunk-${i} ${'x'.repeat(64 * 1024)}\r\n`;
    for (let i = 0; i < 20; i++) services.emitOutput(run.id, chunk(i));
    services.emitOutput(run.id, 'the newest line\r\n');
    await s.next((r) => Boolean(r.data?.includes('chunk-0 ')));
    const received = () => s.records.reduce((n, r) => n + (r.data?.length ?? 0), 0);
    // The window fills, and then nothing more comes until the page acknowledges.
    await vi.waitFor(() => expect(received()).toBeGreaterThanOrEqual(TERMINAL_FLOW_WINDOW), { timeout: 10_000, interval: 5 });
    const before = received();
    // The page has not acknowledged anything: at most a window (and one batch over it) was sent.
    expect(before).toBeLessThanOrEqual(2 * TERMINAL_FLOW_WINDOW + 1024);
    expect(s.records.some((r) => r.data?.includes('the newest line'))).toBe(false);

    const c = await connect(`ws://127.0.0.1:${host.port}/api?token=${host.token}`, { origin });
    if (c.outcome !== 'open') throw new Error('not open');
    c.ws.send(JSON.stringify({ t: 'ack', stream: hello.header.stream, bytes: before }));
    // What did not fit is skipped (a gap the page shows), and the newest output comes next.
    const gap = await s.next((r) => r.header.kind === 'gap' && r.header.terminalId === `run:${run.id}`);
    expect(Number(gap.header.droppedBytes)).toBeGreaterThan(0);
    await s.next((r) => Boolean(r.data?.includes('the newest line')));
    expect(received() - before).toBeLessThanOrEqual(2 * TERMINAL_FLOW_WINDOW + 1024);
    c.ws.close();
    s.close();
  });

  it('closes a connection that sends a malformed frame', async () => {
    const c = await connect(`ws://127.0.0.1:${host.port}/api?token=${host.token}`, { origin });
    if (c.outcome !== 'open') throw new Error('not open');
    const code = await new Promise<number>((resolve) => {
      c.ws.once('close', (code) => resolve(code));
      c.ws.send('{not json');
    });
    expect(code).toBe(1008);
  });
});

describe('terminal replay ordering', () => {
  it('sends batched output before the result of a replay, so the view never shows it twice', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'airlock-host-'));
    await writeFile(join(dir, 'index.html'), '<!doctype html>');
    const services = createFakeServices({ autoFinish: false });
    const host = await startHostServer({ router: createApiRouter(services), rendererDir: dir });
    try {
      const origin = `http://127.0.0.1:${host.port}`;
      const c = await connect(`ws://127.0.0.1:${host.port}/api?token=${host.token}`, { origin });
      if (c.outcome !== 'open') throw new Error('not open');
      const frames: Array<{ t: string; id?: number; event?: string; payload?: { data?: string } }> = [];
      c.ws.on('message', (d) => frames.push(JSON.parse(d.toString())));
      const run = await services.runs.start({ projectDir: '/p', task: 't', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 60 } });
      c.ws.send(JSON.stringify({ t: 'sub', event: 'terminals:onDidData' }));
      // The scripted run's own output has gone out.
      await vi.waitFor(() => expect(frames.some((f) => f.event === 'terminals:onDidData' && (f.payload?.data ?? '').includes('README.md'))).toBe(true), { timeout: 10_000, interval: 5 });
      services.emitOutput(run.id, 'late output\r\n'); // batched for a frame
      c.ws.send(JSON.stringify({ t: 'invoke', id: 7, channel: 'terminals:replay', input: { terminalId: `run:${run.id}` } }));
      await vi.waitFor(() => expect(frames.some((f) => f.id === 7)).toBe(true), { timeout: 10_000, interval: 5 });
      const resultAt = frames.findIndex((f) => f.id === 7);
      const dataAt = frames.findIndex((f) => f.event === 'terminals:onDidData' && (f.payload?.data ?? '').includes('late output'));
      expect(dataAt).toBeGreaterThanOrEqual(0);
      expect(dataAt).toBeLessThan(resultAt);
      c.ws.close();
    } finally {
      await host.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
