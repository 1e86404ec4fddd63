import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, filesContaining, leftoversOf, treeDigest, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

/** The messages of one generation request as the fake upstream received it, as text. */
function messagesOf(r: RecordedRequest | undefined): string {
  return JSON.stringify((r?.body as { messages?: unknown } | undefined)?.messages ?? null);
}

/**
 * Follow-up turns with the built-in agent (docs/architecture.md §15): the second turn's sandbox
 * starts from the first result, the model sees the first turn's conversation, each turn's own
 * change and the thread's total are reviewable and applicable, and the first sandbox is gone first.
 */
describe.skipIf(!docker.ok)('continue a run: a thread of turns (real Docker, fake upstream, built-in agent)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  for (const format of ['anthropic', 'openai'] as const) {
    it(`continues a finished run in the ${format} format: result, conversation, thread review and apply, wipe first`, async () => {
      const projectDir = await f.project();
      const before = await treeDigest(projectDir);
      const model = format === 'anthropic' ? 'claude-sonnet-4-5' : 'gpt-5';
      const first = await f.core.runs.wait(
        (
          await f.start({
            projectDir,
            provider: format,
            model,
            task: 'make answer return 2 and write a plan',
            script: [
              { toolCalls: [{ name: 'write_file', input: { path: 'notes/plan.md', content: 'turn-one-plan\n' } }] },
              { toolCalls: [{ name: 'edit_file', input: { path: 'src/app.js', old_text: 'return 1;', new_text: 'return 2;' } }] },
              { toolCalls: [{ name: 'finish', input: { summary: 'answer is 2' } }] },
            ],
          })
        ).id,
      );
      expect(first.status).toBe('done');
      const requestsBefore = f.upstream.requests.length;

      f.upstream.setScript([
        { toolCalls: [{ name: 'read_file', input: { path: 'notes/plan.md' } }] },
        { toolCalls: [{ name: 'edit_file', input: { path: 'src/app.js', old_text: 'return 2;', new_text: 'return 3;' } }] },
        { toolCalls: [{ name: 'write_file', input: { path: 'src/empty.js', content: 'export const empty = [];\n' } }] },
        { toolCalls: [{ name: 'finish', input: { summary: 'handled the empty case' } }] },
      ]);
      const second = await f.core.runs.wait((await f.services.runs.continue({ runId: first.id, task: 'also handle the empty case' })).id);
      expect(second.error).toBeUndefined();
      expect(second.status).toBe('done');
      // Same agent, provider and model; one thread.
      expect(second).toMatchObject({ agent: 'builtin', provider: format, model, projectDir: first.projectDir });
      expect(second.thread).toEqual({ rootRunId: first.id, parentRunId: first.id, turn: 2, conversation: 'carried' });

      // The first sandbox was verified gone before the second was created.
      expect(first.wipe?.verified).toBe(true);
      expect(Date.parse(first.wipe?.at as string)).toBeLessThan(Date.parse(second.createdAt));
      expect(await leftoversOf(first.id)).toEqual([]);
      expect(await leftoversOf(second.id)).toEqual([]);
      const audit = await f.services.audit.read({ runId: second.id, offset: 0, limit: 1000 });
      const threadRecord = audit.records.find((r) => r.type === 'thread');
      expect(threadRecord?.data).toMatchObject({ parentRunId: first.id, parentWipedAt: first.wipe?.at, resultFiles: 2 });
      expect((threadRecord?.data as { sessionFiles: unknown[] }).sessionFiles).toHaveLength(1);

      // The model's first request of turn 2 carries turn 1's conversation, then the new task.
      const turnTwo = f.upstream.requests.slice(requestsBefore).filter((r) => r.method === 'POST');
      const sent = messagesOf(turnTwo[0]);
      expect(sent).toContain('make answer return 2 and write a plan');
      expect(sent).toContain('turn-one-plan');
      expect(sent.indexOf('also handle the empty case')).toBeGreaterThan(sent.indexOf('turn-one-plan'));
      // Turn 2's sandbox started with turn 1's result: the file it wrote was read back.
      expect(messagesOf(turnTwo[1])).toMatch(/1\\tturn-one-plan/);

      // Each turn's own change, and the thread's total.
      const own = await f.services.diffs.list({ runId: second.id });
      expect(own.files.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added src/empty.js', 'modified src/app.js']);
      expect((await f.services.diffs.file({ runId: second.id, path: 'src/app.js', context: 3 })).diff).toMatch(/-  return 2;\n\+  return 3;/);
      const total = await f.services.diffs.list({ runId: second.id, scope: 'thread' });
      expect(total.files.map((c) => `${c.status} ${c.path}`).sort()).toEqual(['added notes/plan.md', 'added src/empty.js', 'modified src/app.js']);
      expect((await f.services.diffs.file({ runId: second.id, scope: 'thread', path: 'src/app.js', context: 3 })).diff).toMatch(/-  return 1;\n\+  return 3;/);
      // A first run's thread total is its own result.
      expect((await f.services.diffs.list({ runId: first.id, scope: 'thread' })).patchSha256).toBe((await f.services.diffs.list({ runId: first.id })).patchSha256);
      expect(await treeDigest(projectDir)).toBe(before);

      // No key in anything either run kept, the carried session included.
      const session = JSON.parse(await readFile(path.join(f.core.store.paths(first.id).artifacts, 'session.json'), 'utf8')) as { files: Array<{ path: string; data: string }> };
      expect(session.files.map((x) => x.path)).toEqual(['transcript.json']);
      const carried = Buffer.from(session.files[0]!.data, 'base64').toString('utf8');
      expect(carried).toContain('turn-one-plan');
      expect(carried).not.toContain(CANARY_KEY);
      for (const run of [first, second]) expect(await filesContaining(f.core.store.paths(run.id).dir, CANARY_KEY)).toEqual([]);

      // The turn's own change is refused under the total's digest; the total applies.
      await expect(f.services.diffs.apply({ runId: second.id, mode: 'working-tree', reviewedSha256: total.patchSha256 as string })).rejects.toThrow();
      const applied = await f.services.diffs.apply({ runId: second.id, scope: 'thread', mode: 'working-tree', reviewedSha256: total.patchSha256 as string });
      expect(applied.conflicts).toEqual([]);
      expect(applied.applied.sort()).toEqual(['notes/plan.md', 'src/app.js', 'src/empty.js']);
      expect(await readFile(path.join(projectDir, 'src/app.js'), 'utf8')).toContain('return 3;');
      expect(await readFile(path.join(projectDir, 'notes/plan.md'), 'utf8')).toBe('turn-one-plan\n');
      expect(await readFile(path.join(projectDir, 'src/empty.js'), 'utf8')).toBe('export const empty = [];\n');
    });
  }

  it('forks from an earlier turn, and a different agent starts a fresh conversation on the same result', async () => {
    const projectDir = await f.project();
    const first = await f.core.runs.wait(
      (await f.start({ projectDir, task: 'write a plan', script: [{ toolCalls: [{ name: 'write_file', input: { path: 'plan.md', content: 'fork-base\n' } }] }, { text: 'done' }] })).id,
    );
    f.upstream.setScript([{ toolCalls: [{ name: 'write_file', input: { path: 'a.md', content: 'branch a\n' } }] }, { text: 'done' }]);
    const a = await f.core.runs.wait((await f.services.runs.continue({ runId: first.id, task: 'branch a' })).id);
    f.upstream.setScript([{ toolCalls: [{ name: 'read_file', input: { path: 'a.md' } }] }, { text: 'done' }]);
    const b = await f.core.runs.wait((await f.services.runs.continue({ runId: first.id, task: 'branch b' })).id);
    expect(a.thread).toMatchObject({ rootRunId: first.id, parentRunId: first.id, turn: 2 });
    expect(b.thread).toMatchObject({ rootRunId: first.id, parentRunId: first.id, turn: 2 });
    // The fork starts from turn 1's result: branch a's file is not there.
    expect(messagesOf(f.upstream.requests.filter((r) => r.method === 'POST').at(-1))).toMatch(/not found|No such file|does not exist/i);
    expect((await f.services.diffs.list({ runId: b.id, scope: 'thread' })).files.map((c) => c.path)).toEqual(['plan.md']);

    // Turn 3 of fork a: the thread names the first run; its total holds both turns.
    f.upstream.setScript([{ text: 'nothing more' }]);
    const third = await f.core.runs.wait((await f.services.runs.continue({ runId: a.id, task: 'anything else?', model: 'claude-sonnet-4-5' })).id);
    expect(third.thread).toMatchObject({ rootRunId: first.id, parentRunId: a.id, turn: 3, conversation: 'carried' });
    expect((await f.services.diffs.list({ runId: third.id, scope: 'thread' })).files.map((c) => c.path).sort()).toEqual(['a.md', 'plan.md']);
    expect((await f.services.diffs.list({ runId: third.id })).files).toEqual([]);

    // Another agent continues the same result with a fresh conversation, and says so.
    const other = await f.core.runs.wait((await f.services.runs.continue({ runId: first.id, task: 'copy the plan', agent: 'custom', customCommand: 'cat plan.md > seen.txt' })).id);
    expect(other.thread).toMatchObject({ parentRunId: first.id, turn: 2, conversation: 'fresh' });
    expect((await f.services.diffs.file({ runId: other.id, path: 'seen.txt', context: 3 })).diff).toContain('+fork-base');

    // A run that is not over, or an unknown one, cannot be continued.
    await expect(f.services.runs.continue({ runId: 'r-zzzzzzzz-00000000', task: 'x' })).rejects.toThrow();
  });
});
