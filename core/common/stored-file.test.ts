import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SettingsStore } from '../settings/settings-store';
import { StoredFile } from './stored-file';

const exec = promisify(execFile);
type Counts = Record<string, number>;
const counts = (file: string) => new StoredFile<Counts>(file, { parse: (_f, t) => JSON.parse(t) as Counts, empty: () => ({}) });

describe('StoredFile (docs/architecture.md §5, "Stored files")', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'airlock-stored-file-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('two stores of one file updating at once lose neither update', async () => {
    const file = path.join(dir, 'counts.json');
    const [a, b] = [counts(file), counts(file)];
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).update((c) => ({ ...c, [`k${i}`]: i }))));
    expect(Object.keys(await a.read())).toHaveLength(20);
    // Private, and no temporary file or lock left beside it.
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readdir(dir)).toEqual(['counts.json']);
  });

  it('two processes updating one file at once lose neither update', async () => {
    const file = path.join(dir, 'counts.json');
    const script = path.join(dir, 'bump.mts');
    await writeFile(script, `import { StoredFile } from ${JSON.stringify(path.resolve(import.meta.dirname, 'stored-file.ts'))};\n` +
      `const f = new StoredFile(process.argv[2], { parse: (_f, t) => JSON.parse(t), empty: () => ({}) });\n` +
      // Both start together (a shared start time), so their updates interleave.
      `while (Date.now() < Number(process.argv[4])) await new Promise((r) => setTimeout(r, 5));\n` +
      `for (let i = 0; i < 100; i++) await f.update((c) => ({ ...c, [process.argv[3]]: (c[process.argv[3]] ?? 0) + 1 }));\n`);
    const tsx = path.resolve(import.meta.dirname, '..', '..', 'node_modules', '.bin', 'tsx');
    const at = String(Date.now() + 4000);
    await Promise.all(['a', 'b'].map((who) => exec(tsx, [script, file, who, at])));
    expect(await counts(file).read()).toEqual({ a: 100, b: 100 });
  }, 60_000);

  it('a damaged file is an error naming it, and an update does not write over it', async () => {
    const file = path.join(dir, 'counts.json');
    await writeFile(file, '{ not json');
    const strict = new StoredFile<Counts>(file, {
      parse: (f, t) => {
        try {
          return JSON.parse(t) as Counts;
        } catch {
          throw new Error(`${f} is damaged; fix or delete it`);
        }
      },
      empty: () => ({}),
    });
    await expect(strict.update((c) => ({ ...c, x: 1 }))).rejects.toThrow(`${file} is damaged`);
    expect(await readFile(file, 'utf8')).toBe('{ not json');
    // The lock is released after the failure: the next update is not stuck.
    await writeFile(file, '{}');
    expect(await strict.update((c) => ({ ...c, x: 1 }))).toEqual({ x: 1 });
  });

  it('settings: two saves at once both land', async () => {
    const store = new SettingsStore(dir);
    await Promise.all([store.update({ theme: 'dark' }), store.update({ notifications: false }), store.update({ transcripts: true })]);
    expect(await new SettingsStore(dir).get()).toMatchObject({ theme: 'dark', notifications: false, transcripts: true });
  });
});
