import http from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelClient } from '../channel/channel-client';
import { startLocalHelper, type LocalHelper } from '../channel/local-helper';
import { PreviewPorts, publishPort } from './preview-ports';

// A real channel to a local helper process: its "sandbox ports" are this machine's loopback ports.
let helper: LocalHelper;
let client: ChannelClient;
let app: http.Server;
let appPort = 0;

beforeAll(async () => {
  helper = await startLocalHelper();
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
      s.write('GET / HTTP/1.0\r\n\r\n');
      s.once('data', () => {
        s.destroy();
        resolve('open');
      });
    });
  });
}

describe('publishPort', () => {
  it('pipes a host 127.0.0.1 port to the sandbox port and closes on dispose', async () => {
    const published = await publishPort(client, appPort);
    expect(published.url).toBe(`http://127.0.0.1:${published.hostPort}/`);
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
