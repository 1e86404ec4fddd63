import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, exec, filesContaining, treeDigest, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

function messagesOf(r: RecordedRequest | undefined): string {
  return JSON.stringify((r?.body as { messages?: unknown } | undefined)?.messages ?? null);
}

const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

const exists = (p: string) => stat(p).then(() => true, () => false);

/**
 * Checkpoints inside a run (docs/architecture.md §19), through the real engine, proxy and built-in
 * agent against the scripted fake upstream: four file-changing turns (and one that only reads) give
 * four checkpoints, the last being the result; checkpoint 2 reviews and applies alone under its own
 * digest; Continue from checkpoint 2 starts from its tree with the conversation up to that turn.
 */
describe.skipIf(!docker.ok)('checkpoints inside a run (real Docker, fake upstream, built-in agent)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('records one checkpoint per file-changing turn; checkpoint 2 applies alone and can be continued from', async () => {
    const projectDir = await f.project();
    const before = await treeDigest(projectDir);
    const run = await f.core.runs.wait(
      (
        await f.start({
          projectDir,
          task: 'four steps',
          script: [
            { toolCalls: [{ name: 'write_file', input: { path: 'a.txt', content: 'turn-one\n' } }] },
            { toolCalls: [{ name: 'edit_file', input: { path: 'src/app.js', old_text: 'return 1;', new_text: 'return 2;' } }] },
            // Reads only: no checkpoint of its own.
            { toolCalls: [{ name: 'read_file', input: { path: 'a.txt' } }] },
            { toolCalls: [{ name: 'write_file', input: { path: 'b.txt', content: 'turn-three-secret-plan\n' } }] },
            { toolCalls: [{ name: 'run_command', input: { command: 'rm notes.txt' } }] },
            { toolCalls: [{ name: 'finish', input: { summary: 'four steps done' } }] },
          ],
        })
      ).id,
    );
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('done');

    const { checkpoints } = await f.services.diffs.checkpoints({ runId: run.id });
    expect(checkpoints.map((c) => c.n)).toEqual([1, 2, 3, 4]);
    expect(checkpoints.map((c) => c.files)).toEqual([1, 2, 3, 4]);
    // The turn boundary is the model request that followed the turn (request 4 came after a read-only turn).
    expect(checkpoints.map((c) => c.request)).toEqual([2, 3, 5, 6]);
    expect(checkpoints.map((c) => c.final === true)).toEqual([false, false, false, true]);
    expect(checkpoints.every((c) => c.conversation)).toBe(true);
    // The last checkpoint is the run's result.
    const result = await f.services.diffs.list({ runId: run.id });
    expect(checkpoints[3]?.patchSha256).toBe(result.patchSha256);

    // Checkpoint 2, reviewed on its own: the run's change up to turn 2, derived on the host.
    const two = await f.services.diffs.list({ runId: run.id, checkpoint: 2 });
    expect(two.files.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added a.txt', 'modified src/app.js']);
    expect(two.patchSha256).toBe(checkpoints[1]?.patchSha256);
    expect((await f.services.diffs.file({ runId: run.id, checkpoint: 2, path: 'src/app.js', context: 3 })).diff).toMatch(/-  return 1;\n\+  return 2;/);
    const preview = await f.services.diffs.preview({ runId: run.id, checkpoint: 2 });
    expect(preview.sha256).toBe(two.patchSha256);
    expect(preview.text).not.toContain('turn-three-secret-plan');
    await expect(f.services.diffs.list({ runId: run.id, checkpoint: 9 })).rejects.toThrow(/no checkpoint 9 \(it has 4: 1–4\)/);

    // Applied alone: the result's digest is refused for it, its own gives exactly the tree after turn 2.
    expect(await treeDigest(projectDir)).toBe(before);
    await expect(f.services.diffs.apply({ runId: run.id, checkpoint: 2, mode: 'working-tree', reviewedSha256: result.patchSha256 as string })).rejects.toThrow();
    expect(await treeDigest(projectDir)).toBe(before);
    const applied = await f.services.diffs.apply({ runId: run.id, checkpoint: 2, mode: 'working-tree', reviewedSha256: two.patchSha256 as string });
    expect(applied.conflicts).toEqual([]);
    expect(applied.applied.sort()).toEqual(['a.txt', 'src/app.js']);
    expect(await readFile(path.join(projectDir, 'a.txt'), 'utf8')).toBe('turn-one\n');
    expect(await readFile(path.join(projectDir, 'src/app.js'), 'utf8')).toContain('return 2;');
    expect(await exists(path.join(projectDir, 'b.txt'))).toBe(false);
    expect(await readFile(path.join(projectDir, 'notes.txt'), 'utf8')).toBe('one\ntwo\n');
    const { stdout: status } = await exec('git', ['status', '--porcelain'], { cwd: projectDir });
    expect(status.split('\n').filter(Boolean).sort()).toEqual([' M src/app.js', '?? a.txt']);
    const log = await readFile(f.core.store.paths(run.id).applyLog, 'utf8');
    expect(log).toContain('"checkpoint":2');

    // The CLI: list as JSON, show one with its digest, apply checkpoint 3 alone to a fresh clone.
    const airlock = (...args: string[]) => new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [cli, ...args], { env: { ...process.env, AIRLOCK_HOME: f.home }, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    });
    const listed = await airlock('checkpoints', run.id, '--json');
    expect(listed.code).toBe(0);
    const json = JSON.parse(listed.stdout) as { runId: string; checkpoints: Array<{ n: number; patchSha256: string; final?: boolean }> };
    expect(json.runId).toBe(run.id);
    expect(json.checkpoints.map((c) => c.patchSha256)).toEqual(checkpoints.map((c) => c.patchSha256));
    const shown = await airlock('show', run.id, '--checkpoint', '3');
    expect(shown.stdout).toContain(`checkpoint 3 sha256: ${checkpoints[2]?.patchSha256}`);
    expect(shown.stdout).toContain('b.txt');
    expect(shown.stdout).not.toContain('notes.txt');
    const clone = await mkdtemp(path.join(os.tmpdir(), 'airlock-cp-clone-'));
    try {
      await exec('git', ['clone', '-q', projectDir, clone]);
      const cliApply = await airlock('apply', run.id, '--checkpoint', '3', '--reviewed', checkpoints[2]?.patchSha256 as string, '--to', clone);
      expect(cliApply.code).toBe(0);
      expect(await readFile(path.join(clone, 'b.txt'), 'utf8')).toBe('turn-three-secret-plan\n');
      expect(await readFile(path.join(clone, 'notes.txt'), 'utf8')).toBe('one\ntwo\n');
      const { stdout: cloneStatus } = await exec('git', ['status', '--porcelain'], { cwd: clone });
      expect(cloneStatus.split('\n').filter(Boolean).sort()).toEqual([' M src/app.js', '?? a.txt', '?? b.txt']);
    } finally {
      await rm(clone, { recursive: true, force: true });
    }

    // Continue from checkpoint 2: its tree, and the conversation up to turn 2.
    const requestsBefore = f.upstream.requests.length;
    f.upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: 'ls; cat src/app.js' } }] },
      { toolCalls: [{ name: 'write_file', input: { path: 'c.txt', content: 'from-two\n' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'continued' } }] },
    ]);
    const next = await f.core.runs.wait((await f.services.runs.continue({ runId: run.id, checkpoint: 2, task: 'go another way' })).id);
    expect(next.error).toBeUndefined();
    expect(next.thread).toEqual({ rootRunId: run.id, parentRunId: run.id, turn: 2, conversation: 'carried', checkpoint: 2 });
    const sent = f.upstream.requests.slice(requestsBefore).filter((r) => r.method === 'POST');
    const first = messagesOf(sent[0]);
    expect(first).toContain('four steps');
    expect(first).toContain('turn-one');
    expect(first).toContain('return 2;');
    expect(first).not.toContain('turn-three-secret-plan');
    expect(first).not.toContain('rm notes.txt');
    expect(first.indexOf('go another way')).toBeGreaterThan(first.indexOf('return 2;'));
    const listing = messagesOf(sent[1]);
    expect(listing).toContain('a.txt');
    expect(listing).toContain('notes.txt');
    expect(listing).not.toContain('b.txt');
    expect(listing).toContain('return 2;');
    // The follow-up's total: checkpoint 2 plus its own file.
    const total = await f.services.diffs.list({ runId: next.id, scope: 'thread' });
    expect(total.files.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added a.txt', 'added c.txt', 'modified src/app.js']);
    for (const r of [run, next]) expect(await filesContaining(f.core.store.paths(r.id).dir, CANARY_KEY)).toEqual([]);
  });

  it('a run whose turns change nothing has no checkpoints', async () => {
    const projectDir = await f.project();
    const run = await f.core.runs.wait((await f.start({ projectDir, script: [{ toolCalls: [{ name: 'read_file', input: { path: 'README.md' } }] }, { text: 'nothing to do' }] })).id);
    expect(run.status).toBe('done');
    expect((await f.services.diffs.checkpoints({ runId: run.id })).checkpoints).toEqual([]);
  });
});
