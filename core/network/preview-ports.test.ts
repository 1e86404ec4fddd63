import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ChannelClient } from '../channel/channel-client';
import { startLocalHelper, type LocalHelper } from '../channel/local-helper';
import { PreviewPorts, publishPort, type SandboxPortConnector } from './preview-ports';

// A real channel to a local helper process: its "sandbox ports" are this machine's loopback ports.
let helper: LocalHelper;
let client: ChannelClient;
let app: http.Server;
let appPort = 0;

beforeAll(async () => {
  helper = await startLocalHelper({ env: process.env });
  client = await ChannelClient.connect(helper.stream);
  app = http.createServer((req, res) => res.end(`preview says ${req.url}`));
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  appPort = (app.address() as net.AddressInfo).port;
}, 60_000);

afterAll(async () => {
  client?.dispose();
  await helper?.dispose();
  await new Promise((r) => app.close(r));
});

function get(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

function connectOutcome(port: number): Promise<'refused' | 'closed' | 'open'> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED' ? 'refused' : 'closed'));
    s.on('close', () => resolve('closed'));
    s.on('connect', () => {
      s.write(`GET / HTTP/1.0\r\nHost: localhost:${port}\r\n\r\n`);
      s.once('data', () => {
        s.destroy();
        resolve('open');
      });
    });
  });
}

describe('publishPort', () => {
  // Issue 12, attack 6: the `airlock serve` cookie reaches previews (cookies are not port-scoped).
  it('never hands Airlock\'s own cookie to the sandbox, on the first request or later ones', async () => {
    const echo = http.createServer((req, res) => res.end(`cookie=${req.headers.cookie ?? ''}`));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
    const published = await publishPort(client, (echo.address() as net.AddressInfo).port);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const ask = () =>
      new Promise<string>((resolve, reject) => {
        http
          .get(published.url, { agent, headers: { cookie: 'theme=dark; airlock_token_41234=s3cr3t-serve-token; x=1' } }, (res) => {
            let body = '';
            res.on('data', (d) => (body += d));
            res.on('end', () => resolve(body));
          })
          .on('error', reject);
      });
    try {
      const answers = [await ask(), await ask(), await ask()]; // one connection: later heads too
      for (const a of answers) {
        expect(a).not.toContain('s3cr3t');
        expect(a).toBe(`cookie=theme=dark; airlock_token_41234=${'x'.repeat('s3cr3t-serve-token'.length)}; x=1`);
      }
    } finally {
      agent.destroy();
      await published.close();
      await new Promise((r) => echo.close(r));
    }
  });

  it('pipes a host loopback port (127.0.0.1 and ::1) to the sandbox port as http://localhost:<port> and closes on dispose', async () => {
    const published = await publishPort(client, appPort);
    expect(published.url).toBe(`http://localhost:${published.hostPort}/`);
    expect(published.hostPort).not.toBe(appPort);
    expect(await get(`${published.url}hello`)).toBe('preview says /hello');
    const bodies = await Promise.all(Array.from({ length: 10 }, (_, i) => get(`${published.url}n${i}`)));
    expect(bodies).toEqual(Array.from({ length: 10 }, (_, i) => `preview says /n${i}`));
    await published.close();
    expect(await connectOutcome(published.hostPort)).toBe('refused');
  });

  it('closes the host connection when nothing listens on the sandbox port', async () => {
    const idle = net.createServer();
    await new Promise<void>((r) => idle.listen(0, '127.0.0.1', r));
    const freePort = (idle.address() as net.AddressInfo).port;
    await new Promise((r) => idle.close(r));
    const published = await publishPort(client, freePort);
    expect(await connectOutcome(published.hostPort)).toBe('closed');
    await published.close();
  });

  it('refuses an invalid sandbox port with a typed error', async () => {
    await expect(publishPort(client, 0)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(publishPort(client, 70000)).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });
});

/** A fake sandbox server on loopback (reached through the channel) that counts what reaches it. */
interface FakeSandboxServer {
  port: number;
  connections: number;
  bytes: number;
  close(): Promise<void>;
}

async function fakeSandboxServer(onConnection: (socket: net.Socket) => void): Promise<FakeSandboxServer> {
  const server = net.createServer((socket) => {
    fake.connections += 1;
    socket.on('data', (d: Buffer) => (fake.bytes += d.length));
    socket.on('error', () => socket.destroy());
    onConnection(socket);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const fake: FakeSandboxServer = {
    port: (server.address() as net.AddressInfo).port,
    connections: 0,
    bytes: 0,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
  return fake;
}

/** Answers the first request head with exactly the bytes that reached it. */
function echoHead(socket: net.Socket): void {
  let seen = Buffer.alloc(0);
  socket.on('data', (d: Buffer) => {
    seen = Buffer.concat([seen, d]);
    if (!seen.includes('\r\n\r\n')) return;
    socket.end(Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${seen.length}\r\nConnection: close\r\n\r\n`), seen]));
  });
}

/** Sends `parts` (one write each, `gapMs` apart) and collects everything until the connection closes. */
function exchange(port: number, parts: Array<string | Buffer>, opts: { gapMs?: number; end?: boolean; waitFirst?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const got: Buffer[] = [];
    const send = async (): Promise<void> => {
      for (const part of parts) {
        s.write(part);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
      if (opts.end) s.end();
    };
    s.on('data', (d: Buffer) => {
      got.push(d);
      if (opts.waitFirst && got.length === 1) void send();
    });
    s.on('error', reject);
    s.on('close', () => resolve(Buffer.concat(got).toString('latin1')));
    s.on('connect', () => {
      if (!opts.waitFirst) void send();
    });
  });
}

const statusOf = (response: string): string => response.slice(0, response.indexOf('\r\n'));
const bodyOf = (response: string): string => response.slice(response.indexOf('\r\n\r\n') + 4);

describe('publishPort refuses other Host names (DNS rebinding)', () => {
  let web: FakeSandboxServer;
  let calls = 0;
  const counting: SandboxPortConnector = {
    connectToSandboxPort(port) {
      calls += 1;
      return client.connectToSandboxPort(port);
    },
  };

  beforeAll(async () => {
    web = await fakeSandboxServer(echoHead);
  });
  afterAll(() => web.close());
  beforeEach(() => {
    web.connections = 0;
    web.bytes = 0;
    calls = 0;
  });

  it.each(['localhost', 'LocalHost'])('forwards a request for %s:<port> with its bytes unchanged', async (name) => {
    const published = await publishPort(counting, web.port);
    const request = `GET /app?x=1 HTTP/1.1\r\nHost: ${name}:${published.hostPort}\r\nConnection: close\r\n\r\n`;
    const response = await exchange(published.hostPort, [request]);
    expect(statusOf(response)).toBe('HTTP/1.1 200 OK');
    expect(bodyOf(response)).toBe(request);
    await published.close();
  });

  it('forwards a request head split across many small writes', async () => {
    const published = await publishPort(counting, web.port);
    const request = `POST /x HTTP/1.1\r\nHost: localhost:${published.hostPort}\r\nX-Pad: ${'p'.repeat(200)}\r\nConnection: close\r\n\r\n`;
    const parts = request.match(/[\s\S]{1,3}/g) ?? [];
    const response = await exchange(published.hostPort, parts, { gapMs: 1 });
    expect(statusOf(response)).toBe('HTTP/1.1 200 OK');
    expect(bodyOf(response)).toBe(request);
    await published.close();
  });

  const refused: Array<[string, (port: number) => string]> = [
    ['another host name', (p) => `GET / HTTP/1.1\r\nHost: rebind.airlock-test.invalid:${p}\r\nConnection: close\r\n\r\n`],
    ['no Host header', () => 'GET / HTTP/1.1\r\nConnection: close\r\n\r\n'],
    ['no Host header (HTTP/1.0)', () => 'GET / HTTP/1.0\r\n\r\n'],
    ['another port', (p) => `GET / HTTP/1.1\r\nHost: localhost:${p === 65535 ? 1 : p + 1}\r\n\r\n`],
    ['a loopback name without the port', () => 'GET / HTTP/1.1\r\nHost: localhost\r\n\r\n'],
    // Issue 22, item 6: 127.0.0.1 is the browser UI's site; a preview answering there could set or shadow its cookies.
    ["the UI's site 127.0.0.1", (p) => `GET / HTTP/1.1\r\nHost: 127.0.0.1:${p}\r\n\r\n`],
    ['[::1]', (p) => `GET / HTTP/1.1\r\nHost: [::1]:${p}\r\n\r\n`],
    ['a second Host header', (p) => `GET / HTTP/1.1\r\nHost: localhost:${p}\r\nHost: rebind.airlock-test.invalid:${p}\r\n\r\n`],
    ['a folded Host header', (p) => `GET / HTTP/1.1\r\nHost: localhost:${p}\r\n rebind.airlock-test.invalid\r\n\r\n`],
    ['a WebSocket upgrade', (p) => `GET /ws HTTP/1.1\r\nHost: rebind.airlock-test.invalid:${p}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`],
    ['an unusual method', (p) => `PROPFIND / HTTP/1.1\r\nHost: rebind.airlock-test.invalid:${p}\r\n\r\n`],
    ['a lowercase method', (p) => `patch / HTTP/1.1\r\nHost: rebind.airlock-test.invalid:${p}\r\nContent-Length: 2\r\n\r\nhi`],
  ];
  it.each(refused)('refuses a request with %s without touching the sandbox', async (_, request) => {
    const published = await publishPort(counting, web.port);
    const response = await exchange(published.hostPort, [request(published.hostPort)]);
    expect(statusOf(response)).toBe('HTTP/1.1 421 Misdirected Request');
    expect(bodyOf(response)).toContain(`open http://localhost:${published.hostPort}/ instead`);
    expect(bodyOf(response)).toContain('DNS rebinding');
    expect({ calls, connections: web.connections }).toEqual({ calls: 0, connections: 0 });
    await published.close();
  });

  it('names the refused host in its answer', async () => {
    const published = await publishPort(counting, web.port);
    const response = await exchange(published.hostPort, [`GET / HTTP/1.1\r\nHost: Rebind.airlock-test.invalid:${published.hostPort}\r\n\r\n`]);
    expect(bodyOf(response)).toContain(`refused a request for host Rebind.airlock-test.invalid:${published.hostPort}`);
    await published.close();
  });

  it('cuts off a request head that is too slow or too long', async () => {
    const published = await publishPort(counting, web.port, { headTimeoutMs: 150 });
    const slow = await exchange(published.hostPort, [`GET / HTTP/1.1\r\nHost: localhost:${published.hostPort}\r\n`]);
    expect(statusOf(slow)).toBe('HTTP/1.1 408 Request Timeout');
    const long = await exchange(published.hostPort, [`GET / HTTP/1.1\r\nHost: localhost:${published.hostPort}\r\nX-Big: ${'b'.repeat(17_000)}\r\n\r\n`]);
    expect(statusOf(long)).toBe('HTTP/1.1 431 Request Header Fields Too Large');
    expect({ calls, connections: web.connections }).toEqual({ calls: 0, connections: 0 });
    await published.close();
  });

  it('still checks a connection that stayed silent at first (a browser preconnect)', async () => {
    const published = await publishPort(counting, web.port, { serverFirstGraceMs: 20 });
    const request = `GET / HTTP/1.1\r\nHost: rebind.airlock-test.invalid:${published.hostPort}\r\n\r\n`;
    const response = await new Promise<string>((resolve, reject) => {
      const s = net.connect(published.hostPort, '127.0.0.1');
      const got: Buffer[] = [];
      s.on('data', (d: Buffer) => got.push(d));
      s.on('error', reject);
      s.on('close', () => resolve(Buffer.concat(got).toString('latin1')));
      s.on('connect', () => setTimeout(() => s.write(request), 200));
    });
    expect(statusOf(response)).toBe('HTTP/1.1 421 Misdirected Request');
    expect(web.bytes).toBe(0);
    await published.close();
  });

  it('passes other protocols through untouched', async () => {
    const echo = await fakeSandboxServer((socket) => socket.pipe(socket));
    const published = await publishPort(counting, echo.port);
    const binary = Buffer.from('\x00\x01hello', 'latin1');
    expect(await exchange(published.hostPort, [binary], { end: true })).toBe('\x00\x01hello');
    // Text that is not a request line, and a long token that is no method.
    expect(await exchange(published.hostPort, ['PING\r\n'], { end: true })).toBe('PING\r\n');
    expect(await exchange(published.hostPort, ['x'.repeat(64)], { end: true })).toBe('x'.repeat(64));
    await published.close();
    await echo.close();
  });

  it('lets a server-first protocol greet a silent client', async () => {
    const greeter = await fakeSandboxServer((socket) => {
      socket.write('220 sandbox ready\r\n');
      socket.pipe(socket);
    });
    const published = await publishPort(counting, greeter.port, { serverFirstGraceMs: 20 });
    const response = await exchange(published.hostPort, ['QUIT\r\n'], { waitFirst: true, end: true });
    expect(response).toBe('220 sandbox ready\r\nQUIT\r\n');
    await published.close();
    await greeter.close();
  });
});

describe('PreviewPorts', () => {
  it('publishes once per port, lists, and closes everything at the end of the run', async () => {
    const ports = new PreviewPorts(client);
    const events: string[] = [];
    ports.onDidChange((e) => events.push(e.type));
    const a = await ports.publish(appPort);
    const again = await ports.publish(appPort);
    expect(again.hostPort).toBe(a.hostPort);
    expect(ports.list()).toEqual([{ sandboxPort: appPort, hostPort: a.hostPort, url: a.url }]);
    expect(await get(a.url)).toBe('preview says /');
    await ports.closeAll();
    expect(events).toEqual(['published', 'unpublished']);
    expect(await connectOutcome(a.hostPort)).toBe('refused');
    await expect(ports.publish(appPort)).rejects.toMatchObject({ kind: 'CANCELLED' });
  });
});
