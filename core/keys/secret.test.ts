import { inspect } from 'node:util';
import { describe, expect, it } from 'vitest';
import { Secret } from './secret';

describe('Secret', () => {
  const key = 'sk-ant-secret-value-1234567890abcd';
  it('prints [REDACTED] every way it can be printed', () => {
    const s = new Secret(key);
    expect(String(s)).toBe('[REDACTED]');
    expect(`${s}`).toBe('[REDACTED]');
    expect(JSON.stringify({ s })).toBe('{"s":"[REDACTED]"}');
    expect(inspect(s)).toBe('[REDACTED]');
    expect(inspect({ nested: { s } }, { depth: 5 })).not.toContain(key);
    expect(inspect(s, { showHidden: true })).not.toContain(key);
    expect(Object.keys(s)).toEqual([]);
    expect(JSON.stringify(Object.entries(s))).not.toContain(key);
  });
  it('reveals only on request, and hints with the last four characters', () => {
    const s = new Secret(key);
    expect(s.reveal()).toBe(key);
    expect(s.last4()).toBe('abcd');
    expect(new Secret('short').last4()).toBe('');
  });
});
