import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { checkUnproven, type AttemptGroup } from '../../contracts/attempts';
import { newAttemptGroupId, newRunId } from '../../contracts/ids';
import { AttemptGroupStore } from './attempt-group-store';
import { compareAttempt, comparisonMarkdown, comparisonOf } from './attempt-report';
import { StoredRun } from './run-record';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

function run(id: string, extra: Partial<StoredRun> = {}): StoredRun {
  return StoredRun.parse({
    id, kind: 'agent', task: 't', projectDir: '/p', agent: 'codex', provider: 'openai', model: 'gpt-5', status: 'done', createdAt: '2026-12-02T00:00:00.000Z', updatedAt: '2026-12-02T00:00:10.000Z',
    startedAt: '2026-12-02T00:00:01.000Z', endedAt: '2026-12-02T00:00:10.000Z', isolation: 'container', network: 'none', sandbox: { driver: 'docker' },
    usage: { inputTokens: 100, outputTokens: 20, cacheReadTokens: 5, cacheWriteTokens: 0, requests: 3 },
    ...extra,
  });
}

describe('attempt comparison', () => {
  it('takes the check from the run record and counts changes, tokens, wall time and risky files', () => {
    const id = newRunId();
    const r = run(id, { check: { command: 'npm test', exitCode: 1, passed: false, timedOut: false, durationMs: 1234, output: 'tests passed (said the agent)', outputBytes: 30, truncated: false, killedProcesses: 0 }, wipe: { verified: true, removed: [], leftovers: [], at: 'x' } });
    const a = compareAttempt({ index: 1, runId: id, agent: 'codex', provider: 'openai', model: 'gpt-5' }, r, [
      { path: 'a.txt', status: 'modified', binary: false, additions: 2, deletions: 1 },
      { path: '.github/workflows/ci.yml', status: 'added', binary: false, additions: 5, deletions: 0, risky: 'CI workflow' },
    ], undefined);
    expect(a).toMatchObject({ check: { exitCode: 1, passed: false, durationMs: 1234 }, filesChanged: 2, linesAdded: 7, linesRemoved: 1, turns: 3, wallMs: 10_000, wipeVerified: true, applied: false });
    expect(a.tokens.total).toBe(125);
    expect(a.riskyFiles).toEqual([{ path: '.github/workflows/ci.yml', reason: 'CI workflow' }]);
  });

  it('marks a pass unproven when the attempt changed what its check reads, in the comparison and the report', () => {
    const id = newRunId();
    const check = { command: 'bash check.sh', exitCode: 0, passed: true, timedOut: false, durationMs: 50, output: '', outputBytes: 0, truncated: false, killedProcesses: 0 };
    const slot = { index: 0, runId: id, agent: 'builtin' as const, provider: 'openai', model: 'gpt-5' };
    const touched = compareAttempt(slot, run(id, { check }), [{ path: 'check.sh', status: 'modified', binary: false, additions: 1, deletions: 1 }], undefined, 'bash check.sh');
    expect(touched.checkFiles).toEqual([{ path: 'check.sh', reason: 'named in the check command' }]);
    expect(checkUnproven(touched)).toBe(true);
    expect(touched.files).toEqual([{ path: 'check.sh', status: 'modified', additions: 1, deletions: 1 }]);
    const group: AttemptGroup = { id: newAttemptGroupId(), createdAt: 'now', projectDir: '/p', task: 't', check: 'bash check.sh', concurrency: 1, attempts: [slot] };
    expect(comparisonMarkdown(comparisonOf(group, [touched]))).toContain('passed (exit 0, 0.1 s), UNPROVEN: the attempt changed check.sh');
    const honest = compareAttempt(slot, run(id, { check }), [{ path: 'answer.txt', status: 'modified', binary: false, additions: 1, deletions: 1 }], undefined, 'bash check.sh');
    expect(checkUnproven(honest)).toBe(false);
  });

  it('renders Markdown whose table a task or model with | and newlines cannot break', () => {
    const id = newRunId();
    const group: AttemptGroup = { id: newAttemptGroupId(), createdAt: 'now', projectDir: '/p', task: 'fix | this\nplease', check: 'npm test', concurrency: 2, attempts: [{ index: 0, runId: id, agent: 'codex', provider: 'openai', model: 'gpt|5' }] };
    const md = comparisonMarkdown(comparisonOf(group, [compareAttempt(group.attempts[0] as AttemptGroup['attempts'][number], run(id, { model: 'gpt|5' }), [], undefined)]));
    expect(md).toContain('- Task: fix \\| this');
    const rows = md.split('\n').filter((l) => l.startsWith('| 1 |'));
    expect(rows).toHaveLength(1);
    expect(rows[0]).toContain('gpt\\|5');
    expect(rows[0]?.split(/(?<!\\)\|/).length).toBe(15);
  });
});

describe('attempt group store', () => {
  it('writes groups atomically, lists newest first, and says what is wrong with a damaged file', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-groups-'));
    dirs.push(home);
    const store = new AttemptGroupStore(home);
    const older = newAttemptGroupId(Date.now() - 1000);
    const newer = newAttemptGroupId();
    for (const id of [older, newer]) await store.create({ id, createdAt: 'now', projectDir: '/p', task: 't', concurrency: 1, attempts: [{ index: 0, runId: newRunId(), agent: 'builtin', provider: 'anthropic', model: 'm' }] });
    expect((await store.list()).map((g) => g.id)).toEqual([newer, older]);
    await writeFile(path.join(store.root, `${older}.json`), JSON.stringify({ id: older, attempts: 'no' }));
    await expect(store.get(older)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${path.join(store.root, `${older}.json`)} is damaged: field `) });
    expect((await store.list()).map((g) => g.id)).toEqual([newer]);
    await expect(store.get('../../etc/passwd')).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(store.get(newAttemptGroupId())).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });
});
