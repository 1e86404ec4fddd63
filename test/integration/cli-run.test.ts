import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, exec, treeDigest } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

describe.skipIf(!docker.ok)('the airlock CLI: run, runs, show, patch, apply, audit (real Docker)', () => {
  let home: string;
  let projectDir: string;
  let upstream: FakeUpstream;
  let env: NodeJS.ProcessEnv;

  function airlock(...args: string[]): Promise<CliResult> {
    return new Promise((resolve) => {
      execFile(process.execPath, [cli, ...args], { env, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });
  }

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-cli-home-'));
    projectDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-cli-project-'));
    await exec('bash', ['-c', 'printf "one\\n" > a.txt && git init -q -b main && git add -A && git -c user.email=t@t.invalid -c user.name=t commit -qm init'], { cwd: projectDir });
    upstream = await startFakeUpstream({ expectedKey: CANARY_KEY });
    await new ProviderCatalog({ home }).setBaseUrl('anthropic', upstream.url);
    env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_TEST_KEY: CANARY_KEY };
  });
  afterAll(async () => {
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(projectDir, { recursive: true, force: true });
  });

  it('runs a task with --json: one event per line, a summary line, exit 0, and the follow-up commands work', async () => {
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'a.txt', content: 'two\n' } }] },
      { toolCalls: [{ name: 'write_file', input: { path: 'b.txt', content: 'new\n' } }] },
      { toolCalls: [{ name: 'run_command', input: { command: 'echo cli-sees-$((6 * 7))' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'edited a, added b' } }] },
    ]);
    const before = await treeDigest(projectDir);
    const run = await airlock('run', projectDir, '--task', 'edit', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--json');
    expect(run.stderr).not.toContain(CANARY_KEY);
    expect(run.stdout).not.toContain(CANARY_KEY);
    expect(run.code).toBe(0);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    const summary = lines.at(-1) as { type: string; runId: string; status: string; changedFiles: Array<{ path: string }>; patchPath: string; usage: { requests: number } };
    expect(summary.type).toBe('summary');
    expect(summary.status).toBe('done');
    expect(summary.changedFiles.map((f) => f.path).sort()).toEqual(['a.txt', 'b.txt']);
    expect(summary.usage.requests).toBe(4);
    expect(lines.some((l) => (l.event as { type?: string } | undefined)?.type === 'finished')).toBe(true);
    // Command output is printed as it streams, as events like any other.
    expect(lines.some((l) => (l.event as { type?: string; data?: string } | undefined)?.type === 'command_output' && (l.event as { data: string }).data.includes('cli-sees-42'))).toBe(true);
    expect(await treeDigest(projectDir)).toBe(before);
    const runId = summary.runId;

    const runs = await airlock('runs', '--json');
    expect((JSON.parse(runs.stdout) as Array<{ id: string }>).map((r) => r.id)).toContain(runId);

    const show = await airlock('show', runId);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('b.txt');
    expect(show.stdout).toContain('verified gone');

    const patch = await airlock('patch', runId);
    expect(patch.stdout).toContain('+two');
    const patchFile = path.join(home, 'cli.patch');
    expect((await airlock('patch', runId, '--out', patchFile)).code).toBe(0);
    await exec('git', ['apply', '--check', patchFile], { cwd: projectDir });

    // A new branch with a commit; the user's branch and working tree stay as they were.
    // Apply needs the digest of what was reviewed: refused without, applied with the one `patch` printed.
    expect((await airlock('apply', runId, '--branch', 'airlock/cli-test')).code).toBe(2);
    const reviewed = /sha256 ([0-9a-f]{64})/.exec(patch.stderr)?.[1] as string;
    expect(reviewed).toMatch(/^[0-9a-f]{64}$/);
    const apply = await airlock('apply', runId, '--branch', 'airlock/cli-test', '--reviewed', reviewed, '--message', 'Edit a.txt from the CLI\n\nWith a body.');
    expect(apply.code).toBe(0);
    expect((await exec('git', ['log', '-1', '--format=%B', 'airlock/cli-test'], { cwd: projectDir })).stdout).toMatch(/^Edit a\.txt from the CLI\n\nWith a body\.\n/);
    // Applying again to the same branch is refused, naming the branch and a free name.
    const again = await airlock('apply', runId, '--branch', 'airlock/cli-test', '--reviewed', reviewed);
    expect(again.code).not.toBe(0);
    expect(again.stderr).toContain("Branch 'airlock/cli-test' already exists");
    expect(again.stderr).toContain("'airlock/cli-test-2'");
    expect((await exec('git', ['rev-parse', '--abbrev-ref', 'HEAD'], { cwd: projectDir })).stdout.trim()).toBe('main');
    expect(await readFile(path.join(projectDir, 'a.txt'), 'utf8')).toBe('one\n');
    expect((await exec('git', ['show', 'airlock/cli-test:a.txt'], { cwd: projectDir })).stdout).toBe('two\n');
    expect((await exec('git', ['show', 'airlock/cli-test:b.txt'], { cwd: projectDir })).stdout).toBe('new\n');

    const audit = await airlock('audit', 'verify', runId);
    expect(audit.code).toBe(0);
    expect(audit.stdout).toContain('intact');
    // `patch --out` and `apply --branch` both went into the apply log.
    expect(audit.stdout).toContain('apply log: intact (2 records, chained from the seal)');
  });

  it('continues a run with --continue: the conversation and the result carry over; --thread shows and applies the total', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-cli-thread-'));
    try {
      await exec('bash', ['-c', 'printf "one\\n" > a.txt && git init -q -b main && git add -A && git -c user.email=t@t.invalid -c user.name=t commit -qm init'], { cwd: dir });
      upstream.setScript([{ toolCalls: [{ name: 'write_file', input: { path: 'c.txt', content: 'turn one\n' } }] }, { text: 'wrote c' }]);
      const first = await airlock('run', dir, '--task', 'write c', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--json');
      expect(first.code, first.stderr).toBe(0);
      const firstId = (JSON.parse(first.stdout.trim().split('\n').at(-1) as string) as { runId: string }).runId;
      const before = upstream.requests.length;

      upstream.setScript([
        { toolCalls: [{ name: 'read_file', input: { path: 'c.txt' } }] },
        { toolCalls: [{ name: 'write_file', input: { path: 'd.txt', content: 'turn two\n' } }] },
        { text: 'wrote d' },
      ]);
      const second = await airlock('run', '--continue', firstId, '--task', 'also write d', '--key-env', 'AIRLOCK_TEST_KEY', '--json');
      expect(second.code, second.stderr).toBe(0);
      expect(second.stdout).not.toContain(CANARY_KEY);
      const summary = JSON.parse(second.stdout.trim().split('\n').at(-1) as string) as { runId: string; thread: unknown; changedFiles: Array<{ path: string }> };
      expect(summary.thread).toEqual({ rootRunId: firstId, parentRunId: firstId, turn: 2, conversation: 'carried' });
      expect(summary.changedFiles.map((c) => c.path)).toEqual(['d.txt']);
      // The upstream saw turn 1 in turn 2's first request, and turn 1's file was read in turn 2.
      const turnTwo = upstream.requests.slice(before).filter((r) => r.method === 'POST');
      expect(JSON.stringify(turnTwo[0]?.body)).toContain('write c');
      expect(JSON.stringify(turnTwo[1]?.body)).toContain('turn one');

      const show = await airlock('show', summary.runId, '--thread');
      expect(show.stdout).toContain(`thread: turn 2, continues ${firstId}`);
      expect(show.stdout).toContain('c.txt');
      const patch = await airlock('patch', summary.runId, '--thread');
      expect(patch.stdout).toContain('+turn one');
      expect(patch.stdout).toContain('+turn two');
      const reviewed = /sha256 ([0-9a-f]{64})/.exec(patch.stderr)?.[1] as string;
      expect(patch.stderr).toMatch(new RegExp(`airlock apply ${summary.runId} --reviewed [0-9a-f]{64} --thread`));
      const apply = await airlock('apply', summary.runId, '--thread', '--reviewed', reviewed);
      expect(apply.code, apply.stderr).toBe(0);
      expect(await readFile(path.join(dir, 'c.txt'), 'utf8')).toBe('turn one\n');
      expect(await readFile(path.join(dir, 'd.txt'), 'utf8')).toBe('turn two\n');

      // Another agent continues the same result with a fresh conversation, and says so.
      const other = await airlock('run', '--continue', firstId, '--task', 'copy', '--agent', 'custom', '--custom-command', 'cat c.txt > e.txt', '--key-env', 'AIRLOCK_TEST_KEY');
      expect(other.code, other.stderr).toBe(0);
      expect(other.stderr).toContain('a different agent (custom) than the parent\'s (builtin) starts a fresh conversation');
      expect(other.stdout).toContain('e.txt');

      // An unknown run cannot be continued.
      const unknown = await airlock('run', '--continue', 'r-zzzzzzzz-00000000', '--task', 'x', '--key-env', 'AIRLOCK_TEST_KEY');
      expect(unknown.code).not.toBe(0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('exits 4 with a failed summary when the provider rejects the key, and says why', async () => {
    upstream.setScript([{ text: 'unused' }]);
    const wrong = { ...env, AIRLOCK_WRONG_KEY: 'sk-ant-wrong-key-0000000000' };
    const result = await new Promise<CliResult>((resolve) => {
      execFile(process.execPath, [cli, 'run', projectDir, '--task', 'edit', '--provider', 'anthropic', '--key-env', 'AIRLOCK_WRONG_KEY', '--json'], { env: wrong }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(result.code).toBe(4);
    const summary = JSON.parse(result.stdout.trim().split('\n').at(-1) as string) as { status: string; error?: { message: string } };
    expect(summary.status).toBe('failed');
    expect(summary.error?.message).toMatch(/401|key/i);
    expect(result.stdout).not.toContain('sk-ant-wrong-key-0000000000');
  });

  it('runs a past run again with --again: same settings, a flag changes one of them', async () => {
    upstream.setScript([{ toolCalls: [{ name: 'finish', input: { summary: 'first' } }] }]);
    const first = await airlock('run', projectDir, '--task', 'look around', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY',
      '--budget-tokens', '90000', '--timeout', '600', '--network', 'allowlist', '--allow', 'example.test', '--json');
    expect(first.code).toBe(0);
    const firstId = (JSON.parse(first.stdout.trim().split('\n').at(-1) as string) as { runId: string }).runId;

    upstream.setScript([{ toolCalls: [{ name: 'finish', input: { summary: 'second' } }] }]);
    const again = await airlock('run', '--again', firstId, '--task', 'look again', '--key-env', 'AIRLOCK_TEST_KEY', '--json');
    expect(again.stderr).toBe('');
    expect(again.code).toBe(0);
    const secondId = (JSON.parse(again.stdout.trim().split('\n').at(-1) as string) as { runId: string }).runId;
    expect(secondId).not.toBe(firstId);
    const [a, b] = await Promise.all([firstId, secondId].map(async (id) => JSON.parse(await readFile(path.join(home, 'runs', id, 'run.json'), 'utf8')) as Record<string, unknown>));
    const same = (r: Record<string, unknown> | undefined) => ({ projectDir: r?.projectDir, agent: r?.agent, provider: r?.provider, model: r?.model, isolation: r?.isolation, network: r?.network, allowlist: r?.allowlist, limits: r?.limits, approval: r?.approval });
    expect(same(b)).toEqual(same(a));
    expect(a?.limits).toEqual({ timeoutSec: 600, budgetTokens: 90000 });
    expect(b?.task).toBe('look again');

    const unknown = await airlock('run', '--again', 'r-zzzzzzzz-00000000', '--json');
    expect(unknown.code).not.toBe(0);
  });

  it('gives the sandbox repository the history the gitHistory setting allows, and --git-history wins over it', async () => {
    await writeFile(path.join(home, 'settings.json'), JSON.stringify({ gitHistory: 'none' }));
    const author = async (...flags: string[]) => {
      // `<""<` in the command so the echoed command line never matches.
      upstream.setScript([{ toolCalls: [{ name: 'run_command', input: { command: 'echo "author<""<$(git log -1 --format=%an)>>"' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'probed' } }] }]);
      const run = await airlock('run', projectDir, '--task', 'probe', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--json', ...flags);
      expect(run.code).toBe(0);
      return /author<<([^>]*)>>/.exec(run.stdout)?.[1];
    };
    try {
      // `none`: one new commit by Airlock, none of the user's metadata.
      expect(await author()).toBe('Airlock');
      expect(await author('--git-history', '5')).toBe('t');
    } finally {
      await rm(path.join(home, 'settings.json'), { force: true });
    }
  });

  it('rejects bad input with exit 2 and a clear message', async () => {
    const noTask = await airlock('run', projectDir, '--provider', 'anthropic');
    expect(noTask.code).toBe(2);
    expect(noTask.stderr).toContain('describe the task');
    const badHistory = await airlock('run', projectDir, '--task', 'x', '--provider', 'anthropic', '--git-history', 'some');
    expect(badHistory.code).toBe(2);
    expect(badHistory.stderr).toContain('--git-history takes none, all or a number of commits');
    const badId = await airlock('show', 'not-a-run');
    expect(badId.code).toBe(2);
    expect(badId.stderr).toContain('not a run id');
  });
});
