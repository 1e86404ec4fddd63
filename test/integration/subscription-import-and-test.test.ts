import { AsyncEntry } from '@napi-rs/keyring';
import { createHash } from 'node:crypto';
import { mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { keysCommand } from '../../core/cli/commands/keys';
import { readCodexSignin } from '../../core/keys/codex-auth-file';
import { CODEX_OAUTH_CLIENT_ID } from '../../core/keys/chatgpt-session';
import { captureIo } from '../support/cli-io';
import { requirePrerequisite } from '../support/prerequisites';
import { canary, jwt, startSubscriptionRig, type SubscriptionRig } from '../support/subscription-rig';

/**
 * Subscription sign-ins, part two (docs/architecture.md §6), with the real keychain (Secret Service),
 * the real proxy and the fake upstream:
 * - `import-codex` finds a sign-in Codex CLI kept in the OS keyring (written here exactly as Codex
 *   writes it), and the imported credential then works through the proxy like a file import does;
 *   with neither a file nor an entry, the message names both places.
 * - "Test" for both subscription credentials: the exact credential and header shapes that reach the
 *   provider, a refused credential reported as refused, an unreachable one as unreachable, and a
 *   ChatGPT sign-in near expiry refreshed first with the new tokens stored.
 */

const keychain = await requirePrerequisite('keychain');


/**
 * The keyring account Codex uses for a CODEX_HOME, derived here on its own from Codex's source
 * (openai/codex codex-rs/core/src/auth/storage.rs, `compute_store_key`, commit
 * f793618e7b4d32961d4891b75550dcaced1f033b): `cli|` + the first 16 hex digits of SHA-256 of the
 * canonical path. Service: `Codex Auth` (`KEYRING_SERVICE`, same file).
 */
async function codexAccount(codexHome: string): Promise<string> {
  return `cli|${createHash('sha256').update(await realpath(codexHome)).digest('hex').slice(0, 16)}`;
}
const CODEX_SERVICE = 'Codex Auth';

describe.skipIf(!keychain.ok)('subscription sign-ins: import from Codex\'s keyring, and Test', () => {
  let service: string;
  let home: string;
  let catalog: SubscriptionRig['catalog'];
  let vault: SubscriptionRig['vault'];
  let proxy: SubscriptionRig['proxy'];
  let up: SubscriptionRig['up'];
  let base: string;
  let secrets: string[];
  let rig: SubscriptionRig | undefined;
  /** Codex keyring entries written by this test, removed afterwards. */
  const written: string[] = [];
  const codexHomes: string[] = [];
  let runN = 0;

  beforeAll(async () => {
    rig = await startSubscriptionRig('subs2');
    ({ service, home, catalog, vault, proxy, up, base, secrets } = rig);
  });
  afterAll(async () => {
    for (const account of written) await new AsyncEntry(CODEX_SERVICE, account).deleteCredential().catch(() => undefined);
    await rig?.close();
    for (const h of codexHomes) await rm(h, { recursive: true, force: true });
  });
  beforeEach(() => rig!.reset());

  async function newCodexHome(): Promise<string> {
    const h = await mkdtemp(path.join(os.tmpdir(), 'airlock-codex-home-'));
    codexHomes.push(h);
    return h;
  }

  function signinTokens(expiresInSec: number, account: string) {
    const access = jwt({ exp: Math.floor(Date.now() / 1000) + expiresInSec });
    const refresh = canary('rt');
    const id = jwt({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'plus', chatgpt_account_id: account } });
    secrets.push(access, refresh, id);
    return { access, refresh, id };
  }

  /** Codex's auth.json document as its serde writes it (compact in the keyring). */
  function authDotJson(t: { access: string; refresh: string; id: string }, account: string): string {
    return JSON.stringify({ auth_mode: 'chatgpt', OPENAI_API_KEY: null, tokens: { id_token: t.id, access_token: t.access, refresh_token: t.refresh, account_id: account }, last_refresh: new Date().toISOString() });
  }

  /** Whether the stored sign-in serves a Codex call through the proxy: Bearer <access> + account id upstream. */
  async function servesCodexCall(access: string, account: string): Promise<void> {
    up.setExpectedKey(access);
    const grant = proxy.issueToken({ runId: `r-subs2-${++runN}`, providers: ['chatgpt-signin'], agent: 'codex' });
    const res = await fetch(`${base}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${grant.token}` }, body: JSON.stringify({ model: 'gpt-5', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], stream: false }) });
    const text = await res.text();
    expect(res.status, text).toBe(200);
    for (const s of secrets) expect(text).not.toContain(s);
    const seen = up.requests.filter((r) => r.url === '/backend-api/codex/responses');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${access}`);
    expect(seen[0]!.headers['chatgpt-account-id']).toBe(account);
    grant.dispose();
  }

  it('import-codex (CLI) reads a sign-in Codex kept in the OS keyring (one entry, as Codex writes it) when there is no auth.json; it then serves Codex runs', async () => {
    const codexHome = await newCodexHome();
    const t = signinTokens(3600, 'acct-keyring-1');
    const account = await codexAccount(codexHome);
    written.push(account);
    // Exactly as Codex's DefaultKeyringStore::save does: set_password(service, account, serde_json::to_string(auth)).
    const value = authDotJson(t, 'acct-keyring-1');
    await new AsyncEntry(CODEX_SERVICE, account).setPassword(value);

    const cli = captureIo({ ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: service, CODEX_HOME: codexHome });
    expect(await keysCommand.run(['import-codex'], cli.io), cli.err()).toBe(0);
    expect(cli.out()).toContain('from the OS keyring');
    expect(cli.out()).toContain('serves only Codex');
    for (const s of secrets) expect(cli.out() + cli.err()).not.toContain(s);

    // Stored in Airlock's own keychain entry; Codex's entry is left as it was.
    const stored = JSON.parse((await new AsyncEntry(service, 'chatgpt-signin').getPassword()) ?? '{}') as Record<string, unknown>;
    expect(stored).toMatchObject({ accessToken: t.access, refreshToken: t.refresh, idToken: t.id, accountId: 'acct-keyring-1' });
    expect(await new AsyncEntry(CODEX_SERVICE, account).getPassword()).toBe(value);
    await servesCodexCall(t.access, 'acct-keyring-1');
  });

  it('reads the per-field (v2) keyring layout too, and prefers auth.json when both exist (as Codex does in "auto")', async () => {
    const codexHome = await newCodexHome();
    const t = signinTokens(3600, 'acct-keyring-2');
    const baseKey = await codexAccount(codexHome);
    const revision = String(Date.now() * 1_000_000);
    // Layout of storage.rs at commit 0786633811edd2d01dd664d893cd720adbdab215 (save_v2_to_keyring: set_secret per field).
    const entries: Array<[string, string]> = [
      [`${baseKey}|v2|${revision}|tokens.id_token`, t.id],
      [`${baseKey}|v2|${revision}|tokens.access_token`, t.access],
      [`${baseKey}|v2|${revision}|tokens.refresh_token`, t.refresh],
      [`${baseKey}|v2|${revision}|tokens.account_id`, 'acct-keyring-2'],
      [`${baseKey}|v2|${revision}|manifest`, JSON.stringify({ auth_mode: 'chatgpt', has_openai_api_key: false, has_tokens: true, has_account_id: true, last_refresh: new Date().toISOString() })],
      [`${baseKey}|v2|active`, revision],
    ];
    for (const [account, value] of entries) {
      written.push(account);
      await new AsyncEntry(CODEX_SERVICE, account).setSecret(new Uint8Array(Buffer.from(value)));
    }
    const found = await readCodexSignin({ CODEX_HOME: codexHome });
    expect(found.from).toContain('OS keyring');
    await vault.importChatgptSignin(found.text);
    await servesCodexCall(t.access, 'acct-keyring-2');

    // auth.json is looked at first when it exists (Codex's default "file" store reads only it).
    const f = signinTokens(3600, 'acct-file');
    await writeFile(path.join(codexHome, 'auth.json'), authDotJson(f, 'acct-file'));
    const fromFile = await readCodexSignin({ CODEX_HOME: codexHome });
    expect(fromFile.from).toBe(path.join(codexHome, 'auth.json'));
    expect(fromFile.text.reveal()).toContain('acct-file');
  });

  it('reads a single entry that Codex split into chunks (CODEX_CHUNKED header plus <account>:<i> entries)', async () => {
    const codexHome = await newCodexHome();
    const t = signinTokens(3600, 'acct-chunked');
    const account = await codexAccount(codexHome);
    const value = authDotJson(t, 'acct-chunked');
    // keyring-store/src/lib.rs at dfc7c9ecf8688519c289d045b217f6cca29b76ed: chunks of 512 characters.
    const chunks = value.match(/[\s\S]{1,512}/g) ?? [];
    expect(chunks.length).toBeGreaterThan(1);
    const entries: Array<[string, string]> = chunks.map((c, i) => (i === 0 ? [account, `CODEX_CHUNKED:${chunks.length}:${c}`] : [`${account}:${i}`, c]));
    for (const [a, v] of entries) {
      written.push(a);
      await new AsyncEntry(CODEX_SERVICE, a).setPassword(v);
    }
    const found = await readCodexSignin({ CODEX_HOME: codexHome });
    expect(found.text.reveal()).toBe(value);
  });

  it('with neither auth.json nor a keyring entry, the message names both places and how to sign in', async () => {
    const codexHome = await newCodexHome();
    const err = await readCodexSignin({ CODEX_HOME: codexHome }).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ kind: 'NOT_FOUND' });
    const message = (err as Error).message;
    expect(message).toContain(path.join(codexHome, 'auth.json'));
    expect(message).toContain('OS keyring');
    expect(message).toContain('codex login');
    const cli = captureIo({ ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: service, CODEX_HOME: codexHome });
    await expect(keysCommand.run(['import-codex'], cli.io)).rejects.toMatchObject({ kind: 'NOT_FOUND', message: expect.stringContaining('OS keyring') });
  });

  it('Test, Claude subscription: one minimal Messages call with Bearer <token> and the OAuth beta, no x-api-key; valid, then refused', async () => {
    const token = `sk-ant-oat01-${canary('claude')}`;
    secrets.push(token);
    await vault.setClaudeSubscription(token);
    up.setExpectedKey(token);
    const ok = await vault.test('claude-subscription');
    expect(ok).toMatchObject({ provider: 'claude-subscription', status: 'ok' });
    expect(ok.message).toBe('the Claude subscription token works (Anthropic accepted it)');
    const seen = up.requests;
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /v1/messages']);
    expect(seen[0]!.headers.authorization).toBe(`Bearer ${token}`);
    expect(seen[0]!.headers['x-api-key']).toBeUndefined();
    expect(String(seen[0]!.headers['anthropic-beta']).split(',')).toContain('oauth-2025-04-20');
    expect(seen[0]!.headers['anthropic-version']).toBe('2023-06-01');
    expect(seen[0]!.body).toMatchObject({ max_tokens: 1, messages: [{ role: 'user', content: 'ping' }] });

    // The provider no longer takes it (revoked): refused, with how to replace it, and no token in the words.
    up.setExpectedKey('sk-ant-oat01-someone-else');
    const refused = await vault.test('claude-subscription');
    expect(refused.status).toBe('bad-key');
    expect(refused.message).toMatch(/refused \(HTTP 401\).*claude setup-token/);
    expect(refused.message).not.toContain(token);

    // The CLI says the same and names the command that replaces it; exit code is a failure.
    const cli = captureIo({ ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: service });
    // The CLI reads the base URL from the same catalog home.
    expect(await keysCommand.run(['test', 'claude-subscription'], cli.io)).not.toBe(0);
    expect(cli.out()).toContain('claude-subscription: bad-key');
    expect(cli.out()).toContain('airlock keys set-subscription claude');
    expect(cli.out()).not.toContain(token);
  });

  it('Test, ChatGPT sign-in: GET <backend>/models with Bearer <access token> and chatgpt-account-id; refused when the backend and the auth server refuse it', async () => {
    const t = signinTokens(3600, 'acct-test-1');
    await vault.importChatgptSignin(authDotJson(t, 'acct-test-1'));
    up.setExpectedKey(t.access);
    const ok = await vault.test('chatgpt-signin');
    expect(ok, ok.message).toMatchObject({ provider: 'chatgpt-signin', status: 'ok' });
    expect(up.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['GET /v1/models']);
    const seen = up.requests[0]!;
    expect(seen.url).toMatch(/^\/backend-api\/codex\/models\?client_version=/);
    expect(seen.headers.authorization).toBe(`Bearer ${t.access}`);
    expect(seen.headers['chatgpt-account-id']).toBe('acct-test-1');
    expect(up.requests.filter((r) => r.path === '/oauth/token')).toEqual([]);

    // Signed out elsewhere: the backend refuses the token, the one refresh is refused too.
    up.requests.length = 0;
    up.setExpectedKey('someone-else');
    const refused = await vault.test('chatgpt-signin');
    expect(refused.status).toBe('bad-key');
    expect(refused.message).toContain('refused');
    expect(refused.message).toContain('codex login');
    for (const s of secrets) expect(refused.message).not.toContain(s);
    const refreshes = up.requests.filter((r) => r.path === '/oauth/token');
    expect(refreshes).toHaveLength(1);
    expect(refreshes[0]!.body).toMatchObject({ client_id: CODEX_OAUTH_CLIENT_ID, grant_type: 'refresh_token', refresh_token: t.refresh });
  });

  it('Test, ChatGPT sign-in near expiry: refreshes first through the proxy\'s session, stores the new tokens, then checks with the new token', async () => {
    const t = signinTokens(60, 'acct-test-2');
    await vault.importChatgptSignin(authDotJson(t, 'acct-test-2'));
    const next = { access_token: jwt({ exp: Math.floor(Date.now() / 1000) + 864_000 }), refresh_token: canary('rt2'), id_token: jwt({ 'https://api.openai.com/auth': { chatgpt_account_id: 'acct-test-2' } }) };
    secrets.push(next.access_token, next.refresh_token, next.id_token);
    up.setAuth({ clientId: CODEX_OAUTH_CLIENT_ID, refreshToken: t.refresh, next });
    const ok = await vault.test('chatgpt-signin');
    expect(ok, ok.message).toMatchObject({ status: 'ok' });
    expect(up.requests.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /oauth/token', 'GET /v1/models']);
    expect(up.requests[1]!.headers.authorization).toBe(`Bearer ${next.access_token}`);
    const stored = JSON.parse((await new AsyncEntry(service, 'chatgpt-signin').getPassword()) ?? '{}') as Record<string, unknown>;
    expect(stored).toMatchObject({ accessToken: next.access_token, refreshToken: next.refresh_token, accountId: 'acct-test-2' });
    // A run after the test uses the same refreshed session: no second refresh, the new token upstream.
    up.requests.length = 0;
    await servesCodexCall(next.access_token, 'acct-test-2');
    expect(up.requests.filter((r) => r.path === '/oauth/token')).toEqual([]);
  });

  it('Test: an upstream that cannot be reached is "unreachable", not "refused"', async () => {
    const token = `sk-ant-oat01-${canary('claude2')}`;
    secrets.push(token);
    await vault.setClaudeSubscription(token);
    // A loopback port nobody listens on (bound, then closed).
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(p));
      });
    });
    await catalog.setBaseUrl('claude-subscription', `http://127.0.0.1:${port}`);
    try {
      const result = await vault.test('claude-subscription');
      expect(result.status).toBe('unreachable');
      expect(result.message).toContain('could not reach');
      expect(result.message).not.toContain(token);
    } finally {
      await catalog.setBaseUrl('claude-subscription', up.url);
    }
  });
});
