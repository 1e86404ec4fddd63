import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { assertCredentialServes, credentialServes, deserializeSignin, jwtExpiry, jwtPayload, parseClaudeSetupToken, parseCodexAuthJson, serializeSignin, signinClaims, unsignedIdToken } from './subscription-credentials';

const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
const jwt = (payload: Record<string, unknown>) => `${part({ alg: 'RS256' })}.${part(payload)}.sig`;

function thrown(fn: () => unknown): AirlockError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AirlockError) return err;
    throw err;
  }
  throw new Error('did not throw');
}

describe('subscription credentials', () => {
  it('serve only their vendor\'s client; API keys serve every agent', () => {
    expect(credentialServes('claude-subscription', 'claude-code')).toBe(true);
    expect(credentialServes('claude-subscription', 'builtin')).toBe(false);
    expect(credentialServes('claude-subscription', 'codex')).toBe(false);
    expect(credentialServes('chatgpt-signin', 'codex')).toBe(true);
    expect(credentialServes('chatgpt-signin', 'custom')).toBe(false);
    expect(credentialServes(undefined, 'builtin')).toBe(true);
    const err = thrown(() => assertCredentialServes({ id: 'claude-subscription', credential: 'claude-subscription' }, 'builtin'));
    expect(err.toInfo()).toMatchObject({ kind: 'FORBIDDEN', field: 'provider' });
    expect(err.message).toMatch(/serves only Claude Code.*--agent claude-code/);
  });

  it('checks a setup token without echoing it, and sends an API key to `keys set anthropic`', () => {
    expect(parseClaudeSetupToken('  sk-ant-oat01-abcdefghijklmnopqrstuvwxyz \n')).toBe('sk-ant-oat01-abcdefghijklmnopqrstuvwxyz');
    expect(thrown(() => parseClaudeSetupToken('sk-ant-api03-abcdefghijklmnopqrstuvwxyz')).message).toContain('keys set anthropic');
    const bad = thrown(() => parseClaudeSetupToken('short secretvalue'));
    expect(bad.message).not.toContain('secretvalue');
  });

  it('reads Codex\'s auth.json: tokens, account id (or the id token\'s), expiry from the access token', () => {
    const access = jwt({ exp: 2_000_000_000 });
    const id = jwt({ email: 'a@b.invalid', 'https://api.openai.com/auth': { chatgpt_plan_type: 'pro', chatgpt_account_id: 'acct-9', chatgpt_user_id: 'u-1' } });
    const s = parseCodexAuthJson(JSON.stringify({ OPENAI_API_KEY: null, tokens: { id_token: id, access_token: access, refresh_token: 'rt-secret-123' }, last_refresh: '2026-01-01T00:00:00Z' }));
    expect(s).toEqual({ accessToken: access, refreshToken: 'rt-secret-123', idToken: id, accountId: 'acct-9', expiresAt: new Date(2_000_000_000_000).toISOString(), lastRefresh: '2026-01-01T00:00:00Z' });
    expect(deserializeSignin(serializeSignin(s))).toEqual(s);
    expect(jwtExpiry('not-a-jwt')).toBeUndefined();
  });

  it('refuses what is not a ChatGPT sign-in, naming the part and never a value', () => {
    expect(thrown(() => parseCodexAuthJson('{not json')).message).toContain('not valid JSON');
    expect(thrown(() => parseCodexAuthJson(JSON.stringify({ OPENAI_API_KEY: 'sk-proj-xyz' }))).message).toContain('keys set openai');
    const missing = thrown(() => parseCodexAuthJson(JSON.stringify({ tokens: { id_token: jwt({}), access_token: 'at-secret-1', account_id: 'a' } })));
    expect(missing.message).toContain('tokens.refresh_token');
    expect(missing.message).not.toContain('at-secret-1');
    expect(() => deserializeSignin('garbage')).toThrow(/import it again/);
  });

  it('refuses a damaged stored sign-in naming the field of the keychain entry, never a value', () => {
    const good = { v: 1, accessToken: 'at-secret-7', refreshToken: 'rt-secret-7', idToken: 'id-secret-7', accountId: 'acct-7' };
    expect(deserializeSignin(JSON.stringify(good))).toEqual({ accessToken: 'at-secret-7', refreshToken: 'rt-secret-7', idToken: 'id-secret-7', accountId: 'acct-7' });
    const { refreshToken: _r, ...noRefresh } = good;
    const e = thrown(() => deserializeSignin(JSON.stringify(noRefresh)));
    expect(e).toMatchObject({ kind: 'KEY_MISSING', message: expect.stringContaining('field refreshToken of its keychain entry') });
    expect(e.message).not.toMatch(/secret-7/);
    expect(thrown(() => deserializeSignin(JSON.stringify({ ...good, v: 2 }))).message).toContain('field v ');
    expect(thrown(() => deserializeSignin(JSON.stringify({ ...good, accountId: 7 }))).message).toContain('field accountId ');
  });

  it('gives the sandbox an unsigned id token with only plan, account and user', () => {
    const id = jwt({ email: 'a@b.invalid', sub: 'secret-sub', 'https://api.openai.com/auth': { chatgpt_plan_type: 'team', chatgpt_account_id: 'acct-2', user_id: 'u-2', extra: 'x' } });
    const claims = signinClaims(id);
    expect(claims).toEqual({ planType: 'team', accountId: 'acct-2', userId: 'u-2' });
    const unsigned = unsignedIdToken(claims);
    expect(unsigned.split('.')).toHaveLength(3);
    expect(jwtPayload(unsigned)).toEqual({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'team', chatgpt_account_id: 'acct-2', chatgpt_user_id: 'u-2' } });
    expect(JSON.parse(Buffer.from(unsigned.split('.')[0]!, 'base64url').toString())).toMatchObject({ alg: 'none' });
  });
});
