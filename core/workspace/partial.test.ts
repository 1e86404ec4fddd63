import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { applyResult } from './apply';
import { sectionsOf, selectChanges } from './collect';
import { selectionPatch, type FileSelection } from './partial';
import { cleanupTemps, collectLocal, fingerprint, git, gitRepo, localSandbox, tempDir, type LocalResult } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => `${f(i + 1)}\n`).join('');
/** 30 lines: edits at 3, 15 and 28 make three hunks (3 lines of context each). */
const BASE = lines(30, (i) => `line ${i}`);
const RESULT = BASE.replace('line 3\n', 'line 3 (agent)\nline 3b\n').replace('line 15\n', '').replace('line 28\n', 'line 28 (agent)\n');

async function collected(project: Record<string, string | Buffer>, edit: (at: (rel: string) => string) => void): Promise<{ dir: string; r: LocalResult }> {
  const dir = gitRepo(project);
  const sb = await localSandbox(dir);
  edit(sb.at);
  return { dir, r: await collectLocal(sb) };
}

/** What stock `git apply` makes of `patch` on a fresh clone of the project at its first commit. */
function gitApplied(dir: string, patch: Buffer, rel: string): string {
  const clone = tempDir('airlock-oracle-');
  git(clone, ['clone', '-q', dir, '.']);
  writeFileSync(path.join(clone, '.sel.patch'), patch);
  git(clone, ['apply', '--whitespace=nowarn', '.sel.patch']);
  return readFileSync(path.join(clone, rel), 'latin1');
}

async function applyBoth(dir: string, r: LocalResult, files: string[], selection: FileSelection[], branch: string) {
  const sel = await selectionPatch(r.repo, r.result, r.patch, files, selection);
  const common = { repo: r.repo, result: r.result, patch: r.patch, files, selection, reviewedSha256: sel.sha256 };
  const wt = tempDir('airlock-wt-');
  git(wt, ['clone', '-q', dir, '.']);
  const outWt = await applyResult({ ...common, projectDir: wt, mode: 'working-tree' });
  const outBr = await applyResult({ ...common, projectDir: dir, mode: 'branch', branch });
  expect(outWt.patchSha256).toBe(sel.sha256);
  expect(outBr.patchSha256).toBe(sel.sha256);
  const inBranch = (rel: string) => git(dir, ['show', `${branch}:${rel}`]);
  return { sel, wt, inBranch };
}

describe('hunk and line selection', () => {
  it('applies chosen hunks and lines exactly as stock git apply of the host-rendered partial patch, in working tree and branch', async () => {
    const { dir, r } = await collected({ 'a.txt': BASE, 'other.txt': 'x\n' }, (at) => {
      writeFileSync(at('a.txt'), RESULT);
      writeFileSync(at('other.txt'), 'y\n');
    });
    const cases: Array<{ name: string; sel: FileSelection; expected: string }> = [
      { name: 'hunks 0 and 2', sel: { path: 'a.txt', hunks: [0, 2] }, expected: BASE.replace('line 3\n', 'line 3 (agent)\nline 3b\n').replace('line 28\n', 'line 28 (agent)\n') },
      { name: 'hunk 1 only', sel: { path: 'a.txt', hunks: [1] }, expected: BASE.replace('line 15\n', '') },
      // Line ids as the diff numbers them: the added "line 3b" is new line 4; removing old line 28.
      { name: 'one added line and one removal', sel: { path: 'a.txt', lines: ['+4', '-28'] }, expected: BASE.replace('line 3\n', 'line 3\nline 3b\n').replace('line 28\n', '') },
      { name: 'a hunk plus a line of another', sel: { path: 'a.txt', hunks: [1], lines: ['+3'] }, expected: BASE.replace('line 3\n', 'line 3\nline 3 (agent)\n').replace('line 15\n', '') },
    ];
    for (const [i, c] of cases.entries()) {
      const { sel, wt, inBranch } = await applyBoth(dir, r, ['a.txt', 'other.txt'], [c.sel], `sel-${i}`);
      expect(readFileSync(path.join(wt, 'a.txt'), 'latin1'), c.name).toBe(c.expected);
      expect(inBranch('a.txt'), c.name).toBe(c.expected);
      expect(gitApplied(dir, sel.patch, 'a.txt'), c.name).toBe(c.expected);
      // The whole file next to it is taken as reviewed.
      expect(readFileSync(path.join(wt, 'other.txt'), 'utf8')).toBe('y\n');
      expect(sel.patch.toString()).toContain(sectionsOf(r.patch, selectChanges(r.result, ['other.txt'])).toString());
    }
  });

  it('selecting every hunk renders the result patch itself, byte for byte', async () => {
    const { r } = await collected({ 'a.txt': BASE }, (at) => writeFileSync(at('a.txt'), RESULT));
    const sel = await selectionPatch(r.repo, r.result, r.patch, undefined, [{ path: 'a.txt', hunks: [0, 1, 2] }]);
    expect(sel.patch.equals(r.patch)).toBe(true);
    expect(sel.sha256).toBe(r.result.patchSha256);
  });

  it('refuses a digest that is not the selection patch (the whole result, another selection) before touching the project', async () => {
    const { dir, r } = await collected({ 'a.txt': BASE }, (at) => writeFileSync(at('a.txt'), RESULT));
    const before = fingerprint(dir);
    const other = await selectionPatch(r.repo, r.result, r.patch, undefined, [{ path: 'a.txt', hunks: [1] }]);
    const common = { projectDir: dir, repo: r.repo, result: r.result, patch: r.patch, mode: 'working-tree' as const, selection: [{ path: 'a.txt', hunks: [0] }] };
    await expect(applyResult({ ...common, reviewedSha256: r.result.patchSha256 })).rejects.toMatchObject({ kind: 'CONFLICT', message: expect.stringContaining('not the selection that was reviewed') });
    await expect(applyResult({ ...common, reviewedSha256: other.sha256 })).rejects.toMatchObject({ kind: 'CONFLICT' });
    expect(fingerprint(dir)).toBe(before);
  });

  it('takes binary files and renames whole only, and says so; unknown hunks and lines are named', async () => {
    const { r } = await collected({ 'a.txt': BASE, 'b.bin': Buffer.from([0, 1, 2]), 'old.txt': 'keep me\nas I am\nthree\nfour\n' }, (at) => {
      writeFileSync(at('a.txt'), RESULT);
      writeFileSync(at('b.bin'), Buffer.from([0, 1, 3]));
      renameSync(at('old.txt'), at('new.txt'));
    });
    const pick = (s: FileSelection) => selectionPatch(r.repo, r.result, r.patch, undefined, [s]);
    await expect(pick({ path: 'b.bin', hunks: [0] })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('binary file is applied whole') });
    await expect(pick({ path: 'new.txt', hunks: [0] })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('rename is applied whole') });
    await expect(pick({ path: 'a.txt', hunks: [3] })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('no hunk 3') });
    await expect(pick({ path: 'a.txt', lines: ['+99'] })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining("'+99'") });
    await expect(pick({ path: 'a.txt', lines: [] })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('Nothing of a.txt') });
  });

  it('handles a last line without newline and part of a new file like git apply', async () => {
    const { dir, r } = await collected({ 'tail.txt': 'a\nb\nlast' }, (at) => {
      writeFileSync(at('tail.txt'), 'a\nB\nlast\nmore\n');
      writeFileSync(at('new.txt'), 'n1\nn2\nn3\n');
    });
    // Adding after a line that keeps no newline would glue lines together: refused, clearly.
    await expect(selectionPatch(r.repo, r.result, r.patch, undefined, [{ path: 'tail.txt', lines: ['+4'] }])).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('no newline at its end') });
    const selection = [{ path: 'tail.txt', lines: ['-3', '+3', '+4'] }, { path: 'new.txt', lines: ['+1', '+3'] }];
    const { sel, wt, inBranch } = await applyBoth(dir, r, ['tail.txt', 'new.txt'], selection, 'tail');
    expect(readFileSync(path.join(wt, 'tail.txt'), 'utf8')).toBe('a\nb\nlast\nmore\n');
    expect(inBranch('tail.txt')).toBe('a\nb\nlast\nmore\n');
    expect(gitApplied(dir, sel.patch, 'tail.txt')).toBe('a\nb\nlast\nmore\n');
    expect(readFileSync(path.join(wt, 'new.txt'), 'utf8')).toBe('n1\nn3\n');
    expect(gitApplied(dir, sel.patch, 'new.txt')).toBe('n1\nn3\n');
  });
});
