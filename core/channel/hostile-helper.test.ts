import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { ChannelClient, MAX_SANDBOX_CONNECTIONS, type ConnectionsRefused } from './channel-client';
import { encodeFrame, FrameType, STREAM_WINDOW_BYTES } from './protocol';
import { startFakeHelper, type FakeHelper } from './testing/fake-helper';

// Attack 3 of issue 12: everything the helper sends is bounded on the host, whatever the helper says.

const MiB = 1024 * 1024;
/** Waits for an event on a loaded machine: generous, never a timing assertion. */
const WAIT = { timeout: 30_000, interval: 20 };

async function connected(): Promise<{ helper: FakeHelper; client: ChannelClient }> {
  const helper = startFakeHelper();
  const client = await ChannelClient.connect(helper.stream);
  return { helper, client };
}

async function rejection(p: Promise<unknown>): Promise<AirlockError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AirlockError);
  return err as AirlockError;
}

describe('a lying helper cannot make the host keep more than it asked for', () => {
  let client: ChannelClient | undefined;
  afterEach(() => client?.dispose());

  it('output past maxOutputBytes is dropped on the host and the exit says truncated', async () => {
    const c = await connected();
    client = c.client;
    const running = c.client.run({ argv: ['yes'], maxOutputBytes: MiB });
    const spawn = await c.helper.request('spawn');
    c.helper.send({ t: 'res', id: spawn.id, ok: true, value: { pid: 2 } });
    // Within the window (so no protocol error), but three times the cap; the helper claims no truncation.
    c.helper.sendData((spawn as { stream: number }).stream, Buffer.alloc(3 * MiB, 0x79));
    c.helper.send({ t: 'exit', stream: (spawn as { stream: number }).stream, info: { exitCode: 0, signal: null, timedOut: false, truncated: false, durationMs: 1, outputBytes: 5 } });
    const r = await running;
    expect(r.stdout.length).toBeLessThanOrEqual(MiB + 256);
    expect(r.stdout.length).toBeGreaterThanOrEqual(MiB);
    expect(r.truncated).toBe(true);
    // No credit past the cap: a helper that keeps going is stopped by the window.
    expect(c.helper.acked.get((spawn as { stream: number }).stream) ?? 0).toBeLessThanOrEqual(MiB + 256);
  });

  it('run() without a cap still keeps at most its default', async () => {
    const c = await connected();
    client = c.client;
    void c.client.run({ argv: ['yes'] }).catch(() => undefined);
    const spawn = await c.helper.request('spawn');
    expect((spawn as unknown as { spawn: { maxOutputBytes?: number } }).spawn.maxOutputBytes).toBe(64 * MiB);
  });

  it('a window overrun is a protocol error that fails the command with a clear message', async () => {
    const c = await connected();
    client = c.client;
    const proc = c.client.spawn({ argv: ['yes'], maxOutputBytes: 1024 });
    const closed = new Promise<{ reason: string }>((r) => c.client.onDidClose(r));
    const spawn = await c.helper.request('spawn');
    c.helper.send({ t: 'res', id: spawn.id, ok: true, value: { pid: 2 } });
    // Past its cap the command gets no credit; a helper that ignores that runs out of window.
    c.helper.sendData((spawn as { stream: number }).stream, Buffer.alloc(STREAM_WINDOW_BYTES + 64 * 1024, 1));
    expect((await closed).reason).toMatch(/flow-control violation.*window of 4194304/);
    const err = await rejection(proc.exited);
    expect(err.kind).toBe('CHANNEL_CLOSED');
    expect(err.message).toMatch(/flow-control violation/);
  });

  it('data sprayed on streams the host never opened gets no credit', async () => {
    const c = await connected();
    client = c.client;
    for (let id = 1001; id < 1201; id += 2) c.helper.sendData(id, Buffer.alloc(MiB, 2), FrameType.data);
    const listing = c.client.list('/');
    const list = await c.helper.request('list');
    c.helper.send({ t: 'res', id: list.id, ok: true, value: [] });
    await listing; // answered after the spray: everything above was processed
    expect([...c.helper.acked.keys()].filter((id) => id >= 1001)).toEqual([]);
  });

  it('readFile refuses more bytes than it asked for', async () => {
    const c = await connected();
    client = c.client;
    const reading = c.client.readFile('/etc/hostname', { maxBytes: 1024 });
    const req = await c.helper.request('readFile');
    c.helper.sendData((req as { stream: number }).stream, Buffer.alloc(MiB, 0x41), FrameType.data);
    c.helper.sendRaw(encodeFrame(FrameType.end, (req as { stream: number }).stream));
    c.helper.send({ t: 'res', id: req.id, ok: true, value: { size: 1024 } }); // A lie: it sent a MiB.
    const err = await rejection(reading);
    expect(err.kind).toBe('SANDBOX_FAILED');
    expect(err.message).toMatch(/more than the 1024 bytes asked for/);
    expect(c.helper.resets.has((req as { stream: number }).stream)).toBe(true);
  });

  it('bogus frames close the channel instead of reaching callers', async () => {
    const c = await connected();
    client = c.client;
    const pending = rejection(c.client.list('/'));
    const closed = new Promise<{ reason: string }>((r) => c.client.onDidClose(r));
    // An ack frame with a 3-byte payload.
    const bogus = Buffer.from([0, 0, 0, 8, FrameType.ack, 0, 0, 0, 1, 1, 2, 3]);
    c.helper.sendRaw(bogus);
    expect((await closed).reason).toMatch(/malformed frame/);
    expect((await pending).kind).toBe('CHANNEL_CLOSED');
  });

  describe('connections into host services', () => {
    let server: Server;
    const sockets: Socket[] = [];
    afterEach(async () => {
      for (const s of sockets) s.destroy();
      sockets.length = 0;
      await new Promise((r) => server?.close(r));
    });

    it(`at most ${MAX_SANDBOX_CONNECTIONS} at once; the rest are reset`, async () => {
      server = createServer((s) => sockets.push(s));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as AddressInfo).port;
      const c = await connected();
      client = c.client;
      let opened = 0;
      const exposing = c.client.exposeHostService(0, () => {
        opened += 1;
        return connect(port, '127.0.0.1');
      });
      const listen = await c.helper.request('listen');
      c.helper.send({ t: 'res', id: listen.id, ok: true, value: { port: 4000 } });
      await exposing;
      const listenerId = (listen as { listenerId: number }).listenerId;
      const extra = 20;
      for (let i = 0; i < MAX_SANDBOX_CONNECTIONS + extra; i++) c.helper.send({ t: 'accept', listenerId, stream: 2 + 2 * i });
      await vi.waitFor(() => expect(c.helper.resets.size).toBe(extra), WAIT);
      expect(opened).toBe(MAX_SANDBOX_CONNECTIONS);
    });

    // Issue 44: a slot is held from the accept until both directions are done, whichever side ends
    // first, or until either side resets; reaching the cap is an event that names the service.
    it('gives a slot back when both directions are done or either side resets, and says what the cap refused', async () => {
      server = createServer((s) => {
        s.on('error', () => undefined); // The resets below.
        sockets.push(s);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      const port = (server.address() as AddressInfo).port;
      const c = await connected();
      client = c.client;
      const events: ConnectionsRefused[] = [];
      c.client.onDidRefuseConnections((e) => events.push(e));
      const exposing = c.client.exposeHostService(0, () => connect(port, '127.0.0.1'), { name: 'model proxy' });
      const listen = await c.helper.request('listen');
      c.helper.send({ t: 'res', id: listen.id, ok: true, value: { port: 4000 } });
      await exposing;
      const listenerId = (listen as { listenerId: number }).listenerId;
      const stream = (i: number) => 2 + 2 * i;
      for (let i = 0; i < MAX_SANDBOX_CONNECTIONS; i++) c.helper.send({ t: 'accept', listenerId, stream: stream(i) });
      await vi.waitFor(() => expect(sockets).toHaveLength(MAX_SANDBOX_CONNECTIONS), WAIT);
      expect(c.client.openConnections).toBe(MAX_SANDBOX_CONNECTIONS);
      for (let i = 0; i < 3; i++) c.helper.send({ t: 'accept', listenerId, stream: stream(1000 + i) });
      await vi.waitFor(() => expect(c.helper.resets.size).toBe(3), WAIT);
      expect(c.helper.resets.get(stream(1000))).toMatch(/too many open connections \(at most 256\)/);
      expect(events).toEqual([{ service: 'model proxy', limit: MAX_SANDBOX_CONNECTIONS, refused: 1, ended: false }]);

      // The host's side ends first (a server closing an idle keep-alive connection): the slot is
      // held until the sandbox's side ends too, then given back.
      const first = sockets[0]!;
      first.end();
      await vi.waitFor(() => expect(c.helper.ends.has(stream(0))).toBe(true), WAIT);
      expect(c.client.openConnections).toBe(MAX_SANDBOX_CONNECTIONS);
      c.helper.sendRaw(encodeFrame(FrameType.end, stream(0)));
      await vi.waitFor(() => expect(c.client.openConnections).toBe(MAX_SANDBOX_CONNECTIONS - 1), WAIT);
      // The sandbox's side ends first: the host ends its socket, the server answers, the slot is back.
      c.helper.sendRaw(encodeFrame(FrameType.end, stream(1)));
      await vi.waitFor(() => expect(c.client.openConnections).toBe(MAX_SANDBOX_CONNECTIONS - 2), WAIT);
      expect(c.helper.ends.has(stream(1))).toBe(true);
      // The sandbox resets one; the host's server resets another.
      c.helper.sendRaw(encodeFrame(FrameType.reset, stream(2), Buffer.from('gone')));
      await vi.waitFor(() => expect(c.client.openConnections).toBe(MAX_SANDBOX_CONNECTIONS - 3), WAIT);
      sockets[3]!.resetAndDestroy();
      await vi.waitFor(() => expect(c.client.openConnections).toBe(MAX_SANDBOX_CONNECTIONS - 4), WAIT);
      expect(c.helper.resets.has(stream(3))).toBe(true);

      // Room again: the next connection is accepted, and the episode's total is reported.
      c.helper.send({ t: 'accept', listenerId, stream: stream(2000) });
      await vi.waitFor(() => expect(sockets).toHaveLength(MAX_SANDBOX_CONNECTIONS + 1), WAIT);
      expect(c.helper.resets.has(stream(2000))).toBe(false);
      expect(events).toEqual([
        { service: 'model proxy', limit: MAX_SANDBOX_CONNECTIONS, refused: 1, ended: false },
        { service: 'model proxy', limit: MAX_SANDBOX_CONNECTIONS, refused: 3, ended: true },
      ]);
    }, 120_000);
  });
});
