import { execFileSync } from 'node:child_process';
import { chmodSync, readFileSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { fileDiff, finalPatch, listChanges, watchChanges } from './changes';
import { hydrate } from './hydrate';
import { LocalShell, localLayout } from './local-shell';
import { snapshotProject } from './snapshot';
import { cleanupTemps, fingerprint, git, gitRepo, localSandbox, tempDir, writeTree, testGit } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 1, 2, 3, 0, 255, 254]);

function sample(attributes = '* text=auto eol=crlf\n') {
  return gitRepo({
    'src/app.ts': 'export const a = 1;\nexport const b = 2;\n',
    'src/old-name.ts': 'export const moved = true;\n// a long enough body for rename detection\n'.repeat(4),
    'scripts/build.sh': '#!/bin/sh\necho build\n',
    'docs/remove-me.md': 'bye\n',
    'assets/logo.png': PNG,
    'link': { symlink: 'src/app.ts' },
    '.gitattributes': attributes,
    'weird name "q".txt': 'w\n',
  });
}

async function mutate(at: (rel: string) => string) {
  writeFileSync(at('src/app.ts'), 'export const a = 1;\nexport const b = 3;\nexport const c = 4;\n');
  renameSync(at('src/old-name.ts'), at('src/new-name.ts'));
  chmodSync(at('scripts/build.sh'), 0o755);
  unlinkSync(at('docs/remove-me.md'));
  writeFileSync(at('assets/logo.png'), Buffer.concat([PNG, Buffer.from([9, 9, 0, 9])]));
  writeFileSync(at('assets/new.bin'), Buffer.from([0, 1, 2, 0, 3]));
  unlinkSync(at('link'));
  symlinkSync('src/new-name.ts', at('link'));
  mkdirSync(at('node_modules/dep'), { recursive: true });
  writeFileSync(at('node_modules/dep/index.js'), 'dependency');
  writeFileSync(at('weird name "q".txt'), 'w\nx\n');
}

describe('change tracking', () => {
  it('reports added, modified, deleted, renamed, binary, mode and symlink changes', async () => {
    const dir = sample();
    const sb = await localSandbox(dir);
    expect(await listChanges(sb.shell, { layout: sb.layout })).toEqual([]);
    await mutate(sb.at);
    const changes = await listChanges(sb.shell, { layout: sb.layout, diffCapBytes: 16 });
    const by = Object.fromEntries(changes.map((c) => [c.path, c]));
    expect(Object.keys(by).sort()).toEqual(['assets/logo.png', 'assets/new.bin', 'docs/remove-me.md', 'link', 'scripts/build.sh', 'src/app.ts', 'src/new-name.ts', 'weird name "q".txt']);
    expect(by['src/app.ts']).toMatchObject({ status: 'modified', binary: false, additions: 2, deletions: 1, modeChanged: false, tooLarge: true });
    expect(by['src/new-name.ts']).toMatchObject({ status: 'renamed', oldPath: 'src/old-name.ts' });
    expect(by['scripts/build.sh']).toMatchObject({ status: 'modified', oldMode: '100644', newMode: '100755', modeChanged: true, additions: 0, deletions: 0 });
    expect(by['docs/remove-me.md']).toMatchObject({ status: 'deleted', size: 0, oldSize: 4 });
    expect(by['assets/logo.png']).toMatchObject({ status: 'modified', binary: true, size: PNG.length + 4, oldSize: PNG.length });
    expect(by['assets/new.bin']).toMatchObject({ status: 'added', binary: true, size: 5, newMode: '100644' });
    expect(by['link']).toMatchObject({ status: 'modified', oldMode: '120000', newMode: '120000' });
    expect(by['weird name "q".txt']).toMatchObject({ status: 'modified', additions: 1 });
    // node_modules appearing during a run is not part of the result.
    expect(changes.some((c) => c.path.startsWith('node_modules'))).toBe(false);
  });

  it('lets the agent start before the baseline is recorded; edits made meanwhile still show as changes', async () => {
    const dir = tempDir();
    writeTree(dir, { 'a.txt': 'original\n', 'b.txt': 'keep\n' });
    const shell = new LocalShell(process.env);
    const layout = await localLayout(tempDir('airlock-sbx-'));
    const hydrated = await hydrate(shell, await snapshotProject(testGit, dir), { layout, waitForBaseline: false });
    // Immediately, before the baseline may be done: edit, delete and add.
    writeFileSync(path.join(layout.workDir, 'a.txt'), 'edited at once\n');
    unlinkSync(path.join(layout.workDir, 'b.txt'));
    writeFileSync(path.join(layout.workDir, 'c.txt'), 'new\n');
    const changes = await listChanges(shell, { layout });
    await hydrated.baselineReady;
    expect(changes.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added c.txt', 'deleted b.txt', 'modified a.txt']);
  });

  it('gives a per-file unified diff, marks binary files and caps huge ones', async () => {
    const dir = sample();
    const sb = await localSandbox(dir);
    await mutate(sb.at);
    const d = await fileDiff(sb.shell, 'src/app.ts', { layout: sb.layout });
    expect(d.binary).toBe(false);
    expect(d.diff).toContain('-export const b = 2;\n+export const b = 3;\n+export const c = 4;');
    // Byte-exact: the project's `eol=crlf` attribute must not rewrite what the diff shows.
    expect(d.diff).not.toContain('\r');
    expect((await fileDiff(sb.shell, 'assets/logo.png', { layout: sb.layout })).binary).toBe(true);
    const renamed = await fileDiff(sb.shell, 'src/new-name.ts', { layout: sb.layout, oldPath: 'src/old-name.ts' });
    expect(renamed.diff).toContain('rename from src/old-name.ts');
    const capped = await fileDiff(sb.shell, 'src/app.ts', { layout: sb.layout, maxBytes: 40 });
    expect(capped.truncated).toBe(true);
    expect(capped.diff.length).toBeLessThanOrEqual(40);
  });

  it('builds a patch that git apply accepts on the original project, giving the sandbox tree', async () => {
    // Without eol attributes: host-side `git apply` would convert line endings on its own.
    const dir = sample('*.png binary\n');
    const sb = await localSandbox(dir);
    await mutate(sb.at);
    rmSync(sb.at('node_modules'), { recursive: true });
    const patch = await finalPatch(sb.shell, { layout: sb.layout });
    expect(patch.toString('utf8')).toContain('GIT binary patch');
    const before = fingerprint(dir);
    git(dir, ['apply', '--check', '-'], patch);
    expect(fingerprint(dir)).toBe(before);
    // Applied on a copy of the original, the tree equals the sandbox's (without the .git dirs).
    const copy = tempDir();
    execFileSync('cp', ['-a', `${dir}/.`, copy]);
    git(copy, ['apply', '-'], patch);
    rmSync(path.join(copy, '.git'), { recursive: true });
    // git tracks no directories: the emptied docs/ stays in the sandbox, git apply removes it.
    rmSync(sb.at('docs'), { recursive: true });
    expect(fingerprint(copy)).toBe(fingerprint(sb.layout.workDir));
  });

  it('patches apply to a non-git project too', async () => {
    const dir = tempDir();
    writeTree(dir, { 'a.txt': 'one\n', 'b/c.txt': 'two\n' });
    const sb = await localSandbox(dir);
    writeFileSync(sb.at('a.txt'), 'one\nmore\n');
    unlinkSync(sb.at('b/c.txt'));
    writeFileSync(sb.at('d.txt'), 'new\n');
    const patch = await finalPatch(sb.shell, { layout: sb.layout });
    execFileSync('git', ['apply', '-'], { cwd: dir, input: patch, env: { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(dir) } });
    expect(readFileSync(path.join(dir, 'a.txt'), 'utf8')).toBe('one\nmore\n');
    expect(readFileSync(path.join(dir, 'd.txt'), 'utf8')).toBe('new\n');
  });

  it('emits debounced change events, ignoring .git and node_modules', async () => {
    const dir = tempDir();
    writeTree(dir, { 'a.txt': 'a' });
    const sb = await localSandbox(dir);
    const batches: string[][] = [];
    const got = new Promise<void>((resolve) => {
      void watchChanges(sb.shell, (paths) => {
        batches.push(paths);
        if (paths.includes('sub/new.txt')) resolve();
      }, { layout: sb.layout, debounceMs: 50 }).then((d) => got.finally(() => d.dispose()));
    });
    mkdirSync(sb.at('node_modules/x'), { recursive: true });
    writeFileSync(sb.at('node_modules/x/i.js'), '1');
    mkdirSync(sb.at('.git'));
    writeFileSync(sb.at('.git/HEAD'), 'ref');
    writeFileSync(sb.at('a.txt'), 'b');
    mkdirSync(sb.at('sub'));
    writeFileSync(sb.at('sub/new.txt'), 'n');
    await got;
    const all = batches.flat();
    expect(all).toContain('a.txt');
    expect(all.some((p) => p.startsWith('node_modules') || p.startsWith('.git'))).toBe(false);
  });
});
