import { describe, expect, it } from 'vitest';
import { checkKeyFormat } from './key-format';

const anthropic = { id: 'anthropic', kind: 'anthropic', label: 'Anthropic' };
const openai = { id: 'openai', kind: 'openai', label: 'OpenAI' };
const compatible = { id: 'local', kind: 'openai-compatible', label: 'Local' };

describe('checkKeyFormat', () => {
  it('refuses an OpenAI project key offered as an Anthropic key, naming the fix and not the key', () => {
    const key = 'sk-proj-0123456789abcdefSECRET';
    let err: unknown;
    try {
      checkKeyFormat(anthropic, key);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ kind: 'INVALID_INPUT', field: 'key', message: expect.stringContaining('looks like an OpenAI key') });
    expect((err as Error).message).toContain('sk-ant-');
    expect((err as Error).message).not.toContain('SECRET');
    expect(() => checkKeyFormat(anthropic, 'sk-svcacct-0123456789')).toThrow(/OpenAI key/);
  });

  it('refuses an Anthropic key offered to OpenAI', () => {
    expect(() => checkKeyFormat(openai, 'sk-ant-api03-0123456789')).toThrow(/looks like an Anthropic key/);
  });

  it('accepts the right formats and anything not clearly another provider’s', () => {
    expect(() => checkKeyFormat(anthropic, 'sk-ant-api03-0123456789')).not.toThrow();
    expect(() => checkKeyFormat(anthropic, 'sk-canary-0123456789')).not.toThrow(); // gateways, test keys
    expect(() => checkKeyFormat(openai, 'sk-proj-0123456789')).not.toThrow();
    expect(() => checkKeyFormat(compatible, 'sk-ant-api03-0123456789')).not.toThrow(); // a gateway may take it
  });
});
