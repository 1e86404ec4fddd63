import { describe, expect, it } from 'vitest';
import { presentedToken, RunTokenRegistry } from './run-tokens';

describe('run tokens', () => {
  it('are 256-bit random, scoped to their run, and stop working when revoked', () => {
    const reg = new RunTokenRegistry();
    const a = reg.issue({ runId: 'r1', providers: ['anthropic'] });
    const b = reg.issue({ runId: 'r1', providers: ['anthropic'] });
    const c = reg.issue({ runId: 'r2', providers: ['openai'] });
    const raw = a.token.replace(/^airlock-run-/, '');
    expect(Buffer.from(raw, 'base64url')).toHaveLength(32);
    expect(new Set([a.token, b.token, c.token]).size).toBe(3);
    expect(reg.check(a.token)?.runId).toBe('r1');
    expect(reg.check(c.token)?.providers).toEqual(['openai']);
    expect(reg.check(`${a.token}x`)).toBeUndefined();
    expect(reg.check(a.token.slice(0, -1))).toBeUndefined();
    expect(reg.check(undefined)).toBeUndefined();
    expect(reg.check('x'.repeat(10_000))).toBeUndefined();
    a.revoke();
    expect(reg.check(a.token)).toBeUndefined();
    expect(reg.check(b.token)?.runId).toBe('r1');
    expect(reg.revokeRun('r1')).toBe(1);
    expect(reg.check(b.token)).toBeUndefined();
    expect(reg.check(c.token)?.runId).toBe('r2');
  });

  it('are read from x-api-key or Authorization: Bearer', () => {
    expect(presentedToken({ 'x-api-key': 't1' })).toBe('t1');
    expect(presentedToken({ authorization: 'Bearer t2' })).toBe('t2');
    expect(presentedToken({ authorization: 'bearer  t3 ' })).toBe('t3');
    expect(presentedToken({ authorization: 'Basic dDo=' })).toBeUndefined();
    expect(presentedToken({})).toBeUndefined();
  });
});
