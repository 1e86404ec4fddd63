import { mkdir, mkdtemp, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { pruneBaseDisks, resolveGuestUser } from './base-disk';
import { vmPaths } from './vm-paths';

const passwd = ['root:x:0:0:root:/root:/bin/bash', 'airlock:x:1000:1000::/home/airlock:/bin/bash', 'other:x:1001:1002::/srv/other:/bin/sh'].join('\n');

describe('resolveGuestUser', () => {
  it('takes the image USER as uid:gid, name or uid, with the home from HOME or passwd', () => {
    expect(resolveGuestUser('1000:1000', passwd, ['HOME=/home/airlock'], '/workspace')).toEqual({ uid: 1000, gid: 1000, home: '/home/airlock', workdir: '/workspace' });
    expect(resolveGuestUser('other', passwd, [], '/w')).toEqual({ uid: 1001, gid: 1002, home: '/srv/other', workdir: '/w' });
    expect(resolveGuestUser('1001', passwd, [], '/w').gid).toBe(1002);
    // An image without USER runs the helper as 1000, like the Docker driver.
    expect(resolveGuestUser('', passwd, [], '/w').uid).toBe(1000);
  });

  it('refuses root and unknown users with a typed error', () => {
    expect(() => resolveGuestUser('root', passwd, [], '/w')).toThrow(AirlockError);
    expect(() => resolveGuestUser('0:0', passwd, [], '/w')).toThrow(/non-root/);
    expect(() => resolveGuestUser('nobody-here', passwd, [], '/w')).toThrow(/not in its \/etc\/passwd/);
  });
});

describe('pruneBaseDisks', () => {
  it('keeps the most recently made or used base disks and their metadata, and nothing else of theirs', async () => {
    const assetsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-base-prune-'));
    try {
      const paths = vmPaths({}, { assetsDir, baseDir: path.join(assetsDir, 'base') });
      await mkdir(paths.baseDir);
      const keys = ['a'.repeat(20), 'b'.repeat(20), 'c'.repeat(20)];
      for (const [i, k] of keys.entries()) {
        await writeFile(path.join(paths.baseDir, `${k}.img`), 'disk');
        await writeFile(path.join(paths.baseDir, `${k}.json`), '{}');
        const t = new Date(Date.UTC(2026, 0, 1 + i));
        await utimes(path.join(paths.baseDir, `${k}.img`), t, t);
      }
      await writeFile(path.join(paths.baseDir, 'unrelated.txt'), 'x');
      // A marker whose disk is already gone goes too.
      await writeFile(path.join(paths.baseDir, `${'d'.repeat(20)}.used`), '');
      // The oldest disk was used since (its marker, not the disk: a snapshot's key covers the disk's mtime).
      await writeFile(path.join(paths.baseDir, `${'a'.repeat(20)}.used`), '');
      const used = new Date(Date.UTC(2026, 0, 10));
      await utimes(path.join(paths.baseDir, `${'a'.repeat(20)}.used`), used, used);
      expect(await pruneBaseDisks(paths, 2)).toEqual([`${'b'.repeat(20)}.img`]);
      expect((await readdir(paths.baseDir)).sort()).toEqual([`${'a'.repeat(20)}.img`, `${'a'.repeat(20)}.json`, `${'a'.repeat(20)}.used`, `${'c'.repeat(20)}.img`, `${'c'.repeat(20)}.json`, 'unrelated.txt']);
    } finally {
      await rm(assetsDir, { recursive: true, force: true });
    }
  });
});
