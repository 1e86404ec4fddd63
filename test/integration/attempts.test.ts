import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Comparison, StartAttemptsInput, type Comparison as ComparisonT } from '../../contracts/attempts';
import type { RunStatus } from '../../contracts/runs';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, filesContaining, leftoversOf, type RunFixture } from '../support/run-fixture';

/**
 * Attempt groups (docs/architecture.md §18) on the real engine, the real Claude Code and Codex CLIs
 * and the built-in agent, each scripted by the fake upstream under its own model: one task, three
 * sandboxes, two at a time (the third waits `queued`), and a check (`npm test`) the host runs after
 * each agent's processes are gone. The Claude Code attempt prints "tests passed" and fails its check;
 * the recorded check is what the host measured. Applying one attempt writes exactly its reviewed bytes.
 */

const docker = await requirePrerequisite('docker');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

const PROJECT = {
  'answer.txt': '1\n',
  'package.json': `${JSON.stringify({ name: 'demo', version: '1.0.0', private: true, scripts: { test: 'node test.js' } })}\n`,
  'test.js': "const v = require('fs').readFileSync('answer.txt', 'utf8').trim();\nif (v !== '42') { console.error('expected 42, got ' + v); process.exit(1); }\nconsole.log('answer ok');\n",
};

describe.skipIf(!docker.ok)('attempt groups: three agents, one task, a host-run check (real Docker, real CLIs, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
    await f.core.image('agents');
    await f.core.image('base');
  });
  afterAll(async () => {
    await f?.close();
  });

  it('runs three attempts two at a time, records the host-measured checks, compares, and applies one', async () => {
    const projectDir = await f.project(PROJECT);
    await f.services.settings.update({ attemptsConcurrency: 2 });
    // The built-in agent writes the right answer and leaves a detached process behind (the host kills it before collect).
    f.upstream.setScriptFor('claude-opus-4-5', [
      { toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '42\n' } }] },
      { toolCalls: [{ name: 'run_command', input: { command: "setsid sh -c 'sleep 600' >/dev/null 2>&1 < /dev/null & echo started" } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'answer is 42' } }] },
    ]);
    // Claude Code writes a wrong answer and claims the tests passed.
    f.upstream.setScriptFor('claude-sonnet-4-5', [
      { toolCalls: [{ name: 'Bash', input: { command: "echo 41 > answer.txt && echo 'npm test: all tests passed'", description: 'answer' } }] },
      { text: 'All tests passed.' },
    ]);
    f.upstream.setScriptFor('gpt-5', [{ toolCalls: [{ name: 'exec_command', input: { cmd: 'echo 42 > answer.txt' } }] }, { text: 'Wrote 42.' }]);

    const statuses = new Map<string, RunStatus>();
    let maxActive = 0;
    const sub = f.services.runs.onDidChangeStatus((s) => {
      if (!s.attempt) return;
      statuses.set(s.id, s.status);
      const active = [...statuses.values()].filter((st) => !['queued', 'done', 'failed', 'cancelled', 'interrupted'].includes(st)).length;
      maxActive = Math.max(maxActive, active);
    });
    const group = await f.services.attempts.start(
      StartAttemptsInput.parse({
      run: { projectDir, task: 'Make npm test pass: answer.txt must hold 42.', provider: 'anthropic', model: 'claude-opus-4-5', check: { command: 'npm test', timeoutSec: 300 } },
      attempts: [
        { agent: 'builtin', provider: 'anthropic', model: 'claude-opus-4-5' },
        { agent: 'claude-code', provider: 'anthropic', model: 'claude-sonnet-4-5' },
        { agent: 'codex', provider: 'openai', model: 'gpt-5' },
      ],
      }),
    );
    expect(group.concurrency).toBe(2);
    expect(group.attempts.map((a) => a.agent)).toEqual(['builtin', 'claude-code', 'codex']);
    // Two run; the third waits as queued.
    const third = await f.services.runs.get({ runId: group.attempts[2]?.runId as string });
    expect(third.status).toBe('queued');
    expect(third.attempt).toEqual({ groupId: group.id, index: 2 });
    const runs = await Promise.all(group.attempts.map((a) => f.core.runs.wait(a.runId)));
    sub.dispose();
    expect(maxActive).toBe(2);
    const [builtin, claude, codex] = runs;
    for (const r of runs) expect(r.status, JSON.stringify({ id: r.id, error: r.error })).toBe('done');

    // The checks are the host's: the built-in and Codex attempts pass, Claude Code's fails despite its "tests passed".
    expect(builtin?.check).toMatchObject({ command: 'npm test', exitCode: 0, passed: true });
    expect(builtin?.check?.output).toContain('answer ok');
    // The detached `sleep 600` the built-in agent left was killed before collect and check.
    expect(builtin?.check?.killedProcesses).toBeGreaterThanOrEqual(1);
    expect(codex?.check).toMatchObject({ exitCode: 0, passed: true });
    expect(claude?.check).toMatchObject({ exitCode: 1, passed: false, timedOut: false });
    expect(claude?.check?.output).toContain('expected 42, got 41');
    expect(await f.terminalLog(claude?.id as string)).toContain('npm test: all tests passed');

    // `airlock compare --json`: one object, the host-measured checks.
    const env = { ...process.env, AIRLOCK_HOME: f.home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-test-${process.pid}` };
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [cli, 'compare', group.id, '--json'], { env }, (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    });
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout.trim().split('\n')).toHaveLength(1);
    const c: ComparisonT = Comparison.parse(JSON.parse(out.stdout));
    expect(c.groupId).toBe(group.id);
    expect(c.attempts.map((a) => [a.agent, a.model, a.status, a.check?.passed, a.check?.exitCode])).toEqual([
      ['builtin', 'claude-opus-4-5', 'done', true, 0],
      ['claude-code', 'claude-sonnet-4-5', 'done', false, 1],
      ['codex', 'gpt-5', 'done', true, 0],
    ]);
    for (const a of c.attempts) {
      expect(a.filesChanged).toBe(1);
      expect(a.linesAdded).toBe(1);
      expect(a.turns).toBeGreaterThanOrEqual(2);
      expect(a.tokens.total).toBeGreaterThan(0);
      expect(a.wallMs).toBeGreaterThan(0);
      expect(a.check?.durationMs).toBeGreaterThan(0);
    }
    const md = await f.services.attempts.export({ groupId: group.id, format: 'markdown' });
    expect(md.text).toContain('| 2 | claude-code | claude-sonnet-4-5 | done | failed (exit 1');

    // Apply the built-in attempt: exactly its reviewed bytes; the others' sandboxes verified gone.
    const reviewed = await f.services.diffs.list({ runId: builtin?.id as string });
    const applied = await f.services.attempts.apply({ groupId: group.id, apply: { runId: builtin?.id as string, mode: 'working-tree', reviewedSha256: reviewed.patchSha256 as string } });
    expect(applied.result.applied).toEqual(['answer.txt']);
    expect(await readFile(path.join(projectDir, 'answer.txt'), 'utf8')).toBe('42\n');
    expect(applied.others.map((o) => [o.runId, o.verified, o.leftovers])).toEqual([
      [claude?.id, true, []],
      [codex?.id, true, []],
    ]);
    for (const r of runs) expect(await leftoversOf(r.id)).toEqual([]);
    const after = await f.services.attempts.compare({ groupId: group.id });
    expect(after.chosen?.runId).toBe(builtin?.id);
    expect(after.attempts.map((a) => a.applied)).toEqual([true, false, false]);
    for (const r of runs) expect(await filesContaining(f.core.store.paths(r.id).dir, CANARY_KEY)).toEqual([]);
  });

  it('airlock run --attempts … --check … --json prints the group id first and the comparison last', async () => {
    const projectDir = await f.project(PROJECT);
    f.upstream.setScriptFor('claude-opus-4-5', [{ toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '42\n' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'ok' } }] }]);
    f.upstream.setScriptFor('claude-haiku-4-5', [{ toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '7\n' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'all tests passed' } }] }]);
    const env = { ...process.env, AIRLOCK_HOME: f.home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-test-${process.pid}`, AIRLOCK_TEST_KEY: CANARY_KEY };
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [cli, 'run', projectDir, '--task', 'answer 42', '--provider', 'anthropic', '--key-env', 'AIRLOCK_TEST_KEY', '--attempts', 'builtin:claude-opus-4-5,builtin:claude-haiku-4-5', '--check', 'npm test', '--json'], { env, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    expect(out.stdout + out.stderr).not.toContain(CANARY_KEY);
    expect(out.code, out.stderr).toBe(0);
    const lines = out.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; groupId: string });
    expect(lines[0]).toMatchObject({ type: 'attempts_started', groupId: expect.stringMatching(/^g-/) });
    const done = lines.at(-1) as unknown as { type: string } & ComparisonT;
    expect(done.type).toBe('attempts_done');
    expect(done.groupId).toBe(lines[0]?.groupId);
    expect(done.attempts.map((a) => [a.model, a.check?.passed, a.check?.exitCode])).toEqual([
      ['claude-opus-4-5', true, 0],
      ['claude-haiku-4-5', false, 1],
    ]);
  });
});
