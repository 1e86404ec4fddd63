import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, readFile as readHostFile, rm, stat, writeFile as writeHostFile } from 'node:fs/promises';
import { createServer, connect as netConnect, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { ChannelClient } from './channel-client';
import { startLocalHelper, type LocalHelper } from './local-helper';
import { encodeControl, encodeFrame, FrameDecoder, FrameType, PROTOCOL_VERSION, STREAM_WINDOW_BYTES } from './protocol';

const NODE = process.execPath;

/** Alive and not a zombie (an orphan may wait a moment for its reaper). */
async function isAlive(pid: number): Promise<boolean> {
  try {
    const stat = await readHostFile(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function expectKind(promise: Promise<unknown>, kind: string, message?: RegExp): Promise<AirlockError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AirlockError);
  expect((err as AirlockError).kind).toBe(kind);
  if (message) expect((err as AirlockError).message).toMatch(message);
  return err as AirlockError;
}

describe('ChannelClient with a local helper', () => {
  let helper: LocalHelper;
  let client: ChannelClient;
  let dir: string;

  beforeAll(async () => {
    helper = await startLocalHelper({ env: { ...process.env, AIRLOCK_HELPER_CANARY: 'canary-7f3a' } });
    client = await ChannelClient.connect(helper.stream);
    dir = await mkdtemp(join(tmpdir(), 'airlock-channel-'));
  });

  afterAll(async () => {
    client?.dispose();
    await helper?.dispose();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('says hello with its identity', () => {
    expect(client.hello).toMatchObject({ version: PROTOCOL_VERSION, pid: helper.child.pid, uid: process.getuid!(), node: process.version });
    expect(typeof client.hello.pty).toBe('boolean');
  });

  it('runs a command and reports stdout, stderr and the exit code', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'echo out; echo err >&2; exit 7'] });
    expect(r.exitCode).toBe(7);
    expect(r.signal).toBeNull();
    expect(r.stdout.toString()).toBe('out\n');
    expect(r.stderr.toString()).toBe('err\n');
    expect(r).toMatchObject({ timedOut: false, truncated: false, outputBytes: 8 });
  });

  it('reports death by signal', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'kill -KILL $$'] });
    expect(r.exitCode).toBeNull();
    expect(r.signal).toBe('SIGKILL');
  });

  it('honours cwd and fails clearly on a missing command or directory', async () => {
    const r = await client.run({ argv: ['pwd'], cwd: dir });
    expect(r.stdout.toString().trim()).toBe(dir);
    await expectKind(client.run({ argv: ['airlock-no-such-command'] }), 'NOT_FOUND', /command not found: airlock-no-such-command/);
    await expectKind(client.run({ argv: ['true'], cwd: join(dir, 'missing') }), 'NOT_FOUND', /working directory/);
    await expectKind(client.run({ argv: [] }), 'INVALID_INPUT', /argv/);
  });

  it('runs as the agent or the helper only: any other `as` is refused; a helper not split from the agent says so in hello', async () => {
    await expectKind(client.run({ argv: ['true'], as: 'root' as never }), 'INVALID_INPUT', /malformed spawn request: spawn\.as: expected 'agent' or 'helper'/);
    expect((await client.run({ argv: ['true'], as: 'helper' })).exitCode).toBe(0);
    // This local helper runs as this process's user with no AIRLOCK_AGENT_USER: commands run as it.
    expect(client.hello.agentUid).toBe(process.getuid!());
  });

  it('multiplexes many commands at once', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => client.run({ argv: ['sh', '-c', `echo ${i}; echo e${i} >&2`] })),
    );
    results.forEach((r, i) => {
      expect(r.stdout.toString()).toBe(`${i}\n`);
      expect(r.stderr.toString()).toBe(`e${i}\n`);
    });
  });

  it('gives commands a clean environment plus what the caller passes, never the helper’s own', async () => {
    const r = await client.run({ argv: ['env'], env: { FOO: 'bar' } });
    const env = r.stdout.toString();
    expect(env).not.toContain('canary-7f3a');
    expect(env).not.toContain('AIRLOCK_HELPER_CANARY');
    expect(env).toMatch(/^FOO=bar$/m);
    expect(env).toMatch(/^PATH=/m);
    expect(env).toMatch(/^HOME=/m);
    expect(env).toMatch(/^LANG=C.UTF-8$/m);
    expect(env).toMatch(/^TERM=/m);
    expect(env.trim().split('\n')).toHaveLength(5);
  });

  it('makes commands the first choice of the OOM killer', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'sleep 0.3; cat /proc/self/oom_score_adj'] });
    expect(r.stdout.toString().trim()).toBe('1000');
  });

  it('writes stdin from a string and from a large stream', async () => {
    const small = await client.run({ argv: ['cat'], stdin: 'hello stdin' });
    expect(small.stdout.toString()).toBe('hello stdin');
    const total = 16 * 1024 * 1024;
    const source = Readable.from(
      (function* () {
        for (let sent = 0; sent < total; sent += 256 * 1024) yield Buffer.alloc(256 * 1024, sent & 0xff);
      })(),
    );
    const r = await client.run({ argv: ['wc', '-c'], stdin: source });
    expect(Number(r.stdout.toString().trim())).toBe(total);
  }, 60_000);

  it('pauses a stdin stream while the command does not read (backpressure)', async () => {
    let pulled = 0;
    const total = 32 * 1024 * 1024;
    const source = new Readable({
      read() {
        if (pulled >= total) {
          this.push(null);
          return;
        }
        pulled += 64 * 1024;
        this.push(Buffer.alloc(64 * 1024));
      },
    });
    // The command reads nothing until the test lets it go on.
    const go = join(dir, 'stdin-go');
    const running = client.run({ argv: ['sh', '-c', `while [ ! -e '${go}' ]; do sleep 0.05; done; wc -c`], stdin: source });
    // Pulling stops once the window and the buffers are full…
    let last = -1;
    await vi.waitFor(
      () => {
        const stable = pulled > 0 && pulled === last;
        last = pulled;
        expect(stable, 'pulling stopped').toBe(true);
      },
      { timeout: 20_000, interval: 200 },
    );
    // …at most a window plus buffers — not the whole 64 MiB.
    expect(pulled).toBeLessThan(12 * 1024 * 1024);
    await writeHostFile(go, '');
    const r = await running;
    expect(Number(r.stdout.toString().trim())).toBe(total);
  }, 60_000);

  it('streams large output intact', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'head -c 20000000 /dev/zero'] });
    expect(r.stdout.length).toBe(20_000_000);
    expect(r.outputBytes).toBe(20_000_000);
  }, 60_000);

  it('stops reading a command’s output while the host does not read the channel', async () => {
    // The command writes 200 × 1 MiB and records how many writes the pipe has taken.
    const progress = join(dir, 'progress');
    const script = `const fs = require('fs'); let i = 0;
      const f = () => { if (i >= 200) return; const ok = process.stdout.write(Buffer.alloc(1 << 20)); fs.writeFileSync(${JSON.stringify(progress)}, String(++i)); if (ok) setImmediate(f); else process.stdout.once('drain', f); };
      f();`;
    let received = 0;
    const proc = client.spawn({ argv: [NODE, '-e', script] });
    proc.onStdout((b) => (received += b.length));
    await vi.waitFor(() => expect(received > 0, 'output flowing').toBe(true), { timeout: 8000, interval: 50 });
    helper.stream.readable.pause();
    const written = async () => Number(await readHostFile(progress, 'utf8').catch(() => '0'));
    // Wait until the command is stuck (no progress for a while) or has written everything.
    let last = -1;
    await vi.waitFor(
      async () => {
        const now = await written();
        const stuck = now === last;
        last = now;
        expect(stuck || now >= 200, 'command stuck or done').toBe(true);
      },
      { timeout: 60_000, interval: 400 },
    );
    const whilePaused = await written();
    helper.stream.readable.resume();
    const info = await proc.exited;
    expect(info.outputBytes).toBe(200 * 1024 * 1024);
    expect(received).toBe(200 * 1024 * 1024);
    // Only the stream window plus pipe and socket buffers may be taken while nobody reads.
    expect(whilePaused).toBeLessThan(40);
  }, 120_000);

  it('caps output, marks the truncation and keeps draining', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'head -c 3000000 /dev/zero; echo done >&2'], maxOutputBytes: 1000 });
    expect(r.exitCode).toBe(0);
    expect(r.truncated).toBe(true);
    expect(r.outputBytes).toBe(3_000_005);
    expect(r.stdout.subarray(0, 1000).equals(Buffer.alloc(1000))).toBe(true);
    expect(r.stdout.subarray(1000).toString()).toMatch(/\[airlock: output truncated after 1000 bytes/);
    expect(r.stderr.length).toBe(0);
  });

  it('times out the whole tree, grandchildren included, and stays usable', async () => {
    const r = await client.run({ argv: ['sh', '-c', 'sleep 60 & echo $!; sleep 60'], timeoutMs: 500 });
    expect(r.timedOut).toBe(true);
    expect(r.signal).toBe('SIGTERM');
    const grandchild = Number(r.stdout.toString().trim());
    expect(grandchild).toBeGreaterThan(0);
    await vi.waitFor(async () => expect(!(await isAlive(grandchild)), `grandchild ${grandchild} gone`).toBe(true), { timeout: 8000, interval: 50 });
    expect((await client.run({ argv: ['echo', 'still here'] })).stdout.toString()).toBe('still here\n');
  });

  it('kills the whole tree: SIGTERM, then SIGKILL for what ignores it, escaped sessions too', async () => {
    const proc = client.spawn({ argv: ['sh', '-c', 'trap "" TERM; sleep 60 & echo $!; setsid sleep 60 & echo $!; wait'] });
    let out = '';
    proc.onStdout((b) => (out += b.toString()));
    await vi.waitFor(() => expect(out.trim().split('\n').length === 2, 'two pids printed').toBe(true), { timeout: 8000, interval: 50 });
    const pids = out.trim().split('\n').map(Number);
    for (const pid of pids) expect(await isAlive(pid)).toBe(true);
    proc.kill();
    const info = await proc.exited;
    expect(info.signal).toMatch(/SIGTERM|SIGKILL/);
    for (const pid of pids) await vi.waitFor(async () => expect(!(await isAlive(pid)), `descendant ${pid} gone`).toBe(true), { timeout: 8000, interval: 50 });
  });

  it('fails a PTY spawn clearly when node-pty is absent', async () => {
    if (client.hello.pty) return; // Covered by the Docker integration test where node-pty exists.
    await expectKind(client.run({ argv: ['true'], pty: { cols: 80, rows: 24 } }), 'IMAGE_INCOMPATIBLE', /node-pty/);
  });

  it('writes, reads and lists files', async () => {
    const data = randomBytes(3 * 1024 * 1024 + 17);
    const path = join(dir, 'nested', 'deeper', 'blob.bin');
    await client.writeFile(path, data, { mode: 0o750 });
    expect((await readHostFile(path)).equals(data)).toBe(true);
    expect((await stat(path)).mode & 0o777).toBe(0o750);
    expect((await client.readFile(path)).equals(data)).toBe(true);
    await client.writeFile(join(dir, 'nested', 'note.txt'), 'hi');
    expect(await client.list(join(dir, 'nested'))).toEqual([
      { name: 'deeper', type: 'dir', size: expect.any(Number), mode: expect.any(Number) },
      { name: 'note.txt', type: 'file', size: 2, mode: expect.any(Number) },
    ]);
    expect((await client.readFile(join(dir, 'nested', 'note.txt'), { maxBytes: 2 })).toString()).toBe('hi');
    await expectKind(client.readFile(path, { maxBytes: 1024 }), 'INVALID_INPUT', /larger than maxBytes/);
    await expectKind(client.readFile(join(dir, 'nope')), 'NOT_FOUND');
    await expectKind(client.list(join(dir, 'nope')), 'NOT_FOUND');
    await expectKind(client.writeFile(join(path, 'under-a-file'), 'x'), 'INVALID_INPUT');
  });

  for (const backend of ['fs', 'poll'] as const) {
    it(`watches a tree with ${backend} and reports debounced relative paths, minus ignored ones`, async () => {
      const root = join(dir, `watch-${backend}`);
      await mkdir(join(root, 'src'), { recursive: true });
      await mkdir(join(root, 'node_modules', 'x'), { recursive: true });
      await mkdir(join(root, '.git'), { recursive: true });
      const seen = new Set<string>();
      const batches: string[][] = [];
      const watch = await client.watch(
        root,
        (paths) => {
          batches.push(paths);
          for (const p of paths) seen.add(p);
        },
        { debounceMs: 50, ignore: ['.git/', 'node_modules/', '*.log'], backend },
      );
      try {
        await writeHostFile(join(root, 'src', 'a.ts'), 'a');
        await writeHostFile(join(root, 'b.txt'), 'b');
        await writeHostFile(join(root, 'node_modules', 'x', 'index.js'), 'x');
        await writeHostFile(join(root, '.git', 'HEAD'), 'ref');
        await writeHostFile(join(root, 'debug.log'), 'log');
        // Written last: once it is reported, anything about the ignored files would have been too.
        await writeHostFile(join(root, 'z-last.txt'), 'z');
        await vi.waitFor(() => expect(['src/a.ts', 'b.txt', 'z-last.txt'].every((p) => seen.has(p)), 'changes reported').toBe(true), { timeout: 8000, interval: 50 });
        for (const p of seen) expect(p).not.toMatch(/node_modules|\.git|\.log$/);
        // Debounced: a handful of batches, not one event per write.
        expect(batches.length).toBeLessThanOrEqual(3);
      } finally {
        watch.dispose();
      }
    });
  }

  it('fails a watch on a missing directory', async () => {
    await expectKind(client.watch(join(dir, 'nope'), () => undefined), 'NOT_FOUND');
  });

  describe('TCP forwarding', () => {
    let server: Server;
    let hostPort: number;

    beforeAll(async () => {
      // A host service that greets, echoes and answers the half-close with "bye".
      server = createServer({ allowHalfOpen: true }, (socket) => {
        socket.write('hello from host\n');
        socket.on('data', (d) => socket.write(`echo:${d.toString()}`));
        socket.on('end', () => socket.end('bye\n'));
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      hostPort = (server.address() as AddressInfo).port;
    });

    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    const sandboxClient = (port: number) => `
      const net = require('net');
      const s = net.connect({ host: '127.0.0.1', port: ${port}, allowHalfOpen: true });
      let got = '';
      s.on('data', (d) => { got += d; if (got.includes('hello from host') && !s.sent) { s.sent = true; s.write('ping'); setTimeout(() => s.end(), 100); } });
      s.on('end', () => { process.stdout.write(got); });
      s.on('error', (e) => { process.stdout.write('ERR ' + e.code); });
      s.on('close', () => process.stdout.write('|closed'));
    `;

    it('exposes a host service inside the sandbox on 127.0.0.1, with half-close', async () => {
      const exposed = await client.exposeHostService(0, () => netConnect({ host: '127.0.0.1', port: hostPort, allowHalfOpen: true }));
      try {
        expect(exposed.port).toBeGreaterThan(0);
        const r = await client.run({ argv: [NODE, '-e', sandboxClient(exposed.port)], timeoutMs: 15_000 });
        expect(r.stdout.toString()).toBe('hello from host\necho:pingbye\n|closed');
      } finally {
        exposed.dispose();
      }
    });

    it('answers on ::1 too where the sandbox has IPv6 loopback (localhost may resolve there first)', async () => {
      const exposed = await client.exposeHostService(0, () => netConnect({ host: '127.0.0.1', port: hostPort, allowHalfOpen: true }));
      try {
        const script = `require('net').connect({ host: '::1', port: ${exposed.port} }).on('data', (d) => { process.stdout.write(d); process.exit(0); }).on('error', (e) => { process.stdout.write(e.code); });`;
        const r = await client.run({ argv: [NODE, '-e', script], timeoutMs: 15_000 });
        expect(r.stdout.toString()).toBe('hello from host\n');
      } finally {
        exposed.dispose();
      }
    });

    it('propagates a failing host connection to the sandbox side', async () => {
      const dead = createServer();
      await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
      const deadPort = (dead.address() as AddressInfo).port;
      await new Promise<void>((r) => dead.close(() => r()));
      const exposed = await client.exposeHostService(0, () => netConnect({ host: '127.0.0.1', port: deadPort }));
      try {
        const r = await client.run({ argv: [NODE, '-e', sandboxClient(exposed.port)], timeoutMs: 15_000 });
        expect(r.stdout.toString()).toBe('ERR ECONNRESET|closed');
      } finally {
        exposed.dispose();
      }
    });

    it('refuses a port already in use in the sandbox', async () => {
      const exposed = await client.exposeHostService(0, () => netConnect({ host: '127.0.0.1', port: hostPort }));
      try {
        await expectKind(client.exposeHostService(exposed.port, () => netConnect({ host: '127.0.0.1', port: hostPort })), 'CONFLICT', /in use/);
      } finally {
        exposed.dispose();
      }
    });

    it('past a service’s cap a connection waits for a slot in the helper, never reset (issue 44)', async () => {
      // A host service that answers each connection after a moment, so connections overlap.
      let open = 0;
      let most = 0;
      const slow = createServer((socket) => {
        open += 1;
        most = Math.max(most, open);
        socket.on('close', () => (open -= 1));
        socket.once('data', () => setTimeout(() => socket.end('ok'), 50));
      });
      await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
      const refused: number[] = [];
      const watching = client.onDidRefuseConnections((e) => refused.push(e.refused));
      const exposed = await client.exposeHostService(0, () => netConnect({ host: '127.0.0.1', port: (slow.address() as AddressInfo).port }), { name: 'slow', maxConnections: 2 });
      try {
        const script = `
          const net = require('net');
          const one = () => new Promise((resolve) => {
            const s = net.connect(${exposed.port}, '127.0.0.1');
            let got = '';
            s.on('data', (d) => (got += d));
            s.on('error', (e) => (got = 'ERR ' + e.code));
            s.on('close', () => resolve(got));
            s.write('hi');
          });
          Promise.all(Array.from({ length: 8 }, one)).then((r) => process.stdout.write(JSON.stringify(r)));
        `;
        const r = await client.run({ argv: [NODE, '-e', script], timeoutMs: 30_000 });
        expect(JSON.parse(r.stdout.toString())).toEqual(Array.from({ length: 8 }, () => 'ok'));
        // Never more than the cap on the host at once, and nothing refused: the rest waited.
        expect(most).toBe(2);
        expect(refused).toEqual([]);
        await vi.waitFor(() => expect(client.openConnections).toBe(0), { timeout: 10_000, interval: 20 });
      } finally {
        watching.dispose();
        exposed.dispose();
        await new Promise<void>((r) => slow.close(() => r()));
      }
    });

    it('connects from the host to a port inside the sandbox, with half-close', async () => {
      const serverScript = `
        const net = require('net');
        const srv = net.createServer({ allowHalfOpen: true }, (s) => {
          let got = '';
          s.on('data', (d) => { got += d; });
          s.on('end', () => { s.end('got:' + got); srv.close(); });
        });
        srv.listen(0, '127.0.0.1', () => console.log(srv.address().port));
      `;
      const proc = client.spawn({ argv: [NODE, '-e', serverScript], timeoutMs: 20_000 });
      let out = '';
      proc.onStdout((b) => (out += b.toString()));
      await vi.waitFor(() => expect(/\d+\n/.test(out), 'sandbox server port').toBe(true), { timeout: 8000, interval: 50 });
      const duplex = await client.connectToSandboxPort(Number(out.trim()));
      let reply = '';
      duplex.on('data', (d: Buffer) => (reply += d.toString()));
      const ended = new Promise((r) => duplex.on('end', r));
      duplex.write('preview ');
      duplex.end('request');
      await ended;
      expect(reply).toBe('got:preview request');
      expect((await proc.exited).exitCode).toBe(0);
    });

    it('fails clearly when nothing listens on the sandbox port', async () => {
      const probe = createServer();
      await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
      const freePort = (probe.address() as AddressInfo).port;
      await new Promise<void>((r) => probe.close(() => r()));
      await expectKind(client.connectToSandboxPort(freePort), 'NOT_FOUND', /nothing listens/);
    });
  });
});

describe('a broken channel', () => {
  it('rejects every pending call with CHANNEL_CLOSED when the helper dies', async () => {
    const helper = await startLocalHelper({ env: process.env });
    try {
      const client = await ChannelClient.connect(helper.stream);
      const closed = new Promise<{ reason: string }>((r) => client.onDidClose(r));
      const proc = client.spawn({ argv: ['sleep', '60'] });
      const running = expectKind(client.run({ argv: ['sleep', '60'] }), 'CHANNEL_CLOSED');
      const dir = await mkdtemp(join(tmpdir(), 'airlock-broken-'));
      const watch = client.watch(dir, () => undefined, { backend: 'poll' });
      await watch;
      helper.child.kill('SIGKILL');
      await expectKind(proc.exited, 'CHANNEL_CLOSED');
      await running;
      await closed;
      await expectKind(client.readFile('/etc/hostname'), 'CHANNEL_CLOSED');
      await expectKind(client.spawn({ argv: ['true'] }).exited, 'CHANNEL_CLOSED');
      await rm(dir, { recursive: true, force: true });
    } finally {
      await helper.dispose();
    }
  });

  it('dispose() rejects pending calls and ends the helper and its commands', async () => {
    const helper = await startLocalHelper({ env: process.env });
    try {
      const client = await ChannelClient.connect(helper.stream);
      const proc = client.spawn({ argv: ['sh', '-c', 'sleep 60 & echo $!; wait'] });
      let out = '';
      proc.onStdout((b) => (out += b.toString()));
      await vi.waitFor(() => expect(out.includes('\n'), 'pid printed').toBe(true), { timeout: 8000, interval: 50 });
      const pid = Number(out.trim());
      const exited = new Promise((r) => helper.child.once('exit', r));
      client.dispose();
      await expectKind(proc.exited, 'CHANNEL_CLOSED');
      await exited;
      await vi.waitFor(async () => expect(!(await isAlive(pid)), 'command killed with the channel').toBe(true), { timeout: 8000, interval: 50 });
    } finally {
      await helper.dispose();
    }
  });

  it('closing the channel closes forwarded connections: with an error for those who listen, quietly otherwise', async () => {
    const helper = await startLocalHelper({ env: process.env });
    try {
      const client = await ChannelClient.connect(helper.stream);
      const script = `const s = require('net').createServer(() => {}).listen(0, '127.0.0.1', () => console.log(s.address().port));`;
      const proc = client.spawn({ argv: [NODE, '-e', script] });
      let out = '';
      proc.onStdout((b) => (out += b.toString()));
      await vi.waitFor(() => expect(/\d+\n/.test(out), 'server port').toBe(true), { timeout: 8000, interval: 50 });
      const quiet = await client.connectToSandboxPort(Number(out.trim()));
      const loud = await client.connectToSandboxPort(Number(out.trim()));
      const errors: Error[] = [];
      loud.on('error', (e) => errors.push(e));
      const closed = Promise.all([new Promise((r) => quiet.once('close', r)), new Promise((r) => loud.once('close', r))]);
      client.dispose();
      await closed;
      expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/channel closed/)]);
    } finally {
      await helper.dispose();
    }
  });

  it('the helper stops on a malformed frame and says why', async () => {
    const helper = await startLocalHelper({ env: process.env });
    try {
      const client = await ChannelClient.connect(helper.stream);
      const closed = new Promise<{ reason: string }>((r) => client.onDidClose(r));
      const exit = new Promise<number | null>((r) => helper.child.once('exit', (code) => r(code)));
      const pending = expectKind(client.run({ argv: ['sleep', '60'] }), 'CHANNEL_CLOSED');
      helper.stream.writable.write(Buffer.from([0x7f, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0]));
      expect(await exit).toBe(2);
      expect(helper.stderr()).toMatch(/malformed frame/);
      await closed;
      await pending;
    } finally {
      await helper.dispose();
    }
  });

  it('the helper keeps no books for a stream it does not know: data on it is dropped, never credited (issue 44)', async () => {
    const helper = await startLocalHelper({ env: process.env });
    try {
      // A bare host: frames in and out, so what the helper answers (acks included) is seen as sent.
      const decoder = new FrameDecoder();
      const acked = new Set<number>();
      const results: unknown[] = [];
      helper.child.stdout!.on('data', (chunk: Buffer) => {
        for (const f of decoder.push(chunk)) {
          if (f.type === FrameType.ack) acked.add(f.streamId);
          if (f.type === FrameType.control) {
            const m = JSON.parse(f.payload.toString()) as { t: string; value?: unknown };
            if (m.t === 'res') results.push(m.value);
          }
        }
      });
      const stdin = helper.child.stdin!;
      // Past a quarter window on streams nobody opened: an acknowledging helper would answer both.
      for (const id of [41, 43]) stdin.write(encodeFrame(FrameType.data, id, Buffer.alloc(STREAM_WINDOW_BYTES / 4 + 1)));
      stdin.write(encodeFrame(FrameType.stdout, 45, Buffer.alloc(16)));
      stdin.write(encodeControl({ t: 'req', id: 1, op: 'stats' }));
      await vi.waitFor(() => expect(results).toHaveLength(1), { timeout: 10_000, interval: 20 });
      expect(results[0]).toEqual({ streams: 0, sinks: 0, mux: 0, closedIdle: 0 });
      expect([...acked]).toEqual([]);
    } finally {
      await helper.dispose();
    }
  });

  it('the client closes on a malformed frame from the other side', async () => {
    const fromHelper = new PassThrough();
    const toHelper = new PassThrough();
    const stream = { readable: fromHelper, writable: toHelper, close: () => fromHelper.end() };
    fromHelper.write(encodeControl({ t: 'hello', version: PROTOCOL_VERSION, node: 'v18', uid: 1000, agentUid: 1000, pid: 1, pty: false }));
    const client = await ChannelClient.connect(stream);
    const closed = new Promise<{ reason: string }>((r) => client.onDidClose(r));
    const pending = expectKind(client.list('/'), 'CHANNEL_CLOSED', /malformed frame/);
    fromHelper.write(Buffer.from('this is not a frame'));
    expect((await closed).reason).toMatch(/malformed frame/);
    await pending;
  });

  // Code in the sandbox shares the helper's user, so the host treats helper output as untrusted.
  const hostile: Array<[string, (reqId: number) => object]> = [
    ['a response without an error', (id) => ({ t: 'res', id, ok: false })],
    ['a listing of the wrong shape', (id) => ({ t: 'res', id, ok: true, value: [{ name: 1 }] })],
    ['an accept on a host stream id', () => ({ t: 'accept', listenerId: 1, stream: 1 })],
    ['a watch batch that is not paths', () => ({ t: 'watch', watchId: 1, paths: 'x' })],
  ];
  for (const [what, message] of hostile) {
    it(`the client closes, without throwing, on ${what}`, async () => {
      const fromHelper = new PassThrough();
      const toHelper = new PassThrough();
      const stream = { readable: fromHelper, writable: toHelper, close: () => fromHelper.end() };
      fromHelper.write(encodeControl({ t: 'hello', version: PROTOCOL_VERSION, node: 'v18', uid: 1000, agentUid: 1000, pid: 1, pty: false }));
      const client = await ChannelClient.connect(stream);
      const closed = new Promise<{ reason: string }>((r) => client.onDidClose(r));
      const watching = client.watch('/', () => undefined).catch(() => undefined); // watch 1, request 1 (never answered)
      const pending = expectKind(client.list('/'), 'CHANNEL_CLOSED', /malformed/);
      fromHelper.write(encodeControl(message(2) as never));
      expect((await closed).reason).toMatch(/malformed/);
      await pending;
      await watching;
    });
  }

  it('connect() reports what a helper that never starts printed', async () => {
    const child = spawn('sh', ['-c', 'echo "sh: 1: node: not found"; exit 127'], { stdio: ['pipe', 'pipe', 'inherit'] });
    const stream = { readable: child.stdout!, writable: child.stdin!, close: () => child.kill() };
    child.stdin!.on('error', () => undefined);
    await expectKind(ChannelClient.connect(stream, { helloTimeoutMs: 10_000 }), 'SANDBOX_FAILED', /node: not found/);
  });

  it('connect() times out on a silent helper', async () => {
    const stream = { readable: new PassThrough(), writable: new PassThrough(), close: () => undefined };
    await expectKind(ChannelClient.connect(stream, { helloTimeoutMs: 200 }), 'SANDBOX_FAILED', /did not answer within 200 ms/);
  });
});
