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

const KEY = `sk-ant-e2e-${'9a7b'.repeat(6)}-HIST`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
/** Not on the run's allow-list: the host's egress proxy refuses it (no DNS lookup, no traffic out). */
const BLOCKED_HOST = 'blocked.airlock.test';

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `history-${name}.png`), fullPage: true });
}

describe.skipIf(!docker.ok || !chromium.ok)('history you can read, and Run again (`airlock serve`, real core, Chromium, Docker, fake upstream)', () => {
  let home: string;
  let project: string;
  let emptyVmAssets: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-history-home-'));
    project = await mkdtemp(join(tmpdir(), 'airlock-e2e-history-project-'));
    // VM assets pointed at an empty folder: the setup check says VM isolation is unavailable.
    emptyVmAssets = await mkdtemp(join(tmpdir(), 'airlock-e2e-no-vm-'));
    await writeFile(join(project, 'README.md'), '# demo\n');
    await writeFile(join(project, '.env'), 'SECRET_TOKEN=stays-on-the-host\n');
    await exec('git', ['init', '-q', '-b', 'main'], { cwd: project });

    upstream = await startFakeUpstream({ expectedKey: KEY });
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-history-${process.pid}`, AIRLOCK_VM_ASSETS: emptyVmAssets };
    const ui = await serveUi({ env, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    const host = ui.host;
    // The key (and the fake upstream's URL) straight through the services: the keys screen has its own e2e.
    await services?.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });

    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(host.url);
  });

  afterAll(async () => {
    await closeBrowser?.();
    if (services) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    for (const dir of [home, project, emptyVmAssets]) if (dir) await rm(dir, { recursive: true, force: true });
  });

  let firstRunId = '';

  it('New run: VM isolation is offered disabled with the setup check\'s reason', async () => {
    await page.getByRole('button', { name: /New run/ }).click();
    const vm = page.locator('#r-isolation option[value="vm"]');
    await expect.poll(() => vm.isDisabled(), { timeout: 120_000 }).toBe(true);
    expect(await vm.textContent()).toBe('Virtual machine (unavailable)');
    expect(await page.getByText(/Virtual machine isolation is not available here: .*not prepared/).count()).toBe(1);
    await shot(page, 'vm-disabled');
  });

  it('a finished run shows wipe proof, the files kept out, approvals, a blocked connection, and a verified audit log', async () => {
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: `curl -sS -m 10 -o /dev/null -w "%{http_code}" http://${BLOCKED_HOST}/ ; echo " net-tried"` } }] },
      { toolCalls: [{ name: 'write_file', input: { path: 'notes.txt', content: 'first run\n' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'Tried the network, wrote notes.' } }] },
    ]);
    await page.getByLabel('Project folder').fill(project);
    await page.getByLabel('Task').fill('Write notes and try the network');
    await page.locator('#r-provider').selectOption('anthropic');
    await page.getByLabel('Model', { exact: true }).fill('claude-sonnet-4-5');
    await page.getByLabel('Ask before each command').check();
    await page.getByLabel('Network').selectOption('allowlist');
    await page.getByLabel('Allowed domains').fill('allowed.airlock.test');
    await page.getByLabel('Token budget').fill('90000');
    await page.locator('#r-timeout').fill('20');
    await expect.poll(() => page.getByRole('region', { name: 'Excluded files' }).textContent(), { timeout: 15_000 }).toContain('.env');
    await page.getByRole('button', { name: 'Start run' }).click();

    const approval = page.getByRole('alertdialog', { name: 'Approve command' });
    await approval.waitFor({ timeout: 240_000 });
    expect(await approval.textContent()).toContain(BLOCKED_HOST);
    firstRunId = (await page.locator('.run-header + .row .mono').first().textContent()) ?? '';
    await approval.getByRole('button', { name: 'Approve' }).click();
    await expect.poll(() => page.locator('.run-header .badge').textContent(), { timeout: 180_000 }).toBe('done');

    const report = page.getByRole('region', { name: 'Run report' });
    await expect.poll(() => report.getByRole('status', { name: 'Audit log verified' }).textContent(), { timeout: 30_000 }).toMatch(/^✓ Audit log verified\d+ records, hash chain intact/);
    const wipe = await report.getByRole('region', { name: 'Sandbox wipe' }).textContent();
    expect(wipe).toContain('✓ Verified gone');
    expect(wipe).toMatch(/container/);
    expect(await report.getByRole('region', { name: 'Kept out of the sandbox' }).textContent()).toContain('.env');
    expect(await report.getByRole('region', { name: 'Approvals' }).textContent()).toMatch(new RegExp(`approved.*curl.*${BLOCKED_HOST.replace(/\./g, '\\.')}`));
    await expect.poll(() => report.getByRole('region', { name: 'Network' }).textContent(), { timeout: 20_000 }).toContain(`blocked ${BLOCKED_HOST}:80`);
    expect(await report.getByRole('region', { name: 'Network' }).textContent()).toContain('allowed.airlock.test');
    await shot(page, 'run-report');

    await report.getByRole('button', { name: 'Open audit log' }).click();
    await page.getByRole('heading', { name: 'Audit log' }).waitFor();
    await expect.poll(() => page.getByRole('status', { name: 'Audit log verified' }).textContent(), { timeout: 20_000 }).toContain('hash chain intact');
    const records = page.getByRole('region', { name: 'Audit records' });
    await expect.poll(() => records.textContent(), { timeout: 20_000 }).toContain('Sandbox wiped and verified gone');
    expect(await records.textContent()).toContain(`Blocked a connection to ${BLOCKED_HOST}:80`);
    expect(await records.textContent()).toContain('Left out of the copy: .env');
    await shot(page, 'audit');
    await records.locator('tr[data-type="wipe"]').click();
    expect(await records.locator('pre').first().textContent()).toContain('"verified": true');
  });

  it('Run again from History: the form is filled with the same settings and the second run completes with them', async () => {
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'notes.txt', content: 'second run\n' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'Second run done.' } }] },
    ]);
    await page.getByRole('button', { name: /History/ }).click();
    const row = page.locator(`tr[data-run="${firstRunId}"]`);
    await row.getByRole('button', { name: 'Run again' }).click();
    await page.getByRole('heading', { name: 'New run' }).waitFor();
    expect(await page.getByRole('status').filter({ hasText: 'Filled in from run' }).textContent()).toContain(firstRunId);
    expect(await page.getByLabel('Project folder').inputValue()).toBe(project);
    expect(await page.getByLabel('Task').inputValue()).toBe('Write notes and try the network');
    expect(await page.locator('#r-provider').inputValue()).toBe('anthropic');
    expect(await page.getByLabel('Model', { exact: true }).inputValue()).toBe('claude-sonnet-4-5');
    expect(await page.getByLabel('Ask before each command').isChecked()).toBe(true);
    expect(await page.locator('#r-isolation').inputValue()).toBe('container');
    expect(await page.getByLabel('Network').inputValue()).toBe('allowlist');
    expect(await page.getByLabel('Allowed domains').inputValue()).toBe('allowed.airlock.test');
    expect(await page.getByLabel('Token budget').inputValue()).toBe('90000');
    expect(await page.locator('#r-timeout').inputValue()).toBe('20');
    // The folder is now among the recent projects.
    expect(await page.getByRole('group', { name: 'Recent projects' }).textContent()).toContain(project.split('/').pop());
    await expect.poll(() => page.getByRole('region', { name: 'Excluded files' }).textContent(), { timeout: 15_000 }).toContain('.env');
    await shot(page, 'rerun-form');

    // Leaving the form and coming back keeps the draft.
    await page.getByRole('button', { name: /History/ }).click();
    await page.getByRole('button', { name: /New run/ }).click();
    expect(await page.getByLabel('Task').inputValue()).toBe('Write notes and try the network');

    await page.getByRole('button', { name: 'Start run' }).click();
    await expect.poll(() => page.locator('.run-header .badge').textContent(), { timeout: 240_000 }).toBe('done');
    const secondId = (await page.locator('.run-header + .row .mono').first().textContent()) ?? '';
    expect(secondId).not.toBe(firstRunId);
    const a = await services!.runs.get({ runId: firstRunId });
    const b = await services!.runs.get({ runId: secondId });
    const settings = (r: typeof a) => ({ projectDir: r.projectDir, task: r.task, agent: r.agent, provider: r.provider, model: r.model, approval: r.approval, isolation: r.isolation, network: r.network, allowlist: r.allowlist, limits: r.limits });
    expect(settings(b)).toEqual(settings(a));
    expect(a.limits).toEqual({ timeoutSec: 1200, budgetTokens: 90000 });
    expect(b.status).toBe('done');
    await shot(page, 'rerun-done');
    expect(await page.content()).not.toContain(KEY);
    expect(pageErrors).toEqual([]);
  });
});
