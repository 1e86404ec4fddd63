import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { TerminalOutput } from '../common/terminal-output';
import { RunTerminal } from './run-terminal';

describe('RunTerminal log cap', () => {
  let dir = '';
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('keeps at most maxLogBytes, says so once in the log and the live view, and counts the rest', async () => {
    dir = await mkdtemp(join(tmpdir(), 'airlock-term-'));
    const pushed: TerminalOutput[] = [];
    const t = new RunTerminal('run:r-1-00000000', 'r-1-00000000', join(dir, 't.log'), (c) => pushed.push(c), { maxLogBytes: 1000 });
    for (let i = 0; i < 100; i++) t.write(Buffer.alloc(100, 0x61));
    t.exit(0);
    let log = '';
    await vi.waitFor(async () => {
      log = await readFile(join(dir, 't.log'), 'utf8');
      expect(log).toMatch(/not kept\x1b\[0m\r\n$/);
    });
    expect(log.startsWith('a'.repeat(1000))).toBe(true);
    expect(log.length).toBeLessThan(1000 + 300);
    expect(log.match(/terminal log limit of 1000 bytes reached/g)).toHaveLength(1);
    expect(log).toMatch(/9000 bytes of output in all were not kept/);
    expect(t.droppedBytes).toBe(9000);
    const live = Buffer.concat(pushed.flatMap((c) => (c.kind === 'bytes' ? [c.bytes] : []))).toString('utf8');
    expect(live).toBe(log);
    const last = pushed.filter((c) => c.kind === 'bytes').at(-1);
    expect(last?.kind === 'bytes' && last.end).toBe(Buffer.byteLength(log));
  });
});
