import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exclusionByContent, exclusionByName } from './exclusions';
import { snapshotProject } from './snapshot';
import { testGit } from '../../test/support/workspace-fixtures';

// Issue 12, attack 6: the credential and .git checks at hydrate do not depend on letter case.
describe('exclusions ignore letter case', () => {
  let dir = '';
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it.each(['.ENV', '.Env.local', 'config/.ENV.production', 'ID_RSA', '.NETRC', '.Git-Credentials', 'deploy/.AWS/Credentials', '.VAULT-TOKEN'])('%s is left out by name', (p) => {
    expect(exclusionByName(p, false)?.kind).toBe('secret');
  });

  // Issue 36: agents' and tools' sign-ins, shell histories and browser profiles a copied home folder held.
  it.each(['.codex/auth.json', '.claude/.credentials.json', '.config/gh/hosts.yml', 'home/.config/gh/hosts.yaml', '.config/some-tool/credentials.json', '.config/x/y/credentials', '.bash_history', '.zsh_history', '.python_history', '.node_repl_history', '.local/share/fish/fish_history', '.psql_history', '.config/google-chrome/Default/Login Data'])('%s is left out by name', (p) => {
    expect(exclusionByName(p, false)?.kind).toBe('secret');
  });

  it.each(['.mozilla', '.config/google-chrome', '.config/chromium', '.config/BraveSoftware', 'Library/Application Support/Google/Chrome', '.password-store'])('the browser profile %s is left out as a folder', (p) => {
    expect(exclusionByName(p, true)?.kind).toBe('secret');
  });

  it.each(['src/history.ts', 'docs/credentials.md', '.claude/settings.json', '.codex/config.toml', 'config/gh/hosts.yml'])('%s stays in', (p) => {
    expect(exclusionByName(p, false)).toBeUndefined();
  });

  it('.SSH as a directory, and an .NPMRC with a token by content', () => {
    expect(exclusionByName('.SSH', true)?.kind).toBe('secret');
    expect(exclusionByContent('.NPMRC', Buffer.from('//registry.example.invalid/:_authToken=abc\n'))?.kind).toBe('secret');
  });

  it('a snapshot copies neither .ENV nor a .GIT folder', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'airlock-excl-'));
    await writeFile(path.join(dir, '.ENV'), 'SECRET=1\n');
    await writeFile(path.join(dir, 'README.md'), 'hi\n');
    await mkdir(path.join(dir, '.GIT'));
    await writeFile(path.join(dir, '.GIT', 'config'), '[remote "origin"]\n\turl = https://user:token@example.invalid/r.git\n');
    const snap = await snapshotProject(testGit, dir);
    expect(snap.entries.map((e) => e.path)).toEqual(['README.md']);
    expect(snap.excluded.map((e) => [e.path, e.kind]).sort()).toEqual([['.ENV', 'secret'], ['.GIT/', 'git']]);
  });
});
