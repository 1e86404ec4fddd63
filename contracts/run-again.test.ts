import { describe, expect, it } from 'vitest';
import { runAgainInput } from './run-again';
import { RunRecord, StartRunInput } from './runs';

describe('runAgainInput', () => {
  it('repeats every setting a run was started with, and is a valid start input', () => {
    const record = RunRecord.parse({
      id: 'r-mx3wzxgq-1ee108ba', task: 'fix it', projectDir: '/p', agent: 'custom', customCommand: 'aider --yes', provider: 'openai', model: 'gpt-5',
      status: 'failed', createdAt: 'x', startedAt: null, endedAt: null, usage: { inputTokens: 1, outputTokens: 1, requests: 1 }, changedFiles: 0,
      isolation: 'vm', network: 'allowlist', allowlist: ['preset:npm'], approval: 'ask', limits: { timeoutSec: 600, budgetTokens: 5000, budgetUsd: 1.5 }, excludedFiles: [],
    });
    const input = runAgainInput(record);
    expect(input).toEqual({
      projectDir: '/p', task: 'fix it', agent: 'custom', customCommand: 'aider --yes', provider: 'openai', model: 'gpt-5', approval: 'ask', isolation: 'vm',
      network: 'allowlist', allowlist: ['preset:npm'], limits: { timeoutSec: 600, budgetTokens: 5000, budgetUsd: 1.5 },
    });
    expect(StartRunInput.safeParse(input).success).toBe(true);
  });
});
