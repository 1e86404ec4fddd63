import { chmodSync, existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HostGit } from './host-git';
import { cleanupTemps, git, gitRepo, tempDir } from '../../test/support/workspace-fixtures';

afterAll(cleanupTemps);

describe('HostGit', () => {
  it('never runs a git found in the project folder, whatever PATH says', async () => {
    const project = tempDir('airlock-proj-');
    const marker = path.join(project, 'ran');
    writeFileSync(path.join(project, 'git'), `#!/bin/sh\ntouch '${marker}'\necho 'git version 0-evil'\n`);
    chmodSync(path.join(project, 'git'), 0o755);
    // Relative entries mean "the current folder" to a shell-style lookup.
    const host = new HostGit({ ...process.env, PATH: `:.:${process.env.PATH ?? ''}` });
    const r = await host.run(['--version'], { cwd: project });
    expect(r.stdout.toString()).toMatch(/^git version \d/);
    expect(existsSync(marker)).toBe(false);
    expect(path.isAbsolute(await host.executable())).toBe(true);
  });

  it('runs on the environment it was made with, not the process environment', async () => {
    // The root (CLI entry, Electron main) hands its environment over; a git first on that PATH is the one run.
    const bin = tempDir('airlock-bin-');
    writeFileSync(path.join(bin, 'git'), `#!/bin/sh\necho "stand-in git, HOME=$HOME"\n`);
    chmodSync(path.join(bin, 'git'), 0o755);
    const home = tempDir('airlock-home-');
    const host = new HostGit({ PATH: `${bin}:${process.env.PATH ?? ''}`, HOME: home });
    const r = await host.run(['--version'], { cwd: bin });
    expect(r.stdout.toString()).toBe(`stand-in git, HOME=${home}\n`);
    expect(await host.executable()).toBe(path.join(bin, 'git'));
    expect(process.env.PATH?.split(':')).not.toContain(bin);
  });

  it("ignores the caller's GIT_* variables and the repository's fsmonitor and hooks", async () => {
    const project = gitRepo({ 'a.txt': 'a\n' });
    const marker = path.join(project, 'fsmonitor-ran');
    const hook = path.join(project, 'monitor.sh');
    writeFileSync(hook, `#!/bin/sh\ntouch '${marker}'\n`);
    chmodSync(hook, 0o755);
    git(project, ['config', 'core.fsmonitor', hook]);
    const host = new HostGit({ ...process.env, GIT_DIR: '/nonexistent' });
    writeFileSync(path.join(project, 'a.txt'), 'b\n');
    const r = await host.run(['status', '--porcelain'], { cwd: project });
    expect(r.code).toBe(0);
    expect(r.stdout.toString()).toContain('a.txt');
    expect(existsSync(marker)).toBe(false);
  });
});
