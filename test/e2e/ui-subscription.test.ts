import { AsyncEntry } from '@napi-rs/keyring';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { serveUi } from './support/serve-ui';
import { ensureBuiltRenderer } from './support/built-renderer';

const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

/**
 * The keys screen's subscription sign-in (real core over `airlock serve`, real keychain, Chromium):
 * paste a Claude setup token, import this machine's Codex sign-in (its auth.json, then an entry Codex
 * kept in the OS keyring); each row says it serves only its vendor's CLI; Test says valid or refused
 * (against the fake upstream) and offers Replace; the page never shows a credential.
 */
describe.skipIf(!chromium.ok || !keychain.ok)('keys screen: subscription sign-in (Chromium, real core, real keychain)', () => {
  let home: string;
  let codexHome: string;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let up: FakeUpstream;
  const keychainService = `airlock-e2e-subs-${process.pid}`;
  let codexEntry: string | undefined;
  const token = `sk-ant-oat01-${randomBytes(20).toString('hex')}`;
  const refresh = `rt-${randomBytes(20).toString('hex')}`;
  const access = `${part({ alg: 'RS256' })}.${part({ exp: Math.floor(Date.now() / 1000) + 86_400 })}.${randomBytes(16).toString('hex')}`;

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-subs-home-'));
    codexHome = await mkdtemp(join(tmpdir(), 'airlock-e2e-codex-'));
    // Both subscription providers call the fake upstream (base URLs from the catalog, set before the core starts).
    up = await startFakeUpstream();
    const catalog = new ProviderCatalog({ home });
    await catalog.setBaseUrl('claude-subscription', up.url);
    await catalog.setBaseUrl('chatgpt-signin', `${up.url}/backend-api/codex`);
    await catalog.setAuthBaseUrl('chatgpt-signin', up.url);
    const idToken = `${part({ alg: 'RS256' })}.${part({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'pro', chatgpt_account_id: 'acct-ui' } })}.sig`;
    await writeFile(join(codexHome, 'auth.json'), JSON.stringify({ OPENAI_API_KEY: null, tokens: { id_token: idToken, access_token: access, refresh_token: refresh, account_id: 'acct-ui' }, last_refresh: new Date().toISOString() }));
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: keychainService, CODEX_HOME: codexHome };
    const ui = await serveUi({ env, rendererDir, warm: false });
    stopServe = ui.stop;
    services = ui.services;
    const host = ui.host;
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    await page.goto(host.url);
  });

  afterAll(async () => {
    await closeBrowser?.();
    for (const provider of ['claude-subscription', 'chatgpt-signin']) await services?.keys.remove({ provider }).catch(() => undefined);
    await stopServe?.();
    if (codexEntry) await new AsyncEntry('Codex Auth', codexEntry).deleteCredential().catch(() => undefined);
    await up?.close();
    await rm(home, { recursive: true, force: true });
    await rm(codexHome, { recursive: true, force: true });
  });

  /** Waits for the row to say "signed in"; if the app shows an error first, fails with its words. */
  async function signedInOrSaid(row: Locator): Promise<void> {
    const alert = page.locator('.notice-area [role="alert"]');
    await row.getByText('signed in').or(alert).first().waitFor();
    if (await alert.count()) expect.fail(`the app said: ${await alert.first().textContent()}`);
  }

  it('pastes a setup token and imports the Codex sign-in; says whom each serves; shows no credential', async () => {
    await page.getByRole('button', { name: /Keys & providers/ }).click();
    const section = page.getByRole('region', { name: 'Subscription sign-in' });
    await section.waitFor();
    expect(await section.textContent()).toContain('Each serves only Claude Code / Codex CLI');

    const claude = section.locator('tr[data-provider="claude-subscription"]');
    expect(await claude.locator('[data-note="serves-only"]').textContent()).toContain('Serves only Claude Code');
    await claude.getByRole('button', { name: 'Paste setup token' }).click();
    await claude.getByLabel('Claude subscription (Claude Code only) setup token').fill(token);
    await claude.getByRole('button', { name: 'Save' }).click();
    await signedInOrSaid(claude);

    const chatgpt = section.locator('tr[data-provider="chatgpt-signin"]');
    expect(await chatgpt.locator('[data-note="serves-only"]').textContent()).toContain('Serves only Codex CLI');
    await chatgpt.getByRole('button', { name: 'Import from Codex' }).click();
    await signedInOrSaid(chatgpt);
    expect(await chatgpt.textContent()).toContain('token valid until');

    // Stored in the keychain (the core reads them back), shown nowhere.
    const list = await services!.keys.list({});
    expect(list.find((k) => k.provider === 'claude-subscription')).toMatchObject({ hasKey: true, storage: 'keychain', credential: 'claude-subscription' });
    expect(list.find((k) => k.provider === 'chatgpt-signin')).toMatchObject({ hasKey: true, storage: 'keychain', credential: 'chatgpt-signin', last4: null });
    const html = await page.content();
    for (const secret of [token, refresh, access]) {
      expect(html).not.toContain(secret);
      expect(JSON.stringify(list)).not.toContain(secret);
    }
    await mkdir(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, 'keys-subscription.png'), fullPage: true });
    // The API-key table does not offer them as API keys.
    expect(await page.locator('table').first().locator('tr[data-provider="claude-subscription"]').count()).toBe(0);
  });

  it('Test on a subscription row says valid or refused (with Replace); Import from Codex also finds a sign-in kept in the OS keyring', async () => {
    const section = page.getByRole('region', { name: 'Subscription sign-in' });
    const claude = section.locator('tr[data-provider="claude-subscription"]');
    const chatgpt = section.locator('tr[data-provider="chatgpt-signin"]');

    // The provider takes the setup token: valid; the request carried it as Claude Code's would.
    up.setExpectedKey(token);
    up.requests.length = 0;
    await claude.getByRole('button', { name: 'Test' }).click();
    await claude.locator('[data-test-result="ok"]').waitFor();
    expect(await claude.locator('[role="status"]').textContent()).toMatch(/^Valid: the Claude subscription token works \(Anthropic accepted it\)/);
    // Every request the test made carried the token as Claude Code's would (under load a test may be retried once).
    const sent = up.requests.map((r) => `${r.method} ${r.path} ${String(r.headers.authorization)}`);
    expect(sent.length).toBeGreaterThan(0);
    expect(new Set(sent)).toEqual(new Set([`POST /v1/messages Bearer ${token}`]));

    // The backend refuses the ChatGPT access token and the auth server its refresh: refused, with Replace.
    await chatgpt.getByRole('button', { name: 'Test' }).click();
    await chatgpt.locator('[data-test-result="bad-key"]').waitFor();
    const said = await chatgpt.locator('[role="status"]').textContent();
    expect(said).toMatch(/^Refused: the ChatGPT sign-in was refused/);
    expect(said).toContain('codex login');
    await chatgpt.getByRole('button', { name: 'Replace' }).click();
    await chatgpt.getByLabel('Codex auth.json').waitFor();
    await chatgpt.getByRole('button', { name: 'Cancel' }).click();

    // Codex signed in again, this time into the OS keyring (no auth.json): written as Codex writes it
    // (openai/codex codex-rs/core/src/auth/storage.rs at f793618e7b4d32961d4891b75550dcaced1f033b).
    await rm(join(codexHome, 'auth.json'));
    const access2 = `${part({ alg: 'RS256' })}.${part({ exp: Math.floor(Date.now() / 1000) + 86_400 })}.${randomBytes(16).toString('hex')}`;
    const refresh2 = `rt-${randomBytes(20).toString('hex')}`;
    const idToken2 = `${part({ alg: 'RS256' })}.${part({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'pro', chatgpt_account_id: 'acct-ui-2' } })}.sig`;
    codexEntry = `cli|${createHash('sha256').update(await realpath(codexHome)).digest('hex').slice(0, 16)}`;
    await new AsyncEntry('Codex Auth', codexEntry).setPassword(JSON.stringify({ auth_mode: 'chatgpt', OPENAI_API_KEY: null, tokens: { id_token: idToken2, access_token: access2, refresh_token: refresh2, account_id: 'acct-ui-2' }, last_refresh: new Date().toISOString() }));
    await chatgpt.getByRole('button', { name: 'Import from Codex' }).click();
    const alert = page.locator('.notice-area [role="alert"]');
    const stored = async () => JSON.parse((await new AsyncEntry(keychainService, 'chatgpt-signin').getPassword()) ?? '{}') as Record<string, unknown>;
    await expect.poll(async () => (await alert.count()) ? `the app said: ${await alert.first().textContent()}` : (await stored()).accountId, { timeout: 15_000 }).toBe('acct-ui-2');
    expect(await stored()).toMatchObject({ accessToken: access2, refreshToken: refresh2, accountId: 'acct-ui-2' });
    // The old result was about the old sign-in; it is gone.
    await expect.poll(() => chatgpt.locator('[data-test-result]').count(), { timeout: 15_000 }).toBe(0);

    up.setExpectedKey(access2);
    up.requests.length = 0;
    await chatgpt.getByRole('button', { name: 'Test' }).click();
    await chatgpt.locator('[data-test-result="ok"]').waitFor();
    expect(await chatgpt.locator('[role="status"]').textContent()).toMatch(/^Valid: the ChatGPT sign-in works \(ChatGPT accepted it\)/);
    expect(up.requests.map((r) => [r.path, r.headers.authorization, r.headers['chatgpt-account-id']])).toEqual([['/v1/models', `Bearer ${access2}`, 'acct-ui-2']]);

    const html = await page.content();
    for (const secret of [token, refresh, access, access2, refresh2]) expect(html).not.toContain(secret);
    await page.screenshot({ path: join(SHOTS, 'keys-subscription-test.png'), fullPage: true });
  });
});
