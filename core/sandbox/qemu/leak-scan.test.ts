import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileContains } from './leak-scan';

describe('fileContains', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it('finds a needle anywhere, including across the 4 MiB read chunks, and not when absent', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-leak-'));
    dirs.push(dir);
    const file = path.join(dir, 'blob');
    const body = Buffer.alloc(9 * 1024 * 1024, 0x61);
    Buffer.from('CANARY-xyz').copy(body, 4 * 1024 * 1024 - 4); // straddles the first chunk border
    await writeFile(file, body);
    expect(await fileContains(file, 'CANARY-xyz')).toBe(true);
    expect(await fileContains(file, 'CANARY-abc')).toBe(false);
  });
});
