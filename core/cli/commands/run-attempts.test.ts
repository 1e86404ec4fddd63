import { describe, expect, it } from 'vitest';
import type { Settings } from '../../../contracts/settings';
import { parseAttempts } from './run-attempts';

const catalog = {
  async get(id: string) {
    return { id, models: id === 'openai' ? ['gpt-5'] : id === 'anthropic' ? ['claude-sonnet-4-5'] : [] };
  },
} as unknown as Parameters<typeof parseAttempts>[2]['catalog'];
const settings = {} as Settings;
const base = { provider: 'anthropic', model: 'claude-opus-4-5' };

describe('--attempts', () => {
  it('reads agent, agent:model and agent:provider/model, with each agent’s own provider by default', async () => {
    expect(await parseAttempts('claude-code, codex,builtin:claude-haiku-4-5,builtin:ollama/qwen3', base, { catalog }, settings)).toEqual([
      { agent: 'claude-code', provider: 'anthropic', model: 'claude-opus-4-5' },
      { agent: 'codex', provider: 'openai', model: 'gpt-5' },
      { agent: 'builtin', provider: 'anthropic', model: 'claude-haiku-4-5' },
      { agent: 'builtin', provider: 'ollama', model: 'qwen3' },
    ]);
  });

  it('refuses what is not an agent, the custom agent, an empty list and too many, saying what to write', async () => {
    await expect(parseAttempts('claude', base, { catalog }, settings)).rejects.toThrow(/'claude' is not an agent; use builtin, claude-code or codex/);
    await expect(parseAttempts('custom', base, { catalog }, settings)).rejects.toThrow(/is not an agent/);
    await expect(parseAttempts(' , ', base, { catalog }, settings)).rejects.toThrow(/comma-separated list/);
    await expect(parseAttempts(Array(9).fill('builtin').join(','), base, { catalog }, settings)).rejects.toThrow(/at most 8/);
    await expect(parseAttempts('builtin:empty/', base, { catalog }, settings)).rejects.toThrow(/provider empty lists no models/);
  });
});
