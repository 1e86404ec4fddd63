import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { serveUi } from './support/serve-ui';
import { ensureBuiltRenderer } from './support/built-renderer';

const exec = promisify(execFile);
const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

/** The key the fake provider accepts, and a well-formed Anthropic key it refuses. */
const GOOD_KEY = `sk-ant-e2e-${'9a1f'.repeat(6)}-GOOD`;
const WRONG_KEY = `sk-ant-e2e-${'0b2e'.repeat(6)}-WRNG`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

describe.skipIf(!docker.ok || !chromium.ok || !keychain.ok)('errors in plain words with their fix, and confirmations (Chromium, real core, fake upstream)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const serviceName = `airlock-e2e-errors-${process.pid}`;

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-errors-home-'));
    project = await mkdtemp(join(tmpdir(), 'airlock-e2e-errors-project-'));
    await writeFile(join(project, 'README.md'), '# demo\n');
    await exec('git', ['init', '-q', '-b', 'main'], { cwd: project });
    await exec('git', ['add', 'README.md'], { cwd: project });
    await exec('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', 'commit', '-qm', 'init'], { cwd: project });
    upstream = await startFakeUpstream({ expectedKey: GOOD_KEY, script: [{ toolCalls: [{ name: 'finish', input: { summary: 'never reached' } }] }] });

    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName };
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
    if (services) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('setup check with no key stored is not "Ready": it warns and offers Add key', async () => {
    await page.getByRole('button', { name: /Setup check/ }).click();
    const banner = page.locator('.banner[role=status]');
    await expect.poll(() => banner.textContent(), { timeout: 60_000 }).toContain('Almost ready: runs need a provider key.');
    expect(await page.locator('[data-check="provider-keys"]').textContent()).toContain('no provider key is stored');
    await shot(page, 'errors-01-setup-no-key');
    await banner.getByRole('button', { name: 'Add key' }).click();
    await page.locator('tr[data-provider="anthropic"]').waitFor();
  });

  it('refuses an OpenAI key offered as the Anthropic key, and says why', async () => {
    const row = page.locator('tr[data-provider="anthropic"]');
    await row.getByRole('button', { name: /Add key|Replace key/ }).click();
    // At Anthropic's own base URL (the default) the format is unambiguous.
    await row.getByLabel('Anthropic API key').fill('sk-proj-e2e-0123456789abcdef0123');
    await row.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => page.getByRole('alert').first().textContent(), { timeout: 20_000 }).toContain('looks like an OpenAI key');
    await shot(page, 'errors-02-openai-key-as-anthropic');
    expect(await page.content()).not.toContain('0123456789abcdef0123');
  });

  it('"Test" on a key the provider refuses says so without sending a GUI user to a terminal', async () => {
    const row = page.locator('tr[data-provider="anthropic"]');
    if (!(await row.getByLabel('Anthropic API key').isVisible())) await row.getByRole('button', { name: /Add key|Replace key/ }).click();
    await row.getByLabel('Anthropic base URL').fill(upstream.url);
    await row.getByLabel('Anthropic API key').fill(WRONG_KEY);
    await row.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => row.textContent(), { timeout: 20_000 }).toContain('••••WRNG');
    // Only ever the fake provider on loopback: Test must not reach the real one.
    expect(await row.textContent()).toContain(upstream.url);
    await row.getByRole('button', { name: 'Test' }).click();
    const status = row.locator('[role=status]');
    await expect.poll(() => status.textContent(), { timeout: 20_000 }).toContain('refused your anthropic key');
    expect(await status.textContent()).not.toContain('airlock keys set');
    await shot(page, 'errors-03-key-test-refused');
  });

  it('a folder known not to exist blocks Start at the field', async () => {
    await page.getByRole('button', { name: /New run/ }).click();
    await page.getByLabel('Project folder').fill(join(project, 'no-such-folder'));
    await page.getByLabel('Task').fill('Say hello');
    await page.locator('#r-provider').selectOption('anthropic');
    await page.getByLabel('Model', { exact: true }).fill('claude-sonnet-4-5');
    await expect.poll(() => page.locator('#r-project-problem').textContent(), { timeout: 15_000 }).toContain('does not exist');
    expect(await page.getByRole('button', { name: 'Start run' }).isDisabled()).toBe(true);
    await shot(page, 'errors-04-missing-folder');
    await page.getByLabel('Project folder').fill(project);
    await expect.poll(() => page.getByRole('button', { name: 'Start run' }).isDisabled(), { timeout: 15_000 }).toBe(false);
  });

  it('a run with a key the provider refuses says the provider refused the key, with Replace key', async () => {
    await page.getByRole('button', { name: 'Start run' }).click();
    await expect.poll(() => page.locator('.run-header .badge').textContent(), { timeout: 240_000 }).toBe('failed');
    const banner = page.locator('.banner.error[role=alert]');
    const text = (await banner.textContent()) ?? '';
    expect(text).toContain('Key refused.');
    expect(text).toContain('The provider refused your anthropic key (HTTP 401)');
    expect(text).not.toContain('run token');
    expect(text).not.toContain('kept for review'); // nothing changed
    expect(text).not.toMatch(/UNAUTHORIZED|SANDBOX_FAILED/);
    // The agent's own report no longer blames the run token either.
    expect(await page.getByRole('log', { name: 'Transcript' }).textContent()).not.toContain('run token');
    await shot(page, 'errors-05-run-key-refused');
    await banner.getByRole('button', { name: 'Replace key' }).click();
    await page.locator('tr[data-provider="anthropic"]').waitFor();
  });

  it('Delete in History asks first; Keep leaves the run, Delete run removes it', async () => {
    await page.getByRole('button', { name: /History/ }).click();
    const row = page.locator('tr[data-run]').first();
    await row.waitFor();
    await row.getByRole('button', { name: 'Delete' }).click();
    const confirm = row.getByRole('group', { name: 'Confirm delete' });
    expect(await confirm.textContent()).toContain('Delete this run and its audit log?');
    await shot(page, 'errors-06-history-confirm-delete');
    await confirm.getByRole('button', { name: 'Keep' }).click();
    expect(await page.locator('tr[data-run]').count()).toBe(1);
    await row.getByRole('button', { name: 'Delete' }).click();
    await row.getByRole('group', { name: 'Confirm delete' }).getByRole('button', { name: 'Delete run' }).click();
    await expect.poll(() => page.locator('tr[data-run]').count(), { timeout: 15_000 }).toBe(0);
  });
});
