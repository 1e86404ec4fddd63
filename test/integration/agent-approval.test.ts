import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../contracts/runs';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, leftoversOf, type RunFixture } from '../support/run-fixture';

/**
 * Approval mode `ask` end to end: the built-in agent inside the sandbox pauses before each shell
 * command, the request reaches the host as an event, the answer goes back over the channel to the
 * agent's stdin; a denied command never runs, an approved one does, and both are audited.
 */

const docker = await requirePrerequisite('docker');

describe.skipIf(!docker.ok)('built-in agent, approval mode ask (real Docker, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
    await f.core.image('base');
  });
  afterAll(async () => {
    await f?.close();
  });

  it('runs only the approved command', async () => {
    const projectDir = await f.project();
    const asked: string[] = [];
    let runId = '';
    const early: RunEvent[] = [];
    const answer = (e: RunEvent) => {
      if (e.event.type !== 'approval_request') return;
      asked.push(e.event.command);
      void f.services.runs.approve({ runId: e.runId, requestId: e.event.id, approved: e.event.command.includes('approved') });
    };
    // Subscribe before starting: the first request may come quickly.
    const sub = f.core.runs.onDidEvent((e) => {
      if (!runId) early.push(e);
      else if (e.runId === runId) answer(e);
    });
    try {
      const started = await f.start({
        projectDir,
        approval: 'ask',
        script: [
          { toolCalls: [{ name: 'run_command', input: { command: 'touch denied.txt' } }] },
          { toolCalls: [{ name: 'run_command', input: { command: 'echo approved-marker > approved.txt' } }] },
          { toolCalls: [{ name: 'finish', input: { summary: 'asked twice' } }] },
        ],
      });
      runId = started.id;
      for (const e of early.splice(0)) if (e.runId === runId) answer(e);
      const run = await f.core.runs.wait(runId);
      expect(run.status, JSON.stringify(run.error)).toBe('done');
      expect(asked).toEqual(['touch denied.txt', 'echo approved-marker > approved.txt']);
      expect(run.changedFiles.map((c) => c.path)).toEqual(['approved.txt']);

      const events: RunEvent['event'][] = [];
      for await (const e of f.core.store.readEvents<RunEvent>(runId)) events.push(e.event);
      expect(events.filter((e) => e.type === 'approval_response').map((e) => (e as { approved: boolean }).approved)).toEqual([false, true]);
      expect(events.filter((e) => e.type === 'command_started').map((e) => (e as { command: string }).command)).toEqual(['echo approved-marker > approved.txt']);
      expect(events.find((e) => e.type === 'tool_result')).toMatchObject({ ok: false, output: expect.stringContaining('denied') });

      const { records } = await f.services.audit.read({ runId, offset: 0, limit: 1000 });
      expect(records.filter((r) => r.type === 'approval').map((r) => (r.data as { approved: boolean }).approved)).toEqual([false, true]);
      expect(records.filter((r) => r.type === 'command').map((r) => (r.data as { command: string }).command)).toEqual(['echo approved-marker > approved.txt']);
      expect((await f.services.audit.verify({ runId })).intact).toBe(true);
      expect(await leftoversOf(runId)).toEqual([]);
    } finally {
      sub.dispose();
    }
  });
});
