import { randomBytes } from 'node:crypto';
import { access, mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { serveUi } from './support/serve-ui';

const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');
const docker = await requirePrerequisite('docker');

const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const SOCKET = 'unix:///var/run/docker.sock';

/**
 * The Settings screen and the New run form's providers, in Chromium against the real core over
 * `airlock serve` (real keychain, real engine): a bad engine address is refused on its field and
 * nothing is saved; Check connection reaches the local engine; saved values survive a reload and
 * read back through the services; the Claude subscription is offered for Claude Code only.
 */
describe.skipIf(!chromium.ok || !keychain.ok || !docker.ok)('Settings screen and providers by agent (Chromium, real core, real keychain, real engine)', () => {
  let home: string;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let url: string;
  const token = `sk-ant-oat01-${randomBytes(20).toString('hex')}`;

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-settings-home-'));
    // The settings alone choose the engine here: no --engine-host/--engine from the environment.
    const { AIRLOCK_ENGINE_HOST: _h, AIRLOCK_ENGINE: _e, AIRLOCK_ENGINE_ALLOW_INSECURE: _i, ...base } = process.env;
    const env = { ...base, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-settings-${process.pid}` };
    const ui = await serveUi({ env, rendererDir, warm: false });
    stopServe = ui.stop;
    services = ui.services;
    url = ui.host.url;
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    await page.goto(url);
  });

  afterAll(async () => {
    await closeBrowser?.();
    await services?.keys.remove({ provider: 'claude-subscription' }).catch(() => undefined);
    await stopServe?.();
    await rm(home, { recursive: true, force: true });
  });

  const form = () => page.getByRole('form', { name: 'Settings' });
  const openSettings = async () => {
    await page.getByRole('button', { name: /^Settings/ }).click();
    await page.getByRole('form', { name: 'Settings' }).waitFor();
  };

  it('refuses a bad engine address on its field, checks and saves a good one, and keeps the values across a reload', async () => {
    await openSettings();
    const address = form().getByLabel('Engine address');
    await address.fill('tcp://build-box');
    await form().getByLabel('Theme').selectOption('dark');
    await page.getByRole('button', { name: 'Save settings' }).click();
    const problem = page.locator('#s-engine-host-problem');
    await problem.waitFor();
    expect(await problem.textContent()).toContain("'tcp://build-box' is not an engine address Airlock understands");
    expect(await address.getAttribute('aria-invalid')).toBe('true');
    // Nothing saved: not the address, not the theme that came with it.
    const unchanged = await services!.settings.get({});
    expect(unchanged.engineHost).toBeUndefined();
    expect(unchanged.theme).toBe('system');
    await expect(access(join(home, 'settings.json'))).rejects.toMatchObject({ code: 'ENOENT' });
    await form().getByLabel('Theme').selectOption('light');

    // Allowing insecure engines asks first, and says why.
    await form().getByLabel('Insecure engines').click(); // not checked yet: it asks first
    const ask = page.getByRole('alertdialog', { name: 'Allow insecure engine connections?' });
    expect(await ask.textContent()).toContain('run containers as root');
    await ask.getByRole('button', { name: 'Keep them refused' }).click();
    expect(await form().getByLabel('Insecure engines').isChecked()).toBe(false);

    await address.fill(SOCKET);
    expect(await problem.count()).toBe(0);
    await form().getByLabel('Engine', { exact: true }).selectOption('docker');
    await page.getByRole('button', { name: 'Check connection' }).click();
    const check = page.getByTestId('engine-check');
    await check.waitFor({ timeout: 30_000 });
    const checked = (await check.textContent()) ?? '';
    expect(checked).toMatch(/connected\s*local\s*(Docker|Podman) \d+\.\d+\S* on the local socket \/var\/run\/docker\.sock/);
    // Checked, not saved.
    expect((await services!.settings.get({})).engineHost).toBeUndefined();

    await form().getByLabel('Git history').selectOption('commits');
    await form().getByLabel('Number of commits').fill('20');
    await form().getByLabel('Transcripts').check();
    await form().getByLabel('VM accelerator').selectOption('tcg');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Settings saved').waitFor();
    const saved = { engine: 'docker', engineHost: SOCKET, gitHistory: 20, transcripts: true, vmAccel: 'tcg', theme: 'light' };
    expect(await services!.settings.get({})).toMatchObject(saved);
    expect((await services!.settings.get({})).engineAllowInsecure ?? false).toBe(false);

    await mkdir(SHOTS, { recursive: true });
    // The screen scrolls inside the main pane: a tall window shows all of it.
    await page.setViewportSize({ width: 1360, height: 1600 });
    await page.screenshot({ path: join(SHOTS, 'settings.png') });

    await page.reload();
    await openSettings();
    expect(await form().getByLabel('Engine address').inputValue()).toBe(SOCKET);
    expect(await form().getByLabel('Engine', { exact: true }).inputValue()).toBe('docker');
    expect(await form().getByLabel('Git history').inputValue()).toBe('commits');
    expect(await form().getByLabel('Number of commits').inputValue()).toBe('20');
    expect(await form().getByLabel('Transcripts').isChecked()).toBe(true);
    expect(await form().getByLabel('VM accelerator').inputValue()).toBe('tcg');
    expect(await form().getByLabel('Insecure engines').isChecked()).toBe(false);
    expect(await services!.settings.get({})).toMatchObject(saved);

    // The same screen in the dark theme.
    await form().getByLabel('Theme').selectOption('dark');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.waitForFunction(() => document.documentElement.dataset.theme === 'dark');
    await form().getByLabel('Engine address').fill('ssh://me@build-box.invalid');
    await page.getByRole('button', { name: 'Revert' }).waitFor();
    await page.screenshot({ path: join(SHOTS, 'settings-dark.png') });
    await page.getByRole('button', { name: 'Revert' }).click();
    expect((await services!.settings.get({})).theme).toBe('dark');
  });

  it('New run offers the Claude subscription for Claude Code, not for the built-in agent', async () => {
    await services!.keys.setSubscription({ kind: 'claude-subscription', secret: token, storage: 'keychain' });
    await page.getByRole('button', { name: /^New run/ }).click();
    const agent = page.getByLabel('Agent');
    const provider = page.getByLabel('Provider and model');
    const offered = async () => provider.locator('option').evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value).filter(Boolean));

    await agent.selectOption('claude-code');
    await page.waitForFunction(() => [...document.querySelectorAll('#r-provider option')].some((o) => (o as HTMLOptionElement).value === 'claude-subscription'));
    expect(await offered()).toContain('claude-subscription');
    expect(await offered()).not.toContain('chatgpt-signin');
    await provider.selectOption('claude-subscription');

    await agent.selectOption('builtin');
    expect(await offered()).not.toContain('claude-subscription');
    expect(await provider.inputValue()).not.toBe('claude-subscription');
    expect(await page.getByTestId('provider-switched').textContent()).toContain('serves only Claude Code');
    expect(await page.content()).not.toContain(token);
  });
});
