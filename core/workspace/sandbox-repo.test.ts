import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cleanupTemps, collectLocal, fingerprint, git, gitRepo, localSandbox, tempDir, writeTree, type LocalSandbox } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

/** git inside the local "sandbox" copy, as an agent would run it (its own `.git`, no user config). */
function agentGit(sb: LocalSandbox, args: string[]): string {
  return git(sb.layout.workDir, args);
}

/** A project with three commits, a committed remote with a credential, a hook, and uncommitted work. */
function projectWithHistory(extra: Record<string, string> = {}): string {
  const dir = gitRepo({ 'README.md': 'one\n', 'src/a.txt': 'a1\n', ...extra });
  writeTree(dir, { 'src/a.txt': 'a2\n' });
  git(dir, ['commit', '-qam', 'second']);
  writeTree(dir, { 'src/b.txt': 'b\n' });
  git(dir, ['add', '-A']);
  git(dir, ['commit', '-qm', 'third']);
  git(dir, ['remote', 'add', 'origin', 'https://user:s3cret-token@example.invalid/repo.git']);
  git(dir, ['config', 'credential.helper', 'store']);
  writeFileSync(path.join(dir, '.git', 'hooks', 'post-commit'), '#!/bin/sh\necho hook-ran\n', { mode: 0o755 });
  writeTree(dir, { 'README.md': 'one, edited but not committed\n', 'notes.txt': 'untracked\n' });
  return dir;
}

describe('the sandbox repository (real git, local shell)', () => {
  it("holds the user's commits and shows the uncommitted edit as uncommitted; no remote, credential or hook", async () => {
    const project = projectWithHistory();
    const before = fingerprint(project);
    const sb = await localSandbox(project, undefined, undefined, { gitHistory: 50 });
    // The project's own .git was only read.
    expect(fingerprint(project)).toBe(before);
    expect(sb.hydrated.sandboxRepo).toMatchObject({ kind: 'history', commits: 3, rewritten: false });
    // The same commits as the user's, in the same order.
    expect(agentGit(sb, ['log', '--format=%H %s'])).toBe(git(project, ['log', '--format=%H %s']));
    expect(agentGit(sb, ['rev-parse', '--abbrev-ref', 'HEAD']).trim()).toBe('main');
    expect(agentGit(sb, ['status', '--porcelain']).split('\n').filter(Boolean).sort()).toEqual([' M README.md', '?? notes.txt']);
    expect(agentGit(sb, ['diff'])).toContain('+one, edited but not committed');
    expect(agentGit(sb, ['remote']).trim()).toBe('');
    const config = readFileSync(sb.at('.git/config'), 'utf8');
    expect(config).not.toMatch(/url|remote|credential|s3cret|include|hooksPath/i);
    expect(existsSync(sb.at('.git/hooks'))).toBe(false);
    expect(agentGit(sb, ['fsck', '--no-dangling']).trim()).toBe('');
  });

  it('keeps only N commits (a shallow history) and none keeps one fresh commit of HEAD', async () => {
    const project = projectWithHistory();
    const two = await localSandbox(project, undefined, undefined, { gitHistory: 2 });
    expect(agentGit(two, ['log', '--format=%s'])).toBe('third\nsecond\n');
    expect(agentGit(two, ['rev-parse', '--is-shallow-repository']).trim()).toBe('true');
    expect(agentGit(two, ['fsck', '--no-dangling']).trim()).toBe('');

    const none = await localSandbox(project, undefined, undefined, { gitHistory: 'none' });
    expect(agentGit(none, ['rev-list', '--count', 'HEAD']).trim()).toBe('1');
    expect(agentGit(none, ['log', '--format=%an %s'])).toMatch(/^Airlock The project as checked out at/);
    expect(agentGit(none, ['rev-parse', 'HEAD^{tree}'])).toBe(git(project, ['rev-parse', 'HEAD^{tree}']));
    expect(agentGit(none, ['status', '--porcelain']).split('\n').filter(Boolean).sort()).toEqual([' M README.md', '?? notes.txt']);
  });

  it('keeps a detached HEAD detached', async () => {
    const project = projectWithHistory();
    git(project, ['checkout', '-q', '--detach', 'HEAD~1']);
    const sb = await localSandbox(project, undefined, undefined, { gitHistory: 50 });
    expect(readFileSync(sb.at('.git/HEAD'), 'utf8').trim()).toBe(git(project, ['rev-parse', 'HEAD']).trim());
    expect(agentGit(sb, ['log', '--format=%s'])).toBe('second\ninitial\n');
  });

  it('removes files left out of the copy from every commit it ships, old credential files included', async () => {
    const project = gitRepo({ 'app.js': 'x\n', '.env': 'API_KEY=current-secret\n', 'old/id_rsa': '-----BEGIN OPENSSH PRIVATE KEY-----\nold\n' });
    git(project, ['rm', '-q', 'old/id_rsa']);
    git(project, ['commit', '-qm', 'drop the key']);
    writeTree(project, { 'app.js': 'y\n' });
    git(project, ['commit', '-qam', 'edit']);
    const sb = await localSandbox(project, undefined, undefined, { gitHistory: 'all' });
    expect(sb.hydrated.sandboxRepo).toMatchObject({ kind: 'history', commits: 3, rewritten: true });
    expect(agentGit(sb, ['log', '--format=%s'])).toBe('edit\ndrop the key\ninitial\n');
    const everything = agentGit(sb, ['rev-list', '--objects', '--all']);
    expect(everything).not.toMatch(/\.env|id_rsa/);
    // Nothing in the shipped objects holds the secrets.
    const blobs = agentGit(sb, ['cat-file', '--batch-all-objects', '--batch']);
    expect(blobs).not.toContain('current-secret');
    expect(blobs).not.toContain('OPENSSH');
    // The left-out file is not "deleted" to git: it simply is not part of the project here.
    expect(agentGit(sb, ['status', '--porcelain'])).toBe('');
  });

  it('builds again when the stream leaves out a committed file by its content (found only while copying)', async () => {
    const key = `-----BEGIN RSA PRIVATE KEY-----\n${'MIIEowIBAAKCAQEAx'.repeat(8)}\n-----END RSA PRIVATE KEY-----\n`;
    const project = gitRepo({ 'app.js': 'x\n', 'config/deploy.txt': key });
    const sb = await localSandbox(project, undefined, undefined, { gitHistory: 50 });
    expect(sb.hydrated.excluded.map((e) => e.path)).toContain('config/deploy.txt');
    expect(sb.hydrated.sandboxRepo).toMatchObject({ kind: 'history', commits: 1, rewritten: true });
    expect(agentGit(sb, ['rev-list', '--objects', '--all'])).not.toContain('deploy.txt');
    expect(agentGit(sb, ['cat-file', '--batch-all-objects', '--batch'])).not.toContain('PRIVATE KEY');
    expect(agentGit(sb, ['status', '--porcelain'])).toBe('');
  });

  it('gives a project that is not a git repository a fresh one whose single commit is the copied tree', async () => {
    const project = tempDir('airlock-proj-');
    writeTree(project, { 'a.txt': 'a\n', 'sub/b.txt': 'b\n', '.env': 'SECRET=1\n' });
    const sb = await localSandbox(project, undefined, undefined, { gitHistory: 50 });
    expect(sb.hydrated.sandboxRepo).toMatchObject({ kind: 'fresh' });
    expect(agentGit(sb, ['rev-list', '--count', 'HEAD']).trim()).toBe('1');
    expect(agentGit(sb, ['ls-files']).split('\n').filter(Boolean).sort()).toEqual(['a.txt', 'sub/b.txt']);
    expect(agentGit(sb, ['status', '--porcelain'])).toBe('');

    // An empty folder still gets a repository with its one (empty) commit.
    const empty = await localSandbox(tempDir('airlock-proj-'), undefined, undefined, { gitHistory: 50 });
    expect(agentGit(empty, ['rev-list', '--count', 'HEAD']).trim()).toBe('1');
  });

  it('falls back to a fresh repository, with a note, when the history cannot be read whole', async () => {
    const project = gitRepo({ 'a.txt': 'a\n', 'b.txt': 'b\n' });
    // A damaged store (or a partial clone): one blob of HEAD is missing.
    const blob = git(project, ['rev-parse', 'HEAD:b.txt']).trim();
    rmSync(path.join(project, '.git', 'objects', blob.slice(0, 2), blob.slice(2)));
    const sb = await localSandbox(project, undefined, undefined, { gitHistory: 50 });
    expect(sb.hydrated.sandboxRepo?.kind).toBe('fresh');
    expect(sb.hydrated.sandboxRepo?.note).toMatch(/^history left out: /);
    expect(agentGit(sb, ['ls-files']).split('\n').filter(Boolean).sort()).toEqual(['a.txt', 'b.txt']);
  });

  it("never lets the agent's commits, resets or a deleted .git change the result", async () => {
    const project = projectWithHistory();
    const sb = await localSandbox(project, undefined, undefined, { gitHistory: 50 });
    writeTree(sb.layout.workDir, { 'src/a.txt': 'agent edit\n', 'new.txt': 'agent file\n' });
    agentGit(sb, ['add', '-A']);
    agentGit(sb, ['commit', '-qm', 'agent work']);
    writeTree(sb.layout.workDir, { 'src/b.txt': 'undone\n' });
    agentGit(sb, ['commit', '-qam', 'agent more']);
    agentGit(sb, ['reset', '-q', '--hard', 'HEAD~1']);
    const { result } = await collectLocal(sb);
    expect(result.changes.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added new.txt', 'modified src/a.txt']);
    expect(result.changes.some((c) => c.path.startsWith('.git'))).toBe(false);

    // Where the stat listing fails (no `find`), the sandbox's git tracking stands in: it reads
    // Airlock's own baseline, so the agent's commits do not hide its changes there either.
    const bin = tempDir('airlock-nofind-');
    for (const tool of ['sh', 'git', 'tar']) symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`]).toString().trim(), path.join(bin, tool));
    const viaGit = await collectLocal(sb, { layout: { ...sb.layout, env: { PATH: bin } } });
    expect(viaGit.result.changes.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added new.txt', 'modified src/a.txt']);

    // A deleted (or replaced) .git is not a change either.
    rmSync(sb.at('.git'), { recursive: true });
    writeFileSync(sb.at('.git'), 'gitdir: /elsewhere\n');
    const again = await collectLocal(sb);
    expect(again.result.changes.map((c) => c.path).sort()).toEqual(['new.txt', 'src/a.txt']);
  });
});
