import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pack, type Header } from 'tar-stream';
import { afterAll, describe, expect, it } from 'vitest';
import { checkPreparedTar } from './prepared-tar-check';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function tarOf(entries: Array<Partial<Header> & { name: string; body?: string }>): Promise<string> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const done = new Promise<void>((r) => p.on('end', () => r()));
  for (const { body, ...h } of entries) p.entry(h, body ?? '');
  p.finalize();
  await done;
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-tar-check-'));
  dirs.push(dir);
  const file = path.join(dir, 'state.tar');
  await writeFile(file, Buffer.concat(chunks));
  return file;
}

describe('checkPreparedTar (docs/architecture.md §16)', () => {
  it('accepts what a capture makes: folders, files, symlinks (as entries), hard links to earlier files', async () => {
    const file = await tarOf([
      { name: 'workspace/node_modules', type: 'directory' },
      { name: 'workspace/node_modules/a.js', body: 'x' },
      { name: 'home/airlock/.cache', type: 'directory' },
      { name: 'home/airlock/.local/bin/tool', type: 'symlink', linkname: '/opt/airlock/node/node' },
      { name: 'home/airlock/.cache/b', type: 'link', linkname: 'workspace/node_modules/a.js' },
    ]);
    await expect(checkPreparedTar(file)).resolves.toBeUndefined();
  });

  it('refuses an entry under a symlink of the same archive, naming both (the engine would write through it)', async () => {
    const file = await tarOf([
      { name: 'home/airlock/x', type: 'symlink', linkname: '/opt/airlock' },
      { name: 'home/airlock/x/helper.js', body: 'evil' },
    ]);
    await expect(checkPreparedTar(file)).rejects.toThrow(/'home\/airlock\/x\/helper\.js' lies under 'home\/airlock\/x', a link/);
  });

  it('refuses names outside the captured folders, with .. or absolute, devices, and dangling hard links', async () => {
    await expect(checkPreparedTar(await tarOf([{ name: 'opt/airlock/helper.js', body: 'x' }]))).rejects.toThrow(/outside workspace and home\/airlock/);
    await expect(checkPreparedTar(await tarOf([{ name: 'workspace/../opt/x', body: 'x' }]))).rejects.toThrow(/not a plain relative path/);
    await expect(checkPreparedTar(await tarOf([{ name: 'home/airlock/dev', type: 'block-device', devmajor: 8, devminor: 0 }]))).rejects.toThrow(/is a block-device/);
    await expect(checkPreparedTar(await tarOf([{ name: 'workspace/l', type: 'link', linkname: 'home/airlock/missing' }]))).rejects.toThrow(/no file earlier in the archive/);
  });
});
