import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { gitExecutable, hostGit } from './host-git';
import { cleanupTemps, git, gitRepo, tempDir } from './testing/fixtures';

afterAll(cleanupTemps);

describe('hostGit', () => {
  it('never runs a git found in the project folder, whatever PATH says', async () => {
    const project = tempDir('airlock-proj-');
    const marker = path.join(project, 'ran');
    writeFileSync(path.join(project, 'git'), `#!/bin/sh\ntouch '${marker}'\necho 'git version 0-evil'\n`);
    chmodSync(path.join(project, 'git'), 0o755);
    const saved = process.env.PATH;
    // Relative entries mean "the current folder" to a shell-style lookup.
    process.env.PATH = `:.:${saved ?? ''}`;
    try {
      const r = await hostGit(['--version'], { cwd: project });
      expect(r.stdout.toString()).toMatch(/^git version \d/);
      expect(existsSync(marker)).toBe(false);
      expect(path.isAbsolute(await gitExecutable())).toBe(true);
    } finally {
      process.env.PATH = saved;
    }
  });

  it("ignores the caller's GIT_* variables and the repository's fsmonitor and hooks", async () => {
    const project = gitRepo({ 'a.txt': 'a\n' });
    const marker = path.join(project, 'fsmonitor-ran');
    const hook = path.join(project, 'monitor.sh');
    writeFileSync(hook, `#!/bin/sh\ntouch '${marker}'\n`);
    chmodSync(hook, 0o755);
    git(project, ['config', 'core.fsmonitor', hook]);
    process.env.GIT_DIR = '/nonexistent';
    try {
      writeFileSync(path.join(project, 'a.txt'), 'b\n');
      const r = await hostGit(['status', '--porcelain'], { cwd: project });
      expect(r.code).toBe(0);
      expect(r.stdout.toString()).toContain('a.txt');
      expect(existsSync(marker)).toBe(false);
    } finally {
      delete process.env.GIT_DIR;
    }
  });
});
