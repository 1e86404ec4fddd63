import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, exec, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

/**
 * Prints what git says inside the sandbox between markers the test finds in the terminal log (`<""<`
 * in the command, so the echoed command line itself never matches).
 */
const PROBE = [
  'echo "LOG<""<$(git log --format=%s | tr "\\n" ,)>>"',
  'echo "COUNT<""<$(git rev-list --count HEAD)>>"',
  'echo "STATUS<""<$(git status --porcelain | tr "\\n" ,)>>"',
  'echo "DIFF<""<$(git diff --stat | tr "\\n" ,)>>"',
  'echo "REMOTE<""<$(git remote -v)>>"',
  'echo "CONFIG<""<$(grep -ciE "url|credential|remote|include|hookspath|token" .git/config)>>"',
  'echo "HOOKS<""<$(ls -A .git/hooks 2>/dev/null)>>"',
].join('; ');

function marker(log: string, name: string): string | undefined {
  return new RegExp(`${name}<<([^>]*)>>`).exec(log)?.[1];
}

const commit = (dir: string, ...args: string[]) => exec('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', 'commit', '-q', ...args], { cwd: dir });

describe.skipIf(!docker.ok)('the sandbox is a git repository (real Docker, real git, fake upstream)', () => {
  let f: RunFixture;
  const dirs: string[] = [];
  beforeAll(async () => {
    f = await createRunFixture();
  });
  afterAll(async () => {
    await f?.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  /** Three commits, a remote with a credential in its URL, a hook, and an uncommitted edit. */
  async function projectWithHistory(): Promise<string> {
    const dir = await f.project({ 'README.md': '# demo\n', 'src/a.txt': 'a1\n', 'src/b.txt': 'b1\n' });
    await writeFile(path.join(dir, 'src/a.txt'), 'a2\n');
    await commit(dir, '-am', 'second');
    await writeFile(path.join(dir, 'src/b.txt'), 'b2\n');
    await commit(dir, '-am', 'third');
    await exec('git', ['remote', 'add', 'origin', 'https://user:s3cret-token@example.invalid/repo.git'], { cwd: dir });
    await writeFile(path.join(dir, '.git/hooks/post-commit'), '#!/bin/sh\necho HOOK-RAN\n', { mode: 0o755 });
    await writeFile(path.join(dir, 'README.md'), '# demo, edited but not committed\n');
    return dir;
  }

  it("shows the user's commits and uncommitted edit; the agent's commits and reset do not change the result", async () => {
    const projectDir = await projectWithHistory();
    const started = await f.start({
      projectDir,
      script: [
        { toolCalls: [{ name: 'run_command', input: { command: PROBE } }] },
        {
          toolCalls: [
            {
              name: 'run_command',
              input: {
                command:
                  'echo agent > src/a.txt && echo new > new.txt && git add -A && git commit -qm "agent work" && echo undone > src/b.txt && git commit -qam "agent more" && git reset -q --hard HEAD~1 && echo "AFTER<""<$(git log --format=%s | tr "\\n" ,)>>"',
              },
            },
          ],
        },
        { toolCalls: [{ name: 'finish', input: { summary: 'committed, then reset' } }] },
      ],
    });
    const run = await f.core.runs.wait(started.id);
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('done');
    const log = await f.terminalLog(run.id);
    expect(marker(log, 'LOG')).toBe('third,second,init,');
    expect(marker(log, 'STATUS')).toBe(' M README.md,');
    expect(marker(log, 'DIFF')).toContain('README.md');
    expect(marker(log, 'REMOTE')).toBe('');
    expect(marker(log, 'CONFIG')).toBe('0');
    expect(marker(log, 'HOOKS')).toBe('');
    expect(log).not.toContain('HOOK-RAN');
    expect(log).not.toContain('s3cret-token');
    expect(marker(log, 'AFTER')).toBe('agent work,third,second,init,');

    // The result is the workspace's files against the host's baseline, whatever HEAD became.
    expect(run.changedFiles.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added new.txt', 'modified src/a.txt']);
    const { files, patchSha256 } = await f.services.diffs.list({ runId: run.id });
    expect(files.map((c) => c.path).sort()).toEqual(['new.txt', 'src/a.txt']);
    const applied = await f.services.diffs.apply({ runId: run.id, mode: 'working-tree', reviewedSha256: patchSha256 as string });
    expect(applied.applied.sort()).toEqual(['new.txt', 'src/a.txt']);
    expect(await readFile(path.join(projectDir, 'src/a.txt'), 'utf8')).toBe('agent\n');
    expect(await readFile(path.join(projectDir, 'new.txt'), 'utf8')).toBe('new\n');
    expect(await readFile(path.join(projectDir, 'src/b.txt'), 'utf8')).toBe('b2\n');
    expect(await readFile(path.join(projectDir, 'README.md'), 'utf8')).toBe('# demo, edited but not committed\n');
    // The user's repository is untouched: no agent commit, same HEAD.
    expect((await exec('git', ['log', '--format=%s'], { cwd: projectDir })).stdout).toBe('third\nsecond\ninit\n');
  });

  it("in a continued run, the previous result shows as uncommitted changes on top of the user's HEAD", async () => {
    const projectDir = await projectWithHistory();
    const first = await f.core.runs.wait(
      (await f.start({ projectDir, gitHistory: 2, script: [{ toolCalls: [{ name: 'write_file', input: { path: 'src/a.txt', content: 'turn one\n' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'one' } }] }] })).id,
    );
    expect(first.status).toBe('done');
    expect(first.gitHistory).toBe(2);
    f.upstream.setScript([{ toolCalls: [{ name: 'run_command', input: { command: PROBE } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'probed' } }] }]);
    const second = await f.core.runs.wait((await f.services.runs.continue({ runId: first.id, task: 'look around' })).id);
    expect(second.status).toBe('done');
    // The follow-up turn keeps the first turn's history depth.
    expect(second.gitHistory).toBe(2);
    const log = await f.terminalLog(second.id);
    expect(marker(log, 'LOG')).toBe('third,second,');
    expect(marker(log, 'STATUS')).toBe(' M README.md, M src/a.txt,');
  });

  it('history none gives one commit; a project that is not a git repository gets a fresh one', async () => {
    const withHistory = await projectWithHistory();
    const none = await f.core.runs.wait((await f.start({ projectDir: withHistory, gitHistory: 'none', script: [{ toolCalls: [{ name: 'run_command', input: { command: PROBE } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'probed' } }] }] })).id);
    expect(none.status).toBe('done');
    const noneLog = await f.terminalLog(none.id);
    expect(marker(noneLog, 'COUNT')).toBe('1');
    expect(marker(noneLog, 'STATUS')).toBe(' M README.md,');
    expect(noneLog).not.toMatch(/LOG<<[^>]*(second|third)/);

    const plain = await mkdtemp(path.join(os.tmpdir(), 'airlock-plain-'));
    dirs.push(plain);
    await mkdir(path.join(plain, 'src'));
    await writeFile(path.join(plain, 'src/main.py'), 'print(1)\n');
    await writeFile(path.join(plain, '.env'), 'TOKEN=never-inside\n');
    const fresh = await f.core.runs.wait((await f.start({ projectDir: plain, script: [{ toolCalls: [{ name: 'run_command', input: { command: `${PROBE}; echo "FILES<""<$(git ls-files | tr "\\n" ,)>>"` } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'probed' } }] }] })).id);
    expect(fresh.status).toBe('done');
    const freshLog = await f.terminalLog(fresh.id);
    expect(marker(freshLog, 'COUNT')).toBe('1');
    expect(marker(freshLog, 'STATUS')).toBe('');
    expect(marker(freshLog, 'FILES')).toBe('src/main.py,');
    expect(fresh.changedFiles).toEqual([]);
  });
});
