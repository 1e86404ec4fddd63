import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { keepCappedLog } from './capped-log';

// Issue 12, attack 3: the VM helper log cannot grow without bound, whatever the guest writes.
describe('keepCappedLog', () => {
  let dir = '';
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise((r) => (server ? server.close(r) : r(undefined)));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('keeps at most the cap plus one marker, and keeps draining the guest', async () => {
    dir = await mkdtemp(join(tmpdir(), 'airlock-vmlog-'));
    const sock = join(dir, 'hl.sock');
    const file = join(dir, 'helper.log');
    // The reader starts before the socket exists (QEMU still starting): it retries.
    const log = keepCappedLog(sock, file, 1024 * 1024);
    const total = 64 * 1024 * 1024;
    let guest: Socket | undefined;
    server = createServer((s) => {
      guest = s;
      const chunk = Buffer.alloc(64 * 1024, 0x65);
      let sent = 0;
      const pump = () => {
        while (sent < total) {
          sent += chunk.length;
          if (!s.write(chunk)) return void s.once('drain', pump);
        }
        s.end();
      };
      pump();
    });
    await new Promise((r) => setTimeout(r, 60));
    await new Promise<void>((r) => server!.listen(sock, r));
    await log.connected;
    await vi.waitFor(() => expect(log.receivedBytes).toBe(total), { timeout: 20_000 });
    log.dispose();
    guest?.destroy();
    await vi.waitFor(async () => expect((await readFile(file, 'utf8')).endsWith('the rest is not kept\n')).toBe(true));
    expect((await stat(file)).size).toBeLessThan(1024 * 1024 + 200);
  });
});
