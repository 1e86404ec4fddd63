import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

// Issue 12, attack 3: 2 GB of command output leaves the host's memory bounded and its log capped.
// The host side (real ChannelClient + RunTerminal) runs in its own process so its RSS is its own.

const FLOOD = 2 * 1024 ** 3;
const LOG_CAP = 64 * 1024 * 1024;
const host = fileURLToPath(new URL('../fixtures/flood/flood-host.ts', import.meta.url));

describe('a 2 GB flood of command output', () => {
  let dir = '';
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('keeps host memory bounded and the terminal log capped, with a visible marker', async () => {
    dir = await mkdtemp(join(tmpdir(), 'airlock-flood-'));
    const log = join(dir, 'terminal.log');
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', host, log, String(LOG_CAP)], {
      env: { ...process.env, AIRLOCK_FLOOD_BYTES: String(FLOOD) },
      maxBuffer: 1024 * 1024,
    });
    const figures = JSON.parse(stdout.trim().split('\n').at(-1) as string) as {
      outcome: string; received: number; logBytes: number; droppedBytes: number; startRssMB: number; peakRssMB: number; maxRssMB: number; seconds: number;
    };
    process.stdout.write(`[host-flood] ${JSON.stringify(figures)}\n`);
    expect(figures.outcome).toBe('exit 0');
    expect(figures.received).toBe(FLOOD);
    expect(figures.logBytes).toBeLessThanOrEqual(LOG_CAP + 1024);
    expect(figures.droppedBytes).toBeGreaterThanOrEqual(FLOOD - LOG_CAP);
    // Bounded: the flood is 2048 MB; the host grows by a small fraction of it.
    expect(figures.peakRssMB - figures.startRssMB).toBeLessThan(256);
    const tail = (await readFile(log)).subarray(-400).toString('utf8');
    expect(tail).toMatch(/terminal log limit of 67108864 bytes reached/);
    expect(tail).toMatch(/bytes of output in all were not kept/);
  }, 120_000);
});
