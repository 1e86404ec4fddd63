import { describe, expect, it } from 'vitest';
import { baselineCommitOid, treeOids } from './git-objects';
import { changedFolders, checkBaseListing, manifestDigest, parseCtimeListing, planDelta, trustedStat, type BaseDir, type BaseFile } from './project-base';
import type { SnapshotEntry } from './snapshot';

const stat = { size: 3, mtimeMs: 1_000, ctimeMs: 1_000, ino: 7, perm: 0o644 };
const file = (path: string, over: Partial<SnapshotEntry> = {}): SnapshotEntry => ({ path, type: 'file', mode: 0o644, size: 3, mtimeMs: 1_000, ctimeMs: 1_000, ino: 7, ...over });
const baseFile = (path: string, over: Partial<BaseFile> = {}): BaseFile => ({ path, oid: 'a'.repeat(40), size: 3, mode: '100644', mtime: 1, stat: { ...stat }, ctime: '1.5', ...over });

describe('planDelta', () => {
  const dirs: BaseDir[] = [{ path: 'src', perm: 0o755 }, { path: 'gone', perm: 0o755 }];
  const files = [baseFile('src/same'), baseFile('src/touched'), baseFile('gone/x'), baseFile('link', { mode: '120000' }), baseFile('was-file')];

  it('keeps files whose host stat is unchanged, streams the rest, removes what is gone or changed type', () => {
    const plan = planDelta(
      {
        entries: [
          { path: 'src', type: 'dir', mode: 0o755, size: 0, mtimeMs: 0 },
          file('src/same'),
          file('src/touched', { ctimeMs: 2_000 }),
          file('src/new'),
          file('link'),
          { path: 'was-file', type: 'dir', mode: 0o755, size: 0, mtimeMs: 0 },
        ],
      },
      { files, dirs },
    );
    expect(plan.reuse.map((f) => f.path)).toEqual(['src/same']);
    expect(plan.stream.map((e) => e.path)).toEqual(['src/touched', 'src/new', 'link', 'was-file']);
    // `gone/x` goes with its folder; a symlink that became a file and a file that became a folder go first.
    expect(plan.deletions).toEqual(['gone', 'link', 'was-file']);
  });

  it('never reuses a file without a trusted stat, a chmod or a streamed content', () => {
    const plan = planDelta({ entries: [file('a'), file('b', { mode: 0o755 }), file('c', { content: Buffer.from('abc') })] }, { files: [baseFile('a', { stat: undefined }), baseFile('b'), baseFile('c')], dirs: [] });
    expect(plan.reuse).toEqual([]);
    expect(plan.stream.map((e) => e.path)).toEqual(['a', 'b', 'c']);
  });
});

describe('trustedStat', () => {
  it('does not trust a file written within the racy window before the scan', () => {
    expect(trustedStat(file('a', { mtimeMs: 9_000, ctimeMs: 9_000 }), 10_000)).toBeUndefined();
    expect(trustedStat(file('a', { mtimeMs: 1_000, ctimeMs: 9_500 }), 10_000)).toBeUndefined();
    expect(trustedStat(file('a'), 10_000)).toEqual(stat);
  });
});

describe('manifestDigest', () => {
  it('changes with any id, mode, mtime or folder', () => {
    const d = manifestDigest([baseFile('a')], [{ path: 's', perm: 0o755 }]);
    expect(manifestDigest([baseFile('a', { oid: 'b'.repeat(40) })], [{ path: 's', perm: 0o755 }])).not.toBe(d);
    expect(manifestDigest([baseFile('a', { mode: '100755' })], [{ path: 's', perm: 0o755 }])).not.toBe(d);
    expect(manifestDigest([baseFile('a', { mtime: 2 })], [{ path: 's', perm: 0o755 }])).not.toBe(d);
    expect(manifestDigest([baseFile('a')], [{ path: 's', perm: 0o700 }])).not.toBe(d);
  });
});

describe('checkBaseListing', () => {
  const files = [baseFile('src/a', { ctime: '1.1' }), baseFile('src/b', { ctime: '1.2' }), baseFile('gone/x', { ctime: '1.3' })];
  const plan = { stream: [file('src/b'), file('src/new')], deletions: ['gone'] };
  const listing = (pairs: string[][]) => parseCtimeListing(pairs.map(([p, c]) => `${p}\0${c}\0`).join(''));

  it('accepts the base as written, whatever the copy is doing to the paths it streams or removes', () => {
    expect(checkBaseListing(listing([['src/a', '1.1'], ['src/b', '9.9'], ['src/new', '9.9']]), { files }, plan)).toBeUndefined();
    expect(checkBaseListing(listing([['src/a', '1.1'], ['gone/x', '1.3']]), { files }, plan)).toBeUndefined();
  });

  it('names a kept file changed or missing, and a file added to the volume', () => {
    expect(checkBaseListing(listing([['src/a', '1.7']]), { files }, plan)).toMatch(/src\/a was changed/);
    expect(checkBaseListing(listing([]), { files }, plan)).toMatch(/src\/a is missing/);
    expect(checkBaseListing(listing([['src/a', '1.1'], ['src/planted', '2.0']]), { files }, plan)).toMatch(/src\/planted was added/);
  });

  it('parses names with newlines and drops a cut-off pair', () => {
    expect([...parseCtimeListing('a\nb\x001.5\x00c\x00')]).toEqual([['a\nb', '1.5']]);
  });
});

describe('a base\'s trees', () => {
  it('give the same baseline commit as hashing every folder, only the touched folders hashed again', () => {
    const f = (path: string, oid: string) => ({ path, oid: oid.repeat(40), mode: '100644' });
    const before = [f('a/x', '1'), f('a/y', '2'), f('b/c/q/r', '8'), f('b/c/z', '3'), f('b/d/w', '4'), f('top', '5')];
    const trees = treeOids(before);
    // A clean folder inside a touched one (b/c/q) keeps its recorded id.
    const after = [f('a/x', '1'), f('a/y', '2'), f('b/c/q/r', '8'), f('b/c/z', '6'), f('b/e', '7'), f('top', '5')];
    const touched = changedFolders(['b/c/z', 'b/e', 'b/d']);
    expect([...touched].sort()).toEqual(['', 'b', 'b/c']);
    expect(baselineCommitOid(after, 'i', 'm', { trees, clean: (d) => !touched.has(d) })).toBe(baselineCommitOid(after, 'i', 'm'));
    // A stale tree for a folder said to be clean is taken as given: the cache is only as good as its record.
    expect(baselineCommitOid(after, 'i', 'm', { trees, clean: () => true })).toBe(baselineCommitOid(before, 'i', 'm'));
  });
});
