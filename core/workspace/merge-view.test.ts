import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { applyResult } from './apply';
import { mergeRegions, mergeViewOf, writeResolution } from './merge-view';
import { cleanupTemps, collectLocal, gitRepo, localSandbox, testGit } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

const BASE = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n';

describe('three-way merge view', () => {
  it('shows base, the project file and the result with conflict regions, and writes a resolution only over the file it showed', async () => {
    const dir = gitRepo({ 'c.txt': BASE });
    chmodSync(path.join(dir, 'c.txt'), 0o755);
    const sb = await localSandbox(dir);
    writeFileSync(sb.at('c.txt'), BASE.replace('two\n', 'two (run)\n').replace('eight\n', 'eight (run)\n'));
    const r = await collectLocal(sb);
    const mine = BASE.replace('two\n', 'two (mine)\n');
    writeFileSync(path.join(dir, 'c.txt'), mine);
    const applied = await applyResult({ projectDir: dir, repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256, mode: 'working-tree' });
    expect(applied.conflicts.map((c) => c.path)).toEqual(['c.txt']);

    const view = await mergeViewOf({ projectDir: dir, repo: r.repo, result: r.result, path: 'c.txt' });
    expect(view.base).toBe(BASE);
    expect(view.ours).toBe(mine);
    expect(view.theirs).toContain('eight (run)');
    expect(view.conflicts).toBe(1);
    expect(view.regions).toEqual([
      { kind: 'clean', text: 'one\n' },
      { kind: 'conflict', ours: 'two (mine)\n', base: 'two\n', theirs: 'two (run)\n' },
      { kind: 'clean', text: 'three\nfour\nfive\nsix\nseven\neight (run)\n' },
    ]);

    const resolved = 'one\ntwo (mine) and (run)\nthree\nfour\nfive\nsix\nseven\neight (run)\n';
    // The user edits the file again after opening the view: refused, nothing written.
    writeFileSync(path.join(dir, 'c.txt'), `${mine}more\n`);
    await expect(writeResolution({ projectDir: dir, repo: r.repo, result: r.result, path: 'c.txt', content: resolved, oursSha256: view.oursSha256 })).rejects.toMatchObject({ kind: 'CONFLICT', message: expect.stringContaining('changed again') });
    expect(readFileSync(path.join(dir, 'c.txt'), 'utf8')).toBe(`${mine}more\n`);
    // Reloaded, it is written, keeping the file's executable bit.
    const again = await mergeViewOf({ projectDir: dir, repo: r.repo, result: r.result, path: 'c.txt' });
    const done = await writeResolution({ projectDir: dir, repo: r.repo, result: r.result, path: 'c.txt', content: resolved, oursSha256: again.oursSha256 });
    expect(readFileSync(path.join(dir, 'c.txt'), 'utf8')).toBe(resolved);
    expect(statSync(path.join(dir, 'c.txt')).mode & 0o100).not.toBe(0);
    expect(done.replacedSha256).toBe(again.oursSha256);
    // Only files of the result.
    await expect(writeResolution({ projectDir: dir, repo: r.repo, result: r.result, path: 'other.txt', content: 'x', oursSha256: again.oursSha256 })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });

  it('is not fooled by marker-like lines in the files', async () => {
    const fake = '<<<<<<< ours\n=======\n>>>>>>> theirs\n';
    const regions = await mergeRegions(testGit, `a\n${fake}mine\n`, `a\n${fake}base\n`, `a\n${fake}theirs\n`);
    expect(regions).toEqual([
      { kind: 'clean', text: `a\n${fake}` },
      { kind: 'conflict', ours: 'mine\n', base: 'base\n', theirs: 'theirs\n' },
    ]);
  });
});
