/**
 * The New run form's environment picker (docs/architecture.md §16, "Choosing"), in Chromium against
 * the real core served by `airlock serve`: a project with several named devcontainers makes the user
 * pick, the picked one shows what it does not apply and asks to be accepted, switching works, and a
 * project with one devcontainer shows it as found unless the settings default says otherwise.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import type { HostServer } from '../../core/host/host-server';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { serveUi } from './support/serve-ui';

const chromium = await requirePrerequisite('chromium');
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

async function devcontainer(dir: string, rel: string, config: object): Promise<void> {
  await mkdir(join(dir, rel, '..'), { recursive: true });
  await writeFile(join(dir, rel), JSON.stringify(config));
}

describe.skipIf(!chromium.ok)('the New run form picks the environment (Chromium, real core)', () => {
  let home: string;
  let several: string;
  let single: string;
  let services: AirlockServices | undefined;
  let host: HostServer;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    several = await mkdtemp(join(tmpdir(), 'airlock-e2e-envs-'));
    single = await mkdtemp(join(tmpdir(), 'airlock-e2e-env1-'));
    await devcontainer(several, '.devcontainer/go/devcontainer.json', { image: 'golang:1.22', runArgs: ['--network=host'], postCreateCommand: 'go vet ./...' });
    await devcontainer(several, '.devcontainer/node/devcontainer.json', { image: 'node:20' });
    await devcontainer(single, '.devcontainer/devcontainer.json', { image: 'node:20', mounts: ['source=/,target=/host,type=bind'] });
    const ui = await serveUi({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-env-${process.pid}` }, rendererDir, warm: false });
    stopServe = ui.stop;
    services = ui.services;
    host = ui.host;
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(host.url);
  });

  afterAll(async () => {
    await closeBrowser?.();
    await stopServe?.();
    for (const d of [home, several, single]) if (d) await rm(d, { recursive: true, force: true });
  });

  const select = () => page.locator('#r-environment');
  const options = () => select().locator('option').evaluateAll((els) => els.map((e) => ({ value: (e as HTMLOptionElement).value, text: e.textContent ?? '' })));

  it('several devcontainers: the user picks; the picked one says what is not applied; switching and the settings default work', async () => {
    // Booted (a first run without keys lands on Keys & providers), then the form.
    await page.locator('.empty[aria-busy="true"]').waitFor({ state: 'detached', timeout: 120_000 });
    await page.getByRole('button', { name: /New run/ }).click();
    await page.getByLabel('Project folder').fill(several);
    await expect.poll(() => page.getByTestId('environment-needs-choice').textContent().catch(() => ''), { timeout: 20_000 }).toMatch(/2 devcontainer configurations \(go, node\).*pick one above/);
    expect(await select().inputValue()).toBe('');
    expect((await options()).map((o) => o.value)).toEqual(['', 'airlock', 'devcontainer:.devcontainer/go/devcontainer.json', 'devcontainer:.devcontainer/node/devcontainer.json']);
    expect((await options())[2]?.text).toContain('(not accepted yet)');

    await select().selectOption('devcontainer:.devcontainer/go/devcontainer.json');
    await expect.poll(() => page.getByTestId('environment-not-applied').textContent().catch(() => ''), { timeout: 20_000 }).toContain('runArgs');
    expect(await page.getByLabel(/Build and run \.devcontainer\/go\/devcontainer\.json/).isChecked()).toBe(false);
    // Before accepting, the user can read what it would build and run, as `airlock env plan` reads it on
    // the host, in the app's words (no CLI flags).
    await page.getByText('What it will build and run').click();
    const plan = page.getByLabel('Environment plan');
    await expect.poll(() => plan.textContent().catch(() => ''), { timeout: 20_000 }).toContain('postCreateCommand: go vet ./...');
    expect(await plan.textContent()).toContain('image: golang:1.22');
    expect(await plan.textContent()).toContain('not accepted yet (tick the box to build and use it)');
    expect(await plan.textContent()).not.toMatch(/--(trust-environment|setup-allow|publish)/);
    // The plan as the user reads it in the form, at the two window sizes (issue 38).
    await mkdir(SHOTS, { recursive: true });
    for (const size of [{ width: 1280, height: 800 }, { width: 800, height: 600 }]) {
      await page.setViewportSize(size);
      await plan.scrollIntoViewIfNeeded();
      await page.screenshot({ path: join(SHOTS, `new-run-plan-${size.width}x${size.height}.png`) });
    }
    await select().selectOption('devcontainer:.devcontainer/node/devcontainer.json');
    await expect.poll(() => plan.textContent().catch(() => ''), { timeout: 20_000 }).toContain('image: node:20');
    await select().selectOption('devcontainer:.devcontainer/go/devcontainer.json');

    await select().selectOption('airlock');
    await expect.poll(() => page.getByTestId('environment-not-applied').count(), { timeout: 20_000 }).toBe(0);
    expect(await page.getByLabel(/Build and run/).count()).toBe(0);

    // One devcontainer: found and shown by itself, with what it does not apply.
    await page.getByLabel('Project folder').fill(single);
    await expect.poll(() => select().inputValue().catch(() => ''), { timeout: 20_000 }).toBe('devcontainer:.devcontainer/devcontainer.json');
    expect(await page.getByTestId('environment-found').textContent()).toBe('found in the project');
    await expect.poll(() => page.getByTestId('environment-not-applied').textContent().catch(() => ''), { timeout: 20_000 }).toContain('mounts');

    // The settings default decides when the form has no pick of its own.
    await services?.settings.update({ defaultEnvironment: 'airlock' });
    await page.reload();
    await page.locator('.empty[aria-busy="true"]').waitFor({ state: 'detached', timeout: 120_000 });
    await page.getByRole('button', { name: /New run/ }).click();
    await page.getByLabel('Project folder').fill(single);
    await expect.poll(() => select().inputValue().catch(() => ''), { timeout: 20_000 }).toBe('airlock');
    expect(pageErrors).toEqual([]);
  }, 180_000);
});
