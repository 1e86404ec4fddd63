import { describe, expect, it } from 'vitest';
import { parseHostileTar } from './hostile-tar';
import { craftTar, paxBody } from './testing/crafted-tar';

const wanted = (...names: string[]) => new Set(names);

describe('parseHostileTar', () => {
  it('takes exactly the names asked for: files with their exec bit, symlinks with their target', () => {
    const tar = craftTar([
      { name: 'a.txt', body: 'a\n' },
      { name: './bin/run', body: '#!/bin/sh\n', mode: 0o755 },
      { name: 'link', type: '2', linkname: '../../etc/passwd' },
      { name: 'dir', type: '5' },
    ]);
    const r = parseHostileTar(tar, { wanted: wanted('a.txt', 'bin/run', 'link') });
    expect([...r.files.keys()].sort()).toEqual(['a.txt', 'bin/run', 'link']);
    expect(r.files.get('bin/run')).toMatchObject({ kind: 'file', exec: true });
    expect(r.files.get('a.txt')).toMatchObject({ kind: 'file', exec: false, content: Buffer.from('a\n') });
    // A symlink is data: its target is never followed on the host.
    expect(r.files.get('link')).toMatchObject({ kind: 'symlink', content: Buffer.from('../../etc/passwd') });
  });

  it('skips names it did not ask for: traversal, absolute, PAX renames, other files', () => {
    const tar = craftTar([
      { name: '../../home/u/.bashrc', body: 'evil' },
      { name: '/etc/cron.d/x', body: 'evil' },
      { name: 'x', type: 'x', body: paxBody({ path: '.git/hooks/pre-commit' }) },
      { name: 'a.txt', body: 'hook' },
      { name: 'other.txt', body: 'not asked' },
      { name: 'a.txt', body: 'real' },
    ]);
    const r = parseHostileTar(tar, { wanted: wanted('a.txt') });
    expect([...r.files.keys()]).toEqual(['a.txt']);
    expect(r.files.get('a.txt')?.content.toString()).toBe('real');
    expect(r.skipped.map((s) => s.path)).toEqual(['../../home/u/.bashrc', '/etc/cron.d/x', '.git/hooks/pre-commit', 'other.txt']);
  });

  it('skips hard links, devices and FIFOs, and files over the cap, listing why', () => {
    const tar = craftTar([
      { name: 'hard', type: '1', linkname: 'a.txt' },
      { name: 'dev', type: '3' },
      { name: 'fifo', type: '6' },
      { name: 'big', body: Buffer.alloc(2048, 1) },
    ]);
    const r = parseHostileTar(tar, { wanted: wanted('hard', 'dev', 'fifo', 'big'), maxFileBytes: 1024 });
    expect(r.files.size).toBe(0);
    expect(r.skipped).toEqual([
      { path: 'hard', reason: expect.stringContaining('hard link') },
      { path: 'dev', reason: expect.stringContaining('device') },
      { path: 'fifo', reason: expect.stringContaining('FIFO') },
      { path: 'big', reason: expect.stringContaining('larger than 1024') },
    ]);
  });

  it('refuses a malformed archive outright: duplicates, truncation, lying sizes, bad checksums, floods of entries', () => {
    const malformed = [
      craftTar([{ name: 'a.txt', body: 'one' }, { name: 'a.txt', body: 'two' }]),
      craftTar([{ name: 'a.txt', body: 'one' }], { end: false }),
      craftTar([{ name: 'a.txt', body: 'one', sizeField: 10 * 1024 ** 3 }]),
      craftTar([{ name: 'a.txt', body: 'one', badChecksum: true }]),
      craftTar(Array.from({ length: 100 }, (_, i) => ({ name: `n${i}`, body: 'x' }))),
      craftTar([{ name: 'x', type: 'x', body: paxBody({ size: '99999999999' }) }, { name: 'a.txt', body: 'one' }]),
    ];
    for (const tar of malformed) {
      expect(() => parseHostileTar(tar, { wanted: wanted('a.txt') })).toThrow(expect.objectContaining({ kind: 'SANDBOX_FAILED' }));
    }
  });
});
