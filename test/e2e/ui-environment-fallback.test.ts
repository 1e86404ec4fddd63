/**
 * No silent fallback (docs/architecture.md §16, "Choosing"): a project whose devcontainer the user has not
 * accepted runs in Airlock's own image under `auto`, and the app says so before the run starts (the New
 * run form), while it runs (the header) and after (the report). Chromium against the real core served
 * by `airlock serve`, a real engine, the scripted upstream.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { gitProject } from './support/git-project';
import { serveUi } from './support/serve-ui';

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const KEY = `sk-ant-e2e-${'7e2f'.repeat(6)}-FALL`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

describe.skipIf(!docker.ok || !chromium.ok)('an unaccepted devcontainer is never a silent fallback (Chromium, real core, Docker)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const pageErrors: string[] = [];
  const serviceName = `airlock-e2e-fallback-${process.pid}`;

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-fallback-', { 'README.md': 'hello\n', '.devcontainer/devcontainer.json': JSON.stringify({ image: 'golang:1.22', postCreateCommand: 'go version' }) }, { name: 'Fallback Person', email: 'fallback@example.invalid' });
    upstream = await startFakeUpstream({ expectedKey: KEY });
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'NOTE.md', content: 'ran\n' } }], usage: { input: 100, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Wrote a note.' } }], usage: { input: 110, output: 10 } },
    ]);
    const ui = await serveUi({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName }, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    await ui.services.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(ui.host.url);
  }, 300_000);

  afterAll(async () => {
    await closeBrowser?.();
    if (services && keychain.ok) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    for (const d of [home, project]) if (d) await rm(d, { recursive: true, force: true });
  });

  it('the form warns before start; the header and the report say which environment ran and why', async () => {
    await page.locator('.empty[aria-busy="true"]').waitFor({ state: 'detached', timeout: 120_000 });
    await page.getByRole('button', { name: /New run/ }).click();
    await page.getByLabel('Project folder').fill(project);
    const warning = page.getByTestId('environment-fallback');
    await expect.poll(() => warning.textContent().catch(() => ''), { timeout: 20_000 }).toMatch(/Not accepted yet: this run will use Airlock's own image, not \.devcontainer\/devcontainer\.json/);
    // Accepting takes the warning away; un-ticking brings it back.
    await page.getByLabel(/Build and run/).check();
    await expect.poll(() => warning.count()).toBe(0);
    await page.getByLabel(/Build and run/).uncheck();
    await warning.waitFor();
    await page.getByLabel('Task').fill('Write a note');
    await page.locator('#r-provider').selectOption('anthropic');
    await page.getByLabel('Model', { exact: true }).fill('claude-sonnet-4-5');
    await page.screenshot({ path: join(SHOTS, 'environment-fallback-form.png'), fullPage: true });
    await page.getByRole('button', { name: 'Start run' }).click();

    const header = page.getByRole('status', { name: 'Environment not used' });
    await expect.poll(() => header.textContent().catch(() => ''), { timeout: 240_000 }).toMatch(/used Airlock's own image, not the project's \.devcontainer\/devcontainer\.json: The project environment is not trusted yet/);
    const report = page.getByRole('region', { name: 'Environment' });
    await expect.poll(() => report.textContent().catch(() => ''), { timeout: 240_000 }).toContain("Airlock's own image");
    expect(await report.getByTestId('environment-fallback').textContent()).toMatch(/Not the project's \.devcontainer\/devcontainer\.json: The project environment is not trusted yet/);
    expect(await report.textContent()).toMatch(/Before the agent \(sandbox, copy-in, setup\): \d+:\d\d · the agent: \d+:\d\d/);
    await page.screenshot({ path: join(SHOTS, 'environment-fallback-report.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  });
});
