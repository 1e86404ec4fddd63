import { describe, expect, it } from 'vitest';
import { checkKeyFormat } from './key-format';

const anthropic = { id: 'anthropic', kind: 'anthropic', label: 'Anthropic' };
const openai = { id: 'openai', kind: 'openai', label: 'OpenAI' };
const compatible = { id: 'local', kind: 'openai-compatible', label: 'Local' };
const A = 'https://api.anthropic.com';
const O = 'https://api.openai.com/v1';

describe('checkKeyFormat', () => {
  it('refuses an OpenAI project key offered as an Anthropic key, naming the fix and not the key', () => {
    const key = 'sk-proj-0123456789abcdefSECRET';
    let err: unknown;
    try {
      checkKeyFormat(anthropic, A, key);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ kind: 'INVALID_INPUT', field: 'key', message: expect.stringContaining('looks like an OpenAI key') });
    expect((err as Error).message).toContain('sk-ant-');
    expect((err as Error).message).not.toContain('SECRET');
    expect(() => checkKeyFormat(anthropic, A, 'sk-svcacct-0123456789')).toThrow(/OpenAI key/);
  });

  it('refuses an Anthropic key offered to OpenAI', () => {
    expect(() => checkKeyFormat(openai, O, 'sk-ant-api03-0123456789')).toThrow(/looks like an Anthropic key/);
  });

  it('accepts the right formats and anything not clearly another provider’s', () => {
    expect(() => checkKeyFormat(anthropic, A, 'sk-ant-api03-0123456789')).not.toThrow();
    expect(() => checkKeyFormat(anthropic, A, 'sk-canary-0123456789')).not.toThrow(); // gateways, test keys
    expect(() => checkKeyFormat(openai, O, 'sk-proj-0123456789')).not.toThrow();
    expect(() => checkKeyFormat(compatible, 'http://127.0.0.1:11434/v1', 'sk-ant-api03-0123456789')).not.toThrow(); // a gateway may take it
  });

  it('leaves a built-in provider pointed at another base URL (a gateway, a test upstream) alone', () => {
    expect(() => checkKeyFormat(openai, 'http://127.0.0.1:8080/v1', 'sk-ant-api03-0123456789')).not.toThrow();
    expect(() => checkKeyFormat(anthropic, 'https://gateway.example.invalid', 'sk-proj-0123456789')).not.toThrow();
  });
});
