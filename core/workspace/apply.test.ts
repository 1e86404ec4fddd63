import { createHash } from 'node:crypto';
import { chmodSync, existsSync, lstatSync, readFileSync, readlinkSync, renameSync, symlinkSync, unlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { applyResult } from './apply';
import { commitMessage } from './apply-branch';
import { exportPatch } from './apply-patch';
import { HostGit } from './host-git';
import { HostRepo } from './host-repo';
import { cleanupTemps, collectLocal, fingerprint, git, gitRepo, localSandbox, tempDir, writeTree, type LocalResult, type LocalSandbox } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

const BIN = Buffer.from([0, 1, 2, 3, 4, 5, 0, 255]);

const PROJECT = {
  'src/app.ts': 'line 1\nline 2\nline 3\nline 4\nline 5\nline 6\nline 7\nline 8\nline 9\n',
  'src/conflict.ts': 'export const value = 1;\n',
  'src/rename-me.ts': 'export function moved() {\n  return 42;\n}\n// padding for rename detection\n',
  'docs/delete-me.md': 'obsolete\n',
  'bin/tool.sh': '#!/bin/sh\necho tool\n',
  'img/pic.bin': BIN,
  'current': { symlink: 'src/app.ts' },
};

/** The run: edits, a conflict candidate, rename, delete, chmod, binary edit, symlink retarget, additions. */
function agentEdits(sb: LocalSandbox) {
  writeFileSync(sb.at('src/app.ts'), PROJECT['src/app.ts'].replace('line 8\n', 'line 8 (agent)\n'));
  writeFileSync(sb.at('src/conflict.ts'), 'export const value = 2; // agent\n');
  renameSync(sb.at('src/rename-me.ts'), sb.at('src/renamed.ts'));
  unlinkSync(sb.at('docs/delete-me.md'));
  chmodSync(sb.at('bin/tool.sh'), 0o755);
  writeFileSync(sb.at('img/pic.bin'), Buffer.concat([BIN, Buffer.from([7, 0, 7])]));
  unlinkSync(sb.at('current'));
  symlinkSync('src/renamed.ts', sb.at('current'));
  writeFileSync(sb.at('src/added.ts'), 'export const added = true;\n');
  writeFileSync(sb.at('img/new.bin'), Buffer.from([0, 9, 8, 0]));
}

async function runOn(project: string): Promise<LocalResult> {
  const sb = await localSandbox(project);
  agentEdits(sb);
  return collectLocal(sb);
}

/** What a reviewer applies: the stored result, its store, and the digest of what they read. */
function reviewed(r: LocalResult) {
  return { repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256 };
}

function read(dir: string, rel: string) {
  return readFileSync(path.join(dir, rel));
}

function expectAgentResult(dir: string, opts: { except?: string[] } = {}) {
  const skip = new Set(opts.except ?? []);
  if (!skip.has('src/app.ts')) expect(read(dir, 'src/app.ts').toString()).toContain('line 8 (agent)');
  if (!skip.has('src/conflict.ts')) expect(read(dir, 'src/conflict.ts').toString()).toBe('export const value = 2; // agent\n');
  expect(existsSync(path.join(dir, 'src/rename-me.ts'))).toBe(false);
  expect(read(dir, 'src/renamed.ts').toString()).toContain('return 42;');
  expect(existsSync(path.join(dir, 'docs/delete-me.md'))).toBe(false);
  expect(lstatSync(path.join(dir, 'bin/tool.sh')).mode & 0o111).not.toBe(0);
  expect(read(dir, 'img/pic.bin').equals(Buffer.concat([BIN, Buffer.from([7, 0, 7])]))).toBe(true);
  expect(readlinkSync(path.join(dir, 'current'))).toBe('src/renamed.ts');
  expect(read(dir, 'src/added.ts').toString()).toBe('export const added = true;\n');
  expect(read(dir, 'img/new.bin').equals(Buffer.from([0, 9, 8, 0]))).toBe(true);
}

describe('applyResult (working tree)', () => {
  it('applies deletions, additions, renames, binary, mode and symlink changes to an unchanged project', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree' });
    expect(out.conflicts).toEqual([]);
    expect(out.applied.sort()).toEqual(['current', 'docs/delete-me.md', 'img/new.bin', 'img/pic.bin', 'bin/tool.sh', 'src/added.ts', 'src/app.ts', 'src/conflict.ts', 'src/renamed.ts'].sort());
    expectAgentResult(dir);
    // The emptied folder goes, like with git apply.
    expect(existsSync(path.join(dir, 'docs'))).toBe(false);
  });

  it('writes nothing when one file conflicts (whole or nothing), naming the conflicts and the files held back', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    writeFileSync(path.join(dir, 'src/conflict.ts'), 'export const value = 3; // user\n');
    const before = git(dir, ['status', '--porcelain', '-uall']);
    const diffBefore = git(dir, ['diff']);
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree' });
    expect(out.applied).toEqual([]);
    expect(out.conflicts.map((c) => c.path)).toEqual(['src/conflict.ts']);
    expect(out.held.sort()).toEqual(['current', 'docs/delete-me.md', 'img/new.bin', 'img/pic.bin', 'bin/tool.sh', 'src/added.ts', 'src/app.ts', 'src/renamed.ts'].sort());
    // git sees exactly the user's own edit, nothing of the run's.
    expect(git(dir, ['status', '--porcelain', '-uall'])).toBe(before);
    expect(git(dir, ['diff'])).toBe(diffBefore);
    // Branch mode: no branch is made either.
    git(dir, ['commit', '-qam', 'user edit']);
    const { headCommit: _omit, ...onHead } = result.result;
    const branch = await applyResult({ projectDir: dir, ...reviewed(result), result: onHead, mode: 'branch', branch: 'airlock/none' });
    expect(branch).toMatchObject({ applied: [], conflicts: [{ path: 'src/conflict.ts' }] });
    expect(branch.branch).toBeUndefined();
    expect(git(dir, ['branch', '--list', 'airlock/none'])).toBe('');
  });

  it('after a resolution the file counts as applied, and applying again has nothing to write', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    writeFileSync(path.join(dir, 'src/conflict.ts'), 'export const value = 3; // user\n');
    const resolution = 'export const value = 3; // user, and the run\'s 2\n';
    writeFileSync(path.join(dir, 'src/conflict.ts'), resolution);
    const resolved = new Map([['src/conflict.ts', createHash('sha256').update(resolution).digest('hex')]]);
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree', resolved });
    expect(out.conflicts).toEqual([]);
    expect(out.unchanged).toEqual(['src/conflict.ts']);
    expect(out.applied).toContain('src/app.ts');
    expect(read(dir, 'src/conflict.ts').toString()).toBe(resolution);
    const again = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree', resolved });
    expect(again.applied).toEqual([]);
    expect(again.conflicts).toEqual([]);
    expect(again.unchanged).toHaveLength(out.applied.length + 1);
  });

  it('with skipConflicts: refuses a file the user edited in an overlapping way, applies the rest, merges non-overlapping edits, loses nothing', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    // Meanwhile the user edits: same line as the agent (conflict), a far line (merges), and makes a binary edit.
    writeFileSync(path.join(dir, 'src/conflict.ts'), 'export const value = 3; // user\n');
    writeFileSync(path.join(dir, 'src/app.ts'), PROJECT['src/app.ts'].replace('line 1\n', 'line 1 (user)\n'));
    writeFileSync(path.join(dir, 'img/pic.bin'), Buffer.from([1, 0, 1]));
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree', skipConflicts: true });
    expect(out.conflicts.map((c) => c.path).sort()).toEqual(['img/pic.bin', 'src/conflict.ts']);
    for (const c of out.conflicts) expect(c.reason).toMatch(/since the run started/);
    expect(read(dir, 'src/conflict.ts').toString()).toBe('export const value = 3; // user\n');
    expect(read(dir, 'img/pic.bin').equals(Buffer.from([1, 0, 1]))).toBe(true);
    const merged = read(dir, 'src/app.ts').toString();
    expect(merged).toContain('line 1 (user)');
    expect(merged).toContain('line 8 (agent)');
    expect(out.applied).toContain('src/app.ts');
    expect(out.applied).not.toContain('src/conflict.ts');
    expect(read(dir, 'src/renamed.ts').toString()).toContain('return 42;');
  });

  it('refuses to delete a file the user changed, and to create over a file the user created', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    writeFileSync(path.join(dir, 'docs/delete-me.md'), 'still needed!\n');
    writeFileSync(path.join(dir, 'src/added.ts'), 'user version\n');
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree' });
    expect(out.conflicts.map((c) => c.path).sort()).toEqual(['docs/delete-me.md', 'src/added.ts']);
    expect(read(dir, 'docs/delete-me.md').toString()).toBe('still needed!\n');
    expect(read(dir, 'src/added.ts').toString()).toBe('user version\n');
  });

  it('applies only the selected files', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    const out = await applyResult({ projectDir: dir, ...reviewed(result), files: ['src/renamed.ts', 'img/new.bin'], mode: 'working-tree' });
    expect(out.applied.sort()).toEqual(['img/new.bin', 'src/renamed.ts']);
    expect(existsSync(path.join(dir, 'src/renamed.ts'))).toBe(true);
    expect(existsSync(path.join(dir, 'src/rename-me.ts'))).toBe(false);
    expect(read(dir, 'src/app.ts').toString()).toBe(PROJECT['src/app.ts']);
    await expect(applyResult({ projectDir: dir, ...reviewed(result), files: ['nope.txt'], mode: 'working-tree' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
  });

  it('works on a non-git project, and refuses branch mode there with a clear error', async () => {
    const dir = tempDir();
    writeTree(dir, PROJECT);
    const result = await runOn(dir);
    const before = fingerprint(dir);
    await expect(applyResult({ projectDir: dir, ...reviewed(result), mode: 'branch' })).rejects.toMatchObject({
      kind: 'INVALID_INPUT',
      message: expect.stringMatching(/not the top folder of a git repository.*working tree/),
    });
    expect(fingerprint(dir)).toBe(before);
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree' });
    expect(out.conflicts).toEqual([]);
    expectAgentResult(dir);
  });

  it('never writes through a symlinked folder', async () => {
    const outside = tempDir('airlock-outside-');
    const dir = tempDir();
    writeTree(dir, { 'a.txt': 'a\n' });
    const sb = await localSandbox(dir);
    mkdirSync(sb.at('data'));
    writeFileSync(sb.at('data/out.txt'), 'agent\n');
    const result = await collectLocal(sb);
    symlinkSync(outside, path.join(dir, 'data'));
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'working-tree' });
    expect(out.conflicts).toEqual([{ path: 'data/out.txt', reason: expect.stringMatching(/symlink/) }]);
    expect(existsSync(path.join(outside, 'out.txt'))).toBe(false);
  });

});

describe('applyResult (branch)', () => {
  it('creates a branch with one commit and leaves the current branch, index and working tree untouched', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    // The user keeps working meanwhile: an uncommitted edit and a staged file.
    writeFileSync(path.join(dir, 'src/app.ts'), 'user is typing\n');
    writeFileSync(path.join(dir, 'staged.txt'), 'staged\n');
    git(dir, ['add', 'staged.txt']);
    const headBefore = git(dir, ['rev-parse', 'HEAD']).trim();
    const branchBefore = git(dir, ['symbolic-ref', 'HEAD']).trim();
    const statusBefore = git(dir, ['status', '--porcelain=v1']);
    const filesBefore = fingerprint(dir, { skipGit: true });
    const treeBefore = git(dir, ['ls-files', '-s']);

    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'branch', branch: 'airlock/test-run' });
    expect(out.conflicts).toEqual([]);
    expect(out.branch).toBe('airlock/test-run');
    expect(git(dir, ['rev-parse', 'airlock/test-run']).trim()).toBe(out.commit);
    expect(git(dir, ['rev-parse', `${out.commit}^`]).trim()).toBe(headBefore);

    expect(git(dir, ['rev-parse', 'HEAD']).trim()).toBe(headBefore);
    expect(git(dir, ['symbolic-ref', 'HEAD']).trim()).toBe(branchBefore);
    expect(git(dir, ['status', '--porcelain=v1'])).toBe(statusBefore);
    expect(git(dir, ['ls-files', '-s'])).toBe(treeBefore);
    // Only .git/ changed (objects and the new ref); every project file is byte-identical.
    expect(fingerprint(dir, { skipGit: true })).toBe(filesBefore);

    // The branch holds the result: check it out elsewhere and compare.
    const wt = path.join(tempDir(), 'wt');
    git(dir, ['worktree', 'add', '-q', wt, 'airlock/test-run']);
    expectAgentResult(wt);
    const stat = git(dir, ['diff', '--name-status', '-M', headBefore, 'airlock/test-run']);
    expect(stat).toMatch(/R\d+\tsrc\/rename-me\.ts\tsrc\/renamed\.ts/);
    expect(stat).toMatch(/D\tdocs\/delete-me\.md/);
    expect(git(dir, ['ls-tree', 'airlock/test-run', 'bin/tool.sh'])).toMatch(/^100755 /);
    expect(git(dir, ['ls-tree', 'airlock/test-run', 'current'])).toMatch(/^120000 /);
  });

  it('branches from the commit the run started from and refuses conflicting files there too', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    // After the run started, the user commits an overlapping edit on their branch.
    writeFileSync(path.join(dir, 'src/conflict.ts'), 'export const value = 3; // user\n');
    git(dir, ['commit', '-qam', 'user edit']);
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'branch', branch: 'airlock/from-start' });
    // The branch starts at the run's start commit, where the file is still the baseline: no conflict.
    expect(git(dir, ['rev-parse', `${out.commit}^`]).trim()).toBe(result.result.headCommit);
    expect(out.conflicts).toEqual([]);
    await expect(applyResult({ projectDir: dir, ...reviewed(result), mode: 'branch', branch: 'airlock/from-start' })).rejects.toMatchObject({ kind: 'CONFLICT' });
    // Without a recorded start commit, it builds on HEAD and the overlapping file is refused.
    const { headCommit: _omit, ...noStart } = result.result;
    const out2 = await applyResult({ projectDir: dir, ...reviewed(result), result: noStart, mode: 'branch', branch: 'airlock/on-head', skipConflicts: true });
    expect(out2.conflicts.map((c) => c.path)).toEqual(['src/conflict.ts']);
    expect(git(dir, ['show', 'airlock/on-head:src/conflict.ts'])).toBe('export const value = 3; // user\n');
  });
});

describe('applyResult (branch commit identity and message)', () => {
  /**
   * The result as applied by an app whose environment's HOME has `gitconfig` as global git config
   * (none when undefined): host git reads the identity from the root's environment, not the process's.
   */
  function fromHome(gitconfig: string | undefined, result: LocalResult) {
    const home = tempDir('airlock-home-');
    if (gitconfig !== undefined) writeFileSync(path.join(home, '.gitconfig'), gitconfig);
    const host = new HostGit({ ...process.env, HOME: home, XDG_CONFIG_HOME: path.join(home, '.config') });
    return { ...reviewed(result), repo: HostRepo.open(host, result.repo.gitDir) };
  }
  const task = 'Add a retry to the fetch helper so that flaky network calls do not fail the whole build on the first error';

  it("authors the commit with the user's global git identity and the task as message (subject at most 72 characters)", async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    const out = await applyResult({ projectDir: dir, ...fromHome('[user]\n\tname = Ada Lovelace\n\temail = ada@example.invalid\n', result), mode: 'branch', branch: 'airlock/ident', message: `${task}\n\nSecond paragraph.` });
    expect(out.author).toBe('Ada Lovelace <ada@example.invalid>');
    expect(out.authorFallback).toBeUndefined();
    expect(git(dir, ['log', '-1', '--format=%an <%ae>|%cn <%ce>', 'airlock/ident']).trim()).toBe('Ada Lovelace <ada@example.invalid>|Ada Lovelace <ada@example.invalid>');
    const body = git(dir, ['log', '-1', '--format=%B', 'airlock/ident']);
    const subject = body.split('\n')[0] as string;
    expect(subject.length).toBeLessThanOrEqual(72);
    expect(task.startsWith(subject.replace(/…$/, ''))).toBe(true);
    expect(body.replace(/…\n\n…/, ' ')).toContain(task);
    expect(body).toContain('Second paragraph.');
    expect(body).not.toContain('Airlock run result');
  });

  it("prefers the project's own identity, and falls back to Airlock's (saying so) when git has none", async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    git(dir, ['config', 'user.name', 'Project Person']);
    git(dir, ['config', 'user.email', 'proj@example.invalid']);
    const local = await applyResult({ projectDir: dir, ...fromHome('[user]\n\tname = Global\n\temail = global@example.invalid\n', result), mode: 'branch', branch: 'airlock/local', message: 'Short task' });
    expect(git(dir, ['log', '-1', '--format=%an <%ae>%n%s', 'airlock/local']).trim()).toBe('Project Person <proj@example.invalid>\nShort task');
    expect(local.author).toBe('Project Person <proj@example.invalid>');

    const bare = gitRepo(PROJECT);
    const r2 = await runOn(bare);
    const out = await applyResult({ projectDir: bare, ...fromHome(undefined, r2), mode: 'branch', branch: 'airlock/none' });
    expect(out.authorFallback).toBe(true);
    expect(git(bare, ['log', '-1', '--format=%an <%ae>', 'airlock/none']).trim()).toBe('Airlock <airlock@localhost>');
  });

  it('refuses a branch that exists, naming it and offering a free name', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    await applyResult({ projectDir: dir, ...reviewed(result), mode: 'branch', branch: 'airlock/again' });
    git(dir, ['branch', 'airlock/again-2']);
    const refs = git(dir, ['for-each-ref']);
    const err = applyResult({ projectDir: dir, ...reviewed(result), mode: 'branch', branch: 'airlock/again' });
    await expect(err).rejects.toMatchObject({ kind: 'CONFLICT', message: expect.stringContaining("Branch 'airlock/again' already exists") });
    await expect(err).rejects.toMatchObject({ message: expect.stringContaining("'airlock/again-3'") });
    // Typed, so the review screen offers it without reading the message.
    await expect(err).rejects.toMatchObject({ field: 'branch', suggestion: 'airlock/again-3' });
    expect(git(dir, ['for-each-ref'])).toBe(refs);
    const out = await applyResult({ projectDir: dir, ...reviewed(result), mode: 'branch', branch: 'airlock/again-3' });
    expect(out.branch).toBe('airlock/again-3');
  });
});

describe('commitMessage', () => {
  it('keeps a short task as the subject and a default without one', () => {
    expect(commitMessage('Fix the bug', 2, [])).toBe('Fix the bug\n\nApplied: 2 files\n');
    expect(commitMessage('  \n ', 1, ['a.ts'])).toBe('Airlock run result\n\nApplied: 1 file; left out (conflicts): a.ts\n');
    const long = commitMessage('x'.repeat(100), 1, []);
    expect(long.split('\n')[0]?.length).toBeLessThanOrEqual(72);
    expect(long.replace(/[^x]/g, '').length).toBe(100);
  });
});

describe('exportPatch', () => {
  it('writes the whole or a filtered patch and never overwrites an existing file', async () => {
    const dir = gitRepo(PROJECT);
    const result = await runOn(dir);
    const out = path.join(tempDir(), 'result.patch');
    const all = await exportPatch({ patch: result.patch, result: result.result, file: out });
    expect(all.bytes).toBe(result.patch.length);
    await expect(exportPatch({ patch: result.patch, result: result.result, file: out })).rejects.toMatchObject({ kind: 'CONFLICT' });
    const part = await exportPatch({ patch: result.patch, result: result.result, file: `${out}.part`, files: ['src/added.ts', 'img/pic.bin'] });
    expect(part.paths.sort()).toEqual(['img/pic.bin', 'src/added.ts']);
    git(dir, ['apply', '--check', `${out}.part`]);
    git(dir, ['apply', '--check', out]);
  });
});
