import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
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
 * paste a Claude setup token, import this machine's Codex sign-in; each row says it serves only its
 * vendor's CLI; the page never shows a credential.
 */
describe.skipIf(!chromium.ok || !keychain.ok)('keys screen: subscription sign-in (Chromium, real core, real keychain)', () => {
  let home: string;
  let codexHome: string;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const token = `sk-ant-oat01-${randomBytes(20).toString('hex')}`;
  const refresh = `rt-${randomBytes(20).toString('hex')}`;
  const access = `${part({ alg: 'RS256' })}.${part({ exp: Math.floor(Date.now() / 1000) + 86_400 })}.${randomBytes(16).toString('hex')}`;

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-subs-home-'));
    codexHome = await mkdtemp(join(tmpdir(), 'airlock-e2e-codex-'));
    const idToken = `${part({ alg: 'RS256' })}.${part({ 'https://api.openai.com/auth': { chatgpt_plan_type: 'pro', chatgpt_account_id: 'acct-ui' } })}.sig`;
    await writeFile(join(codexHome, 'auth.json'), JSON.stringify({ OPENAI_API_KEY: null, tokens: { id_token: idToken, access_token: access, refresh_token: refresh, account_id: 'acct-ui' }, last_refresh: new Date().toISOString() }));
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-subs-${process.pid}`, CODEX_HOME: codexHome };
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
});
