import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');

/**
 * Checkpoints with the unchanged third-party CLIs (docs/architecture.md §19): the turn boundary is
 * the model proxy seeing the CLI's next request, so Claude Code and Codex get one checkpoint per
 * file-changing turn like the built-in agent, each applying alone. Their conversation is not kept
 * per checkpoint (Continue from here starts them fresh on the checkpoint's files).
 */
describe.skipIf(!docker.ok)('checkpoints with Claude Code and Codex (real Docker, proxy, fake upstream)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
    await f.core.image('agents');
  });
  afterAll(async () => {
    await f?.close();
  });

  const cases = [
    { agent: 'claude-code' as const, provider: 'anthropic' as const, model: 'claude-sonnet-4-5', call: (cmd: string) => ({ name: 'Bash', input: { command: cmd, description: 'write' } }) },
    { agent: 'codex' as const, provider: 'openai' as const, model: 'gpt-5', call: (cmd: string) => ({ name: 'exec_command', input: { cmd } }) },
  ];
  for (const c of cases) {
    it(`${c.agent}: two file-changing turns give two checkpoints; the first holds only turn 1's file`, async () => {
      const projectDir = await f.project();
      const run = await f.core.runs.wait(
        (
          await f.start({
            projectDir,
            agent: c.agent,
            provider: c.provider,
            model: c.model,
            task: 'Two files, one at a time.',
            script: [{ toolCalls: [c.call('echo first > one.txt')] }, { toolCalls: [c.call('echo second > two.txt')] }, { text: 'All done here.' }],
          })
        ).id,
      );
      expect(run.status, JSON.stringify(run.error ?? null)).toBe('done');
      const { checkpoints } = await f.services.diffs.checkpoints({ runId: run.id });
      expect(checkpoints.map((x) => x.files)).toEqual([1, 2]);
      expect(checkpoints.at(-1)?.final).toBe(true);
      expect(checkpoints.some((x) => x.conversation)).toBe(false);
      const first = await f.services.diffs.list({ runId: run.id, checkpoint: 1 });
      expect(first.files.map((x) => `${x.status} ${x.path}`)).toEqual(['added one.txt']);
    });
  }
});
