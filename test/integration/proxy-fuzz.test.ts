import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProviderConfig } from '../../core/keys/provider-catalog';
import { Secret } from '../../core/keys/secret';
import { ModelProxy, type ModelCallEvent } from '../../core/proxy/model-proxy';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';

const REAL_KEY = 'sk-canary-FUZZ-4c1e9b7d2a6f48e3b5c0d9a8e7f61234';

/** Sends raw bytes, returns everything the proxy answered until it closed (or went quiet). */
function raw(port: number, data: Buffer | string | (Buffer | string)[], opts: { gapMs?: number; quietMs?: number } = {}): Promise<string> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let got = '';
    let timer: NodeJS.Timeout | undefined;
    const finish = () => {
      clearTimeout(timer);
      sock.destroy();
      resolve(got);
    };
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(finish, opts.quietMs ?? 1500);
    };
    sock.on('data', (c) => {
      got += c.toString('latin1');
      arm();
    });
    sock.on('close', finish);
    sock.on('error', () => undefined);
    const send = async (): Promise<void> => {
      const parts = Array.isArray(data) ? data : [data];
      for (const p of parts) {
        if (sock.destroyed) break;
        sock.write(p);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
      arm();
    };
    sock.on('connect', () => void send());
  });
}

function statusOf(response: string): number | undefined {
  const m = /^HTTP\/1\.1 (\d{3})/.exec(response);
  return m ? Number(m[1]) : undefined;
}

/** A small seeded PRNG so a failing case can be replayed. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('model proxy under hostile input', () => {
  let up: FakeUpstream;
  let proxy: ModelProxy;
  let port: number;
  let token: string;
  const events: ModelCallEvent[] = [];
  const answers: string[] = [];

  beforeAll(async () => {
    up = await startFakeUpstream({ expectedKey: REAL_KEY });
    const configs: Record<string, ProviderConfig> = {
      anthropic: { id: 'anthropic', label: 'A', kind: 'anthropic', baseUrl: up.url, requiresKey: true, builtin: true, models: [] },
      openai: { id: 'openai', label: 'O', kind: 'openai', baseUrl: `${up.url}/v1`, requiresKey: true, builtin: true, models: [] },
    };
    proxy = new ModelProxy({ resolveUpstream: async (id) => ({ config: configs[id]!, key: new Secret(REAL_KEY) }), maxBodyBytes: 256 * 1024 });
    proxy.onDidCall((e) => events.push(e));
    port = (await proxy.start()).port;
    token = proxy.issueToken({ runId: 'r-fuzz', providers: ['anthropic', 'openai'] }).token;
  });
  afterAll(async () => {
    await proxy.stop();
    await up.close();
  });

  const check = (answer: string, allowClosed = false) => {
    answers.push(answer);
    expect(answer).not.toContain(REAL_KEY);
    const status = statusOf(answer);
    if (status === undefined) {
      expect(allowClosed, `no HTTP answer: ${JSON.stringify(answer.slice(0, 200))}`).toBe(true);
      return undefined;
    }
    expect(status, answer.slice(0, 300)).toBeLessThan(500);
    return status;
  };

  const post = (path: string, body: string, headers: string[] = []) =>
    `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${token}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n${body}`;

  it('bad JSON → 400, non-object JSON → 400, huge body → 413, huge headers → 431', async () => {
    expect(check(await raw(port, post('/v1/messages', '{"model": "x", ')))).toBe(400);
    expect(check(await raw(port, post('/v1/chat/completions', '[1,2,3]')))).toBe(400);
    expect(check(await raw(port, post('/v1/chat/completions', '"str"')))).toBe(400);
    expect(check(await raw(port, post('/v1/responses', 'x'.repeat(300 * 1024))))).toBe(413);
    // Declared too large: refused before the body is read.
    expect(check(await raw(port, `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\r\ncontent-length: 999999999\r\nconnection: close\r\n\r\n{}`))).toBe(413);
    // Chunked and too large.
    const chunk = 'y'.repeat(64 * 1024);
    const chunked = [`POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n`, ...Array.from({ length: 6 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`), '0\r\n\r\n'];
    expect(check(await raw(port, chunked))).toBe(413);
    expect(check(await raw(port, post('/v1/messages', '{}', [`x-big: ${'h'.repeat(40_000)}`])))).toBe(431);
  });

  it('path tricks, wrong methods and absolute-form URLs never reach the upstream', async () => {
    const before = up.requests.length;
    for (const path of ['/v1/../v1/messages', '/v1/%2e%2e/v1/messages', '/v1/messages/../../etc/passwd', '//v1/messages', '/v1//messages', '/V1/MESSAGES', '/v1/messages%00', '/v1/files', '/admin', `/v1/${'a/'.repeat(2000)}`]) {
      expect(check(await raw(port, post(path, '{"model":"m"}')), true)).not.toBe(200);
    }
    for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE']) {
      const s = check(await raw(port, `${method} /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\r\nconnection: close\r\n\r\n`), true);
      expect(s).not.toBe(200);
    }
    expect(check(await raw(port, post('http://evil.invalid/v1/messages', '{"model":"m"}')))).toBe(404);
    check(await raw(port, `CONNECT evil.invalid:443 HTTP/1.1\r\nHost: evil.invalid:443\r\nx-api-key: ${token}\r\n\r\n`), true);
    expect(up.requests.length).toBe(before);
  });

  it('header injection and request smuggling attempts are refused', async () => {
    const before = up.requests.length;
    // CR/LF inside a header value, CL+TE together, duplicate content-length, obs-fold.
    check(await raw(port, `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\rinjected: 1\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`), true);
    check(await raw(port, `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n0\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n`), true);
    check(await raw(port, `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\r\ncontent-length: 2\r\ncontent-length: 40\r\nconnection: close\r\n\r\n{}`), true);
    check(await raw(port, `POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: ${token}\r\n folded: yes\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}`), true);
    check(await raw(port, Buffer.from([0x16, 0x03, 0x01, 0x00, 0xff, 0x01, 0x00, 0x00, 0x00])), true);
    check(await raw(port, '\u0000\u0001GARBAGE\r\n\r\n'), true);
    expect(up.requests.length).toBe(before);
    // A client-sent credential header never travels upstream next to ours.
    const ok = await raw(port, post('/v1/chat/completions', '{"model":"m","messages":[]}', ['api-key: sk-client-smuggled', 'proxy-authorization: Basic eA==', 'cookie: a=b', 'x-forwarded-for: 10.0.0.1']).replace(`x-api-key: ${token}`, `authorization: Bearer ${token}`));
    expect(check(ok)).toBe(200);
    const seen = up.requests.at(-1)!.headers;
    expect(seen.authorization).toBe(`Bearer ${REAL_KEY}`);
    for (const h of ['api-key', 'proxy-authorization', 'cookie', 'x-forwarded-for', 'x-api-key']) expect(seen[h]).toBeUndefined();
  });

  it('slow clients: a trickled request still works; an unread stream does not take the proxy down', async () => {
    const req = post('/v1/chat/completions', '{"model":"m","messages":[]}');
    const pieces = req.match(/[\s\S]{1,16}/g)!;
    expect(check(await raw(port, pieces, { gapMs: 15 }))).toBe(200);
    // A client that opens a stream and never reads: the proxy must stay responsive to others.
    up.setScript([{ text: 'z'.repeat(200_000) }]);
    const stalled = net.connect(port, '127.0.0.1');
    stalled.on('error', () => undefined);
    stalled.write(post('/v1/messages', JSON.stringify({ model: 'm', max_tokens: 5, stream: true, messages: [] })));
    stalled.pause();
    const other = await raw(port, `GET /v1/models HTTP/1.1\r\nHost: x\r\nauthorization: Bearer ${token}\r\nconnection: close\r\n\r\n`);
    expect(check(other)).toBe(200);
    stalled.destroy();
    // Headers that never finish are cut off by the server, not held forever (bounded by headersTimeout).
    const half = net.connect(port, '127.0.0.1');
    half.on('error', () => undefined);
    half.write('POST /v1/messages HTTP/1.1\r\nHost: x\r\n');
    half.destroy();
  });

  it('a seeded random barrage: no 5xx from the proxy, no key in any answer, still serving', async () => {
    const rnd = prng(20261129);
    const pick = <T,>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
    const methods = ['GET', 'POST', 'PUT', 'HEAD', 'DELETE', 'OPTIONS', 'POST', 'POST'];
    const paths = ['/v1/messages', '/v1/chat/completions', '/v1/responses', '/v1/embeddings', '/v1/models', '/v1/messages/count_tokens', '/', '/v1/messages?beta=true', '/v1/%2e%2e/x', '/v1/messages#frag', '/\u00ff', '/v1/chat/completions?x=%0d%0aHost:%20evil'];
    const auths = [`x-api-key: ${token}`, `authorization: Bearer ${token}`, 'authorization: Bearer nope', `authorization: Basic ${token}`, '', `x-api-key: ${token.slice(0, -1)}`, `x-api-key: ${'k'.repeat(5000)}`];
    const bodies = ['{}', '{"model":"m","messages":[]}', '{"model":"m","stream":true,"messages":[]}', 'null', '{', '{"model":{"$ne":1}}', `{"model":"${'m'.repeat(10_000)}"}`, '\u0000\u0001', '{"stream":true,"stream_options":1}', ''];
    for (let i = 0; i < 120; i++) {
      const method = pick(methods);
      const body = method === 'GET' || method === 'HEAD' ? '' : pick(bodies);
      const auth = pick(auths);
      const extra = rnd() < 0.2 ? `x-junk-${i}: ${'\u00e9'.repeat(Math.floor(rnd() * 100))}\r\n` : '';
      const text = `${method} ${pick(paths)} HTTP/1.1\r\nHost: 127.0.0.1\r\n${auth ? `${auth}\r\n` : ''}${extra}content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
      check(await raw(port, text, { quietMs: 800 }), true);
    }
    const after = await raw(port, post('/v1/chat/completions', '{"model":"m","messages":[]}'));
    expect(check(after)).toBe(200);
    expect(JSON.stringify(events)).not.toContain(REAL_KEY);
    expect(answers.join('\n')).not.toContain(REAL_KEY);
  });
});
