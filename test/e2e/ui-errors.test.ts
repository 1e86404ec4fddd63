import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { polishShot } from './support/polish-shot';
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
    expect(await page.getByRole('note', { name: 'Start here' }).textContent()).toContain('Start here: add one provider key.');
  });

  it('refuses an OpenAI key offered as the Anthropic key, and says why', async () => {
    const row = page.locator('tr[data-provider="anthropic"]');
    await row.getByRole('button', { name: /Add key|Replace key/ }).click();
    // At Anthropic's own base URL (the default) the format is unambiguous.
    await row.getByLabel('Anthropic API key').fill('sk-proj-e2e-0123456789abcdef0123');
    await row.getByRole('button', { name: 'Save' }).click();
    // Said at the field (not a far-away notice), and the field keeps what was typed to correct it.
    const fieldError = row.locator('#k-anthropic-key-error');
    await expect.poll(() => fieldError.textContent(), { timeout: 20_000 }).toContain('looks like an OpenAI key');
    expect(await row.getByLabel('Anthropic API key').inputValue()).toBe('sk-proj-e2e-0123456789abcdef0123');
    expect(await row.getByLabel('Anthropic API key').getAttribute('aria-invalid')).toBe('true');
    expect(await row.getByText('API key', { exact: true }).isVisible()).toBe(true);
    expect(await page.locator('.notice').count()).toBe(0);
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
    await polishShot(page, 'key-test-refused');
    // A new base URL makes the last verdict stale: it goes (polish list). The URL stays the fake's.
    await row.getByRole('button', { name: 'Change URL' }).click();
    await row.getByLabel('Anthropic new base URL').fill(`${upstream.url}/`);
    await row.getByRole('button', { name: 'Save URL' }).click();
    await expect.poll(() => row.getByRole('button', { name: 'Change URL' }).count(), { timeout: 20_000 }).toBe(1);
    expect(await row.textContent()).toContain(upstream.url);
    expect(await status.count()).toBe(0);
    await polishShot(page, 'key-url-changed-verdict-cleared');
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
    await polishShot(page, 'key-refused-replace-key');
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

  it('an unreachable provider: the setup check fails naming its base URL, and a run says what Test says, with Test connection and Open Keys', async () => {
    // A loopback port that was just free: nothing listens there.
    const closed = await new Promise<number>((resolve) => {
      const srv = createServer();
      srv.listen(0, '127.0.0.1', () => {
        const port = (srv.address() as { port: number }).port;
        srv.close(() => resolve(port));
      });
    });
    const baseUrl = `http://127.0.0.1:${closed}`;
    const said = `could not reach ${baseUrl} (ECONNREFUSED); check the base URL and that the server is running`;
    await (services as AirlockServices).keys.set({ provider: 'anthropic', key: GOOD_KEY, baseUrl, storage: 'keychain' });

    await page.getByRole('button', { name: /Setup check/ }).click();
    await page.getByRole('button', { name: 'Check again' }).click();
    const banner = page.locator('.banner[role=status]');
    await expect.poll(() => banner.textContent(), { timeout: 60_000 }).toContain('Not ready yet');
    const check = page.locator('[data-check="provider-keys"]');
    expect(await check.textContent()).toContain(`anthropic at ${baseUrl}: ${said}`);
    expect(await check.getByRole('button', { name: 'Open Keys' }).count()).toBe(1);
    await shot(page, 'errors-07-setup-unreachable');

    await page.getByRole('button', { name: /New run/ }).click();
    await page.getByLabel('Project folder').fill(project);
    await page.getByLabel('Task').fill('');
    // A disabled Start run says why.
    await expect.poll(() => page.getByLabel('Why Start run is disabled').textContent(), { timeout: 15_000 }).toBe('Describe the task.');
    expect(await page.getByRole('button', { name: 'Start run' }).isDisabled()).toBe(true);
    await page.getByLabel('Task').fill('Say hello');
    await page.locator('#r-provider').selectOption('anthropic');
    await page.getByLabel('Model', { exact: true }).fill('claude-sonnet-4-5');
    // A wider network policy for this run only.
    await page.getByLabel('Network', { exact: true }).selectOption('allowlist');
    await page.getByLabel('Allowed domains').fill('example.invalid');
    await expect.poll(() => page.getByRole('button', { name: 'Start run' }).isDisabled(), { timeout: 15_000 }).toBe(false);
    expect(await page.getByLabel('Why Start run is disabled').count()).toBe(0);
    // Ctrl+Enter starts it from any field (here the model's), not only the task.
    await page.getByLabel('Model', { exact: true }).press('Control+Enter');
    await expect.poll(() => page.locator('.run-header .badge').textContent(), { timeout: 240_000 }).toBe('failed');
    const error = page.locator('.banner.error[role=alert]');
    const text = (await error.textContent()) ?? '';
    expect(text).toContain('The model provider failed.');
    expect(text).toContain(said);
    expect(text).not.toContain('exited with');
    const transcript = (await page.getByRole('log', { name: 'Transcript' }).textContent()) ?? '';
    expect(transcript).not.toContain('Finished.');
    expect(transcript).toContain(said);
    await page.setViewportSize({ width: 800, height: 600 });
    await shot(page, 'errors-08-run-unreachable-800');
    await page.setViewportSize({ width: 1360, height: 900 });
    const runId = (await (services as AirlockServices).runs.list({ limit: 1 }))[0]?.id ?? '';

    // The CLI says the same, with the same two things to do.
    const cli = await exec('node', [join(import.meta.dirname, '..', '..', 'bin', 'airlock.js'), 'show', runId], { env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName } });
    expect(cli.stdout).toContain(said);
    expect(cli.stdout).toContain('airlock keys test anthropic');

    // The next New run form is back on the Settings default: the wider policy did not carry over.
    await page.getByRole('button', { name: /New run/ }).click();
    expect(await page.getByLabel('Network', { exact: true }).inputValue()).toBe('none');
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${runId}"]`).click();
    await page.locator('.banner.error[role=alert]').waitFor();

    // Test connection goes to Keys and runs the same test there.
    await error.getByRole('button', { name: 'Test connection' }).click();
    const status = page.locator('tr[data-provider="anthropic"] [role=status]');
    await expect.poll(() => status.textContent(), { timeout: 20_000 }).toContain(said);
    await shot(page, 'errors-09-keys-test-unreachable');
  });

  it('Remove key asks first: Keep leaves the key, Remove key removes it', async () => {
    const row = page.locator('tr[data-provider="anthropic"]');
    await expect.poll(() => row.textContent(), { timeout: 20_000 }).toContain('••••GOOD');
    await row.getByRole('button', { name: 'Remove key' }).click();
    const confirm = row.getByRole('group', { name: 'Confirm remove key' });
    expect(await confirm.textContent()).toContain('Remove the Anthropic key from the OS keychain?');
    expect(await confirm.getByRole('button', { name: 'Keep' }).evaluate((el) => el === document.activeElement)).toBe(true);
    await shot(page, 'errors-10-confirm-remove-key');
    await confirm.getByRole('button', { name: 'Keep' }).click();
    expect(await row.textContent()).toContain('••••GOOD');
    expect((await (services as AirlockServices).keys.list({})).find((k) => k.provider === 'anthropic')?.hasKey).toBe(true);
    await row.getByRole('button', { name: 'Remove key' }).click();
    await row.getByRole('group', { name: 'Confirm remove key' }).getByRole('button', { name: 'Remove key' }).click();
    await expect.poll(() => row.textContent(), { timeout: 20_000 }).toContain('no key');
    expect((await (services as AirlockServices).keys.list({})).find((k) => k.provider === 'anthropic')?.hasKey ?? false).toBe(false);
  });
});
