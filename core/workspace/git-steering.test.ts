import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { classifyRisky } from '../runs/run-apply';
import { applyResult } from './apply';
import { plantedGitDirs } from './git-steering';
import { cleanupTemps, collectLocal, gitRepo, localSandbox } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

// Issue 22, item 4: git-steering files in a result. A planted repository's config is refused
// outright; the rest of it and the git control files are flagged (never pre-selected, first, why).

function plant(at: (p: string) => string, dir: string, config: string): void {
  for (const [rel, text] of Object.entries({ HEAD: 'ref: refs/heads/main\n', config, 'objects/info/packs': '\n', 'refs/heads/main': `${'a'.repeat(40)}\n`, 'hooks/post-checkout': '#!/bin/sh\ntouch /tmp/pwned\n', description: 'x\n' })) {
    const file = at(path.posix.join(dir, rel));
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
  }
}

describe('git-steering files in a result', () => {
  it('refuses a planted repository\'s config and hooks, flags the rest and every git control file, and apply never writes the config', async () => {
    const project = gitRepo({ 'README.md': 'hi\n', 'src/app.ts': 'x\n' });
    const sb = await localSandbox(project);
    plant(sb.at, 'vendor/tool', '[core]\n\tfsmonitor = "touch /tmp/pwned"\n\thooksPath = hooks\n');
    plant(sb.at, '', '[core]\n\tbare = true\n'); // at the project root too
    writeFileSync(sb.at('.gitmodules'), '[submodule "x"]\n\tpath = x\n\turl = ../../evil\n');
    writeFileSync(sb.at('.gitattributes'), '* filter=evil\n');
    writeFileSync(sb.at('.lfsconfig'), '[lfs]\n\turl = https://lfs.attacker.invalid/\n');
    writeFileSync(sb.at('.gitconfig'), '[alias]\n\tst = !touch /tmp/pwned\n');
    mkdirSync(sb.at('sub'), { recursive: true });
    symlinkSync('../README.md', sb.at('sub/.gitmodules'));
    writeFileSync(sb.at('src/app.ts'), 'y\n');
    const r = await collectLocal(sb);

    const paths = r.result.changes.map((c) => c.path);
    for (const refused of ['vendor/tool/config', 'vendor/tool/hooks/post-checkout', 'config', 'hooks/post-checkout', 'sub/.gitmodules']) {
      expect(paths).not.toContain(refused);
      expect(r.result.skipped.map((s) => s.path)).toContain(refused);
    }
    expect(r.result.skipped.find((s) => s.path === 'vendor/tool/config')?.reason).toMatch(/git repository planted at vendor\/tool/);
    expect(r.result.skipped.find((s) => s.path === 'sub/.gitmodules')?.reason).toMatch(/symlink named \.gitmodules/);

    const flags = new Map(classifyRisky(r.result.changes, r.patch).map((f) => [f.path, f.reason]));
    expect(flags.get('vendor/tool/HEAD')).toMatch(/git repository planted at vendor\/tool/);
    expect(flags.get('vendor/tool/refs/heads/main')).toMatch(/planted/);
    expect(flags.get('HEAD')).toMatch(/planted at the project root/);
    expect(flags.get('.gitmodules')).toMatch(/submodules/);
    expect(flags.get('.gitattributes')).toMatch(/filters/);
    expect(flags.get('.lfsconfig')).toMatch(/LFS/);
    expect(flags.get('.gitconfig')).toMatch(/git control file/);
    expect(flags.has('src/app.ts')).toBe(false);

    // Applying the whole result writes what was listed, never the refused config.
    await applyResult({ projectDir: project, repo: r.repo, result: r.result, patch: r.patch, mode: 'working-tree', reviewedSha256: r.result.patchSha256 });
    expect(readFileSync(path.join(project, 'vendor/tool/HEAD'), 'utf8')).toBe('ref: refs/heads/main\n');
    expect(existsSync(path.join(project, 'vendor/tool/config'))).toBe(false);
    expect(existsSync(path.join(project, 'vendor/tool/hooks'))).toBe(false);
    expect(existsSync(path.join(project, 'config'))).toBe(false);
  });

  it('refuses a config the result adds to a repository the project already carries, and flags command-bearing config anywhere', async () => {
    const project = gitRepo({ 'fixtures/repo.git/HEAD': 'ref: refs/heads/main\n', 'fixtures/repo.git/refs/heads/main': `${'b'.repeat(40)}\n`, 'fixtures/repo.git/objects/info/packs': '\n', 'app/config': 'name = x\n' });
    const sb = await localSandbox(project);
    writeFileSync(sb.at('fixtures/repo.git/config'), '[core]\n\tfsmonitor = "touch /tmp/pwned"\n');
    writeFileSync(sb.at('app/config'), 'name = x\n[core]\n\tsshCommand = evil\n');
    const r = await collectLocal(sb);
    expect(r.result.changes.map((c) => c.path)).toEqual(['app/config']);
    expect(r.result.skipped.map((s) => s.path)).toContain('fixtures/repo.git/config');
    expect(classifyRisky(r.result.changes, r.patch)[0]?.reason).toMatch(/git config that names commands/);
  });

  it('finds repository shapes, not every HEAD', () => {
    expect([...plantedGitDirs(['a/HEAD', 'a/config', 'b/HEAD', 'c/x/HEAD', 'c/x/refs/tags/v1', 'd/config', 'e/HEAD', 'e/objects/pack/p.pack'])].sort()).toEqual(['a', 'c/x', 'e']);
    expect([...plantedGitDirs(['HEAD', 'README.md', 'src/config'])]).toEqual([]);
  });
});
