/**
 * The New run form can give a run everything `airlock run` can (issue 41, "Parity"): the egress
 * gateway's secrets, rules and approval mode, the check, and attempts (agents × models) compared side
 * by side; it shows the CLI line for the same run. Chromium against the real core served by
 * `airlock serve`, a real engine, a real keychain, the scripted upstream.
 */
import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
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

const KEY = `sk-ant-e2e-${'f0rm'.repeat(6)}-PRTY`;
const SECRET_VALUE = `canary-${'5ecr'.repeat(8)}`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) out.push(join(e.parentPath, e.name));
  return out;
}

describe.skipIf(!docker.ok || !chromium.ok || !keychain.ok)('the New run form has what the CLI has (Chromium, real core, Docker, keychain)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const pageErrors: string[] = [];
  const serviceName = `airlock-e2e-parity-${process.pid}`;

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-parity-', { 'answer.txt': '1\n', 'check.sh': 'grep -qx 42 answer.txt\n' }, { name: 'Parity Person', email: 'parity@example.invalid' });
    upstream = await startFakeUpstream({ expectedKey: KEY });
    upstream.setScriptFor('claude-opus-4-5', [{ toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '42\n' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'wrote 42' } }] }]);
    // One script per model, used once: the gateway run has its own.
    upstream.setScriptFor('claude-haiku-4-5', [{ toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '42\n' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'wrote 42' } }] }]);
    upstream.setScriptFor('claude-sonnet-4-5', [{ toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '41\n' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'wrote 41' } }] }]);
    const ui = await serveUi({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName }, rendererDir, warm: false });
    stopServe = ui.stop;
    services = ui.services;
    await ui.services.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: 'keychain' });
    await ui.services.secrets.set({ name: 'deploy', hosts: ['api.parity.invalid'], forms: ['bearer'], value: SECRET_VALUE });
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    await page.setViewportSize({ width: 1280, height: 800 });
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(ui.host.url);
  }, 300_000);

  afterAll(async () => {
    await closeBrowser?.();
    if (services) {
      await services.secrets.remove({ name: 'deploy' }).catch(() => undefined);
      await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    }
    await stopServe?.();
    await upstream?.close();
    for (const d of [home, project]) if (d) await rm(d, { recursive: true, force: true });
  });

  const fillBasics = async (task: string, model: string) => {
    await page.getByRole('button', { name: /New run/ }).click();
    await page.getByLabel('Project folder').fill(project);
    await page.getByLabel('Task').fill(task);
    await page.locator('#r-provider').selectOption('anthropic');
    await page.getByLabel('Model', { exact: true }).fill(model);
  };

  it('starts a run with a secret, rules, the deny mode and a check, and shows the same run as a CLI line', async () => {
    await page.locator('.empty[aria-busy="true"]').waitFor({ state: 'detached', timeout: 120_000 });
    await fillBasics('Write 42', 'claude-haiku-4-5');
    await page.getByLabel('Network').selectOption('allowlist');
    await page.getByLabel('Allowed domains').fill('api.parity.invalid');
    const gateway = page.getByRole('group', { name: 'Gateway' });
    await gateway.getByLabel(/deploy/).check();
    await page.getByLabel(/Rules, one per line/).fill('api.parity.invalid read-only\napi.parity.invalid deny DELETE');
    await page.getByLabel('is refused at once (unattended runs)').check();
    await page.getByLabel('Check', { exact: true }).fill('bash check.sh');

    await page.getByText('The same run from the command line').click();
    const line = (await page.getByLabel('CLI command').textContent()) ?? '';
    expect(line).toContain("--network allowlist --allow api.parity.invalid --rule 'api.parity.invalid read-only' --rule 'api.parity.invalid deny DELETE' --secret deploy --network-approvals deny");
    expect(line).toContain("--check 'bash check.sh'");
    expect(await page.content()).not.toContain(SECRET_VALUE);
    // Start run stays in the window however long the form is (polish list: it sat below the fold).
    const startInView = async (height: number) => {
      const box = await page.getByRole('button', { name: 'Start run' }).boundingBox();
      expect(box && box.y + box.height).toBeLessThanOrEqual(height);
    };
    await startInView(800);
    await page.screenshot({ path: join(SHOTS, 'form-parity-gateway-1280x800.png') });
    await page.setViewportSize({ width: 800, height: 600 });
    await startInView(600);
    await page.screenshot({ path: join(SHOTS, 'form-parity-gateway-800x600.png') });
    // Nothing of the form is wider than the window at 800×600.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(800);
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.getByRole('button', { name: 'Start run' }).click();

    await page.waitForURL(/#\/run\//, { timeout: 60_000 });
    const runId = decodeURIComponent(page.url().split('#/run/')[1] ?? '').split('/')[0] ?? '';
    const s = services as AirlockServices;
    await vi.waitFor(async () => expect(['done', 'failed']).toContain((await s.runs.get({ runId })).status), { timeout: 300_000, interval: 500 });
    const run = await s.runs.get({ runId });
    expect(run).toMatchObject({ network: 'allowlist', allowlist: ['api.parity.invalid'], secrets: ['deploy'], egressRules: ['api.parity.invalid read-only', 'api.parity.invalid deny DELETE'], networkApprovals: 'deny', check: { command: 'bash check.sh', passed: true } });
    // The value stays in the keychain: no record, audit or transcript of the run holds it.
    for (const f of await filesUnder(home)) expect(await readFile(f, 'utf8').catch(() => ''), f).not.toContain(SECRET_VALUE);
  });

  it('starts an attempt group from the form and opens the comparison with the host-measured check', async () => {
    await fillBasics('Make check.sh pass', 'claude-opus-4-5');
    await page.getByLabel('Check', { exact: true }).fill('bash check.sh');
    await page.getByRole('button', { name: 'Compare attempts…' }).click();
    await page.getByLabel('Attempt 2 model').fill('claude-sonnet-4-5');
    await page.getByText('The same run from the command line').click();
    expect(await page.getByLabel('CLI command').textContent()).toContain('--attempts builtin:anthropic/claude-opus-4-5,builtin:anthropic/claude-sonnet-4-5');
    await page.getByRole('button', { name: 'Start run' }).click();

    await page.waitForURL(/#\/compare\//, { timeout: 60_000 });
    const groupId = decodeURIComponent(page.url().split('#/compare/')[1] ?? '');
    const s = services as AirlockServices;
    const group = (await s.attempts.list({})).find((g) => g.id === groupId);
    expect(group?.attempts.map((a) => `${a.provider}/${a.model}`)).toEqual(['anthropic/claude-opus-4-5', 'anthropic/claude-sonnet-4-5']);
    expect(group?.check).toBe('bash check.sh');
    const cards = page.locator('article.compare-card');
    await expect.poll(() => cards.count(), { timeout: 30_000 }).toBe(2);
    await vi.waitFor(async () => {
      const c = await s.attempts.compare({ groupId });
      expect(c.attempts.map((a) => [a.status, a.check?.exitCode])).toEqual([['done', 0], ['done', 1]]);
    }, { timeout: 400_000, interval: 1000 });
    // The page was open all along: it follows the attempts as they end.
    await cards.nth(0).getByLabel('check passed').waitFor({ timeout: 30_000 });
    await cards.nth(1).getByLabel(/check failed \(exit 1\)/).waitFor({ timeout: 30_000 });
    await page.screenshot({ path: join(SHOTS, 'form-parity-attempts-compare.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  }, 600_000);
});
