import { AsyncEntry } from '@napi-rs/keyring';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { jwtPayload } from '../../core/keys/subscription-credentials';
import { CODEX_OAUTH_CLIENT_ID } from '../../core/keys/chatgpt-session';
import { requirePrerequisite } from '../support/prerequisites';
import { canary, jwt, startSubscriptionRig, type SubscriptionRig } from '../support/subscription-rig';

/**
 * Subscription credentials through the real proxy, the real keychain and the fake upstream (which
 * also plays the ChatGPT backend and the OpenAI auth server): the exact upstream header shapes, the
 * per-token agent rule, the ChatGPT refresh (before expiry and after a 401, exactly once) with the
 * new tokens stored in the keychain, and the sandbox's own refresh answered with placeholders.
 */

const keychain = await requirePrerequisite('keychain');


describe.skipIf(!keychain.ok)('subscription credentials through the model proxy', () => {
  let service: string;
  let vault: SubscriptionRig['vault'];
  let proxy: SubscriptionRig['proxy'];
  let up: SubscriptionRig['up'];
  let base: string;
  let secrets: string[];
  let rig: SubscriptionRig | undefined;
  let runN = 0;

  beforeAll(async () => {
    rig = await startSubscriptionRig('subs');
    ({ service, vault, proxy, up, base, secrets } = rig);
  });
  afterAll(() => rig?.close());
  beforeEach(() => rig!.reset());

  function run(agent: string, provider: string) {
    return proxy.issueToken({ runId: `r-subs-${++runN}`, providers: [provider], agent });
  }

  async function post(pathAndQuery: string, headers: Record<string, string>, body: unknown) {
    const res = await fetch(`${base}${pathAndQuery}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const text = await res.text();
    for (const s of secrets) expect(text).not.toContain(s);
    return { status: res.status, text };
  }

  async function importSignin(expiresInSec: number) {
    const access = jwt({ exp: Math.floor(Date.now() / 1000) + expiresInSec, scp: ['openid'] });
    const refresh = canary('rt');
    const id = jwt({ email: 'dev@example.invalid', 'https://api.openai.com/auth': { chatgpt_plan_type: 'pro', chatgpt_account_id: 'acct-real-42', chatgpt_user_id: 'user-7' } });
    secrets.push(access, refresh, id);
    const authJson = JSON.stringify({ OPENAI_API_KEY: null, tokens: { id_token: id, access_token: access, refresh_token: refresh, account_id: 'acct-real-42' }, last_refresh: new Date().toISOString() });
    const info = await vault.importChatgptSignin(authJson);
    expect(JSON.stringify(info)).not.toContain(refresh);
    expect(info).toMatchObject({ provider: 'chatgpt-signin', hasKey: true, last4: null, credential: 'chatgpt-signin', storage: 'keychain' });
    return { access, refresh, id };
  }

  function nextTokens() {
    const next = { access_token: jwt({ exp: Math.floor(Date.now() / 1000) + 864_000 }), refresh_token: canary('rt2'), id_token: jwt({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'pro', chatgpt_account_id: 'acct-real-42' } }) };
    secrets.push(next.access_token, next.refresh_token, next.id_token);
    return next;
  }

  const responsesBody = { model: 'gpt-5', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], stream: false };

  it('Claude subscription: Bearer <setup token> with the OAuth beta upstream, no x-api-key; stored in the keychain only', async () => {
    const token = `sk-ant-oat01-${canary('claude')}`;
    secrets.push(token);
    const info = await vault.setClaudeSubscription(token);
    expect(info).toMatchObject({ provider: 'claude-subscription', hasKey: true, credential: 'claude-subscription', storage: 'keychain' });
    expect(await new AsyncEntry(service, 'claude-subscription').getPassword()).toBe(token);
    up.setExpectedKey(token);
    const grant = run('claude-code', 'claude-subscription');
    expect(await proxy.sandboxCredential(`r-subs-${runN}`, grant.token)).toEqual({ kind: 'claude-subscription' });

    const doors: string[] = [];
    const sub = proxy.onDidSideDoor((e) => doors.push(...e.stripped, ...(e.refused ? [e.refused] : [])));
    // As Claude Code sends it with CLAUDE_CODE_OAUTH_TOKEN=<run token>.
    const ok = await post('/v1/messages?beta=true', { authorization: `Bearer ${grant.token}`, 'anthropic-version': '2023-06-01', 'anthropic-beta': 'claude-code-20250219,oauth-2025-04-20,interleaved-thinking-2025-05-14' }, { model: 'claude-sonnet-4-5', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    expect(ok.status, ok.text).toBe(200);
    const seen = up.requests.filter((r) => r.path === '/v1/messages');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.url).toBe('/v1/messages?beta=true');
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${token}`);
    expect(seen[0]!.headers['x-api-key']).toBeUndefined();
    expect(String(seen[0]!.headers['anthropic-beta']).split(',')).toContain('oauth-2025-04-20');

    // A client that leaves the beta out still gets it added (the API refuses an OAuth token without it).
    up.requests.length = 0;
    const bare = await post('/v1/messages', { authorization: `Bearer ${grant.token}`, 'anthropic-version': '2023-06-01' }, { model: 'claude-sonnet-4-5', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] });
    expect(bare.status, bare.text).toBe(200);
    expect(up.requests[0]!.headers['anthropic-beta']).toBe('oauth-2025-04-20');
    // The OAuth beta is the proxy's own header for this credential, not a side door it reports.
    expect(doors.filter((d) => d.includes('oauth'))).toEqual([]);
    sub.dispose();
    grant.dispose();
  });

  it('a token minted for another agent cannot use a subscription credential (the proxy refuses before any upstream call)', async () => {
    for (const [agent, provider] of [['builtin', 'claude-subscription'], ['custom', 'claude-subscription'], ['claude-code', 'chatgpt-signin'], ['builtin', 'chatgpt-signin']] as const) {
      const grant = run(agent, provider);
      expect(await proxy.sandboxCredential(`r-subs-${runN}`, grant.token)).toBeUndefined();
      const isClaude = provider === 'claude-subscription';
      const res = isClaude
        ? await post('/v1/messages', { 'x-api-key': grant.token, 'anthropic-version': '2023-06-01' }, { model: 'claude-sonnet-4-5', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })
        : await post('/v1/responses', { authorization: `Bearer ${grant.token}` }, responsesBody);
      expect(res.status).toBe(403);
      expect(res.text).toContain(isClaude ? 'serves only Claude Code' : 'serves only Codex CLI');
      grant.dispose();
    }
    expect(up.requests.filter((r) => r.method === 'POST')).toEqual([]);
  });

  it('ChatGPT sign-in: Bearer <access token> + chatgpt-account-id to /backend-api/codex/responses; the sandbox gets placeholders only', async () => {
    const real = await importSignin(3600);
    up.setExpectedKey(real.access);
    const grant = run('codex', 'chatgpt-signin');
    const cred = await proxy.sandboxCredential(`r-subs-${runN}`, grant.token);
    expect(cred?.kind).toBe('chatgpt-signin');
    if (cred?.kind !== 'chatgpt-signin') return;
    expect(cred.accountId).toBe('acct-real-42');
    expect(cred.refreshToken).toMatch(/^airlock-refresh-/);
    // The id token the client sees is unsigned and carries the account's non-secret claims only.
    expect(jwtPayload(cred.idToken)).toEqual({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'pro', chatgpt_account_id: 'acct-real-42', chatgpt_user_id: 'user-7' } });
    for (const s of secrets) expect(JSON.stringify(cred)).not.toContain(s);

    // As Codex sends it with the placeholder auth.json.
    const res = await post('/v1/responses', { authorization: `Bearer ${grant.token}`, 'chatgpt-account-id': 'whatever-the-sandbox-says', originator: 'codex_exec' }, responsesBody);
    expect(res.status, res.text).toBe(200);
    const seen = up.requests.filter((r) => r.method === 'POST');
    expect(seen.map((r) => r.url)).toEqual(['/backend-api/codex/responses']);
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${real.access}`);
    expect(seen[0]!.headers['chatgpt-account-id']).toBe('acct-real-42');
    expect(seen[0]!.headers.originator).toBe('codex_exec');

    // The client's own refresh is answered here with the same placeholders; the auth server is not asked.
    const refresh = await fetch(`${base}/oauth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ client_id: CODEX_OAUTH_CLIENT_ID, grant_type: 'refresh_token', refresh_token: cred.refreshToken }) });
    expect(refresh.status).toBe(200);
    expect(await refresh.json()).toMatchObject({ access_token: grant.token, refresh_token: cred.refreshToken, id_token: cred.idToken });
    const wrong = await fetch(`${base}/oauth/token`, { method: 'POST', body: JSON.stringify({ grant_type: 'refresh_token', refresh_token: real.refresh }) });
    expect(wrong.status).toBe(401);
    expect(await wrong.text()).not.toContain(real.refresh);
    proxy.revokeRun(`r-subs-${runN}`);
    const revoked = await fetch(`${base}/oauth/token`, { method: 'POST', body: JSON.stringify({ grant_type: 'refresh_token', refresh_token: cred.refreshToken }) });
    expect(revoked.status).toBe(401);
    expect(up.requests.filter((r) => r.path === '/oauth/token')).toEqual([]);
  });

  it('ChatGPT sign-in: an upstream 401 refreshes once against the auth server, retries once, and stores the new tokens in the keychain', async () => {
    const real = await importSignin(3600);
    const next = nextTokens();
    up.setAuth({ clientId: CODEX_OAUTH_CLIENT_ID, refreshToken: real.refresh, next });
    // The backend no longer takes the old access token (revoked server-side before its expiry).
    up.setExpectedKey(next.access_token);
    const grant = run('codex', 'chatgpt-signin');
    const recorded: number[] = [];
    const sub = proxy.onDidCall((e) => recorded.push(e.status));
    const res = await post('/v1/responses', { authorization: `Bearer ${grant.token}` }, responsesBody);
    expect(res.status, res.text).toBe(200);
    // One call as far as metering goes: the refused attempt is not a second one.
    expect(recorded).toEqual([200]);
    expect(proxy.usage(`r-subs-${runN}`).requests).toBe(1);
    sub.dispose();
    const refreshes = up.requests.filter((r) => r.path === '/oauth/token');
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]!.body).toMatchObject({ client_id: CODEX_OAUTH_CLIENT_ID, grant_type: 'refresh_token', refresh_token: real.refresh });
    const calls = up.requests.filter((r) => r.url === '/backend-api/codex/responses');
    expect(calls.map((r) => r.headers.authorization)).toEqual([`Bearer ${real.access}`, `Bearer ${next.access_token}`]);
    const stored = JSON.parse((await new AsyncEntry(service, 'chatgpt-signin').getPassword()) ?? '{}') as Record<string, unknown>;
    expect(stored).toMatchObject({ accessToken: next.access_token, refreshToken: next.refresh_token, idToken: next.id_token, accountId: 'acct-real-42' });
    grant.dispose();
  });

  // Issue 22, item 6: an upstream that refuses every token (the account, not the token) used to
  // make every call refresh the sign-in again.
  it('ChatGPT sign-in: an upstream that keeps refusing gets one refresh per token, then a clear error — no refresh storm', async () => {
    const real = await importSignin(3600);
    const next = nextTokens();
    up.setAuth({ clientId: CODEX_OAUTH_CLIENT_ID, refreshToken: real.refresh, next });
    up.setScript(Array.from({ length: 30 }, () => ({ status: 401 })));
    const grant = run('codex', 'chatgpt-signin');
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await post('/v1/responses', { authorization: `Bearer ${grant.token}` }, responsesBody));
    results.push(...(await Promise.all([1, 2, 3].map(() => post('/v1/responses', { authorization: `Bearer ${grant.token}` }, responsesBody)))));
    expect(results.map((r) => r.status)).toEqual(Array(7).fill(401));
    expect(up.requests.filter((r) => r.path === '/oauth/token')).toHaveLength(1);
    // The first call tried the old token and the refreshed one; every later call the refreshed one, once.
    const calls = up.requests.filter((r) => r.url === '/backend-api/codex/responses').map((r) => r.headers.authorization);
    expect(calls).toEqual([`Bearer ${real.access}`, ...Array(7).fill(`Bearer ${next.access_token}`)]);
    for (const r of results.slice(1)) expect(r.text).toMatch(/refused the sign-in again right after it was refreshed|refused the sign-in twice/);
    expect(results[0]!.text).toMatch(/refused the sign-in again right after it was refreshed/);
    grant.dispose();
  });

  it('ChatGPT sign-in: a token about to expire is refreshed exactly once before use, however many calls arrive at once', async () => {
    const real = await importSignin(60);
    const next = nextTokens();
    up.setAuth({ clientId: CODEX_OAUTH_CLIENT_ID, refreshToken: real.refresh, next });
    up.setExpectedKey(next.access_token);
    const grant = run('codex', 'chatgpt-signin');
    const results = await Promise.all([1, 2, 3].map(() => post('/v1/responses', { authorization: `Bearer ${grant.token}` }, responsesBody)));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(up.requests.filter((r) => r.path === '/oauth/token')).toHaveLength(1);
    const calls = up.requests.filter((r) => r.url === '/backend-api/codex/responses');
    expect(calls.map((r) => r.headers.authorization)).toEqual(Array(3).fill(`Bearer ${next.access_token}`));
    expect((await vault.chatgptSignin())?.signin.reveal().accessToken).toBe(next.access_token);
    grant.dispose();
  });

  it('ChatGPT sign-in: a refused refresh is a clear 401 to the client, with no token in it', async () => {
    await importSignin(60);
    up.setAuth(undefined);
    const grant = run('codex', 'chatgpt-signin');
    const recorded: number[] = [];
    const sub = proxy.onDidCall((e) => recorded.push(e.status));
    const res = await post('/v1/responses', { authorization: `Bearer ${grant.token}` }, responsesBody);
    expect(res.status).toBe(401);
    expect(recorded).toEqual([401]);
    sub.dispose();
    expect(res.text).toContain('airlock keys import-codex');
    expect(up.requests.filter((r) => r.url === '/backend-api/codex/responses')).toEqual([]);
    grant.dispose();
  });
});
