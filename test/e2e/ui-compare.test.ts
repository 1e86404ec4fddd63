import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { StartAttemptsInput } from '../../contracts/attempts';
import type { AirlockServices } from '../../core/api/services';
import type { HostServer } from '../../core/host/host-server';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { polishShot } from './support/polish-shot';
import { serveUi } from './support/serve-ui';
import { gitProject } from './support/git-project';
import { ensureBuiltRenderer } from './support/built-renderer';

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');

const KEY = `sk-ant-e2e-${'c0m9'.repeat(6)}-CMPR`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

/**
 * The compare view (docs/architecture.md §18) in Chromium against the real core: three attempts of one
 * task, a check the host ran (one passes, one fails though its agent says "tests passed", one passes
 * because it rewrote the check's script and is marked unproven), each diff one click away, one attempt
 * applied through Review (exactly its bytes), the others' sandboxes verified gone, and the export.
 */
describe.skipIf(!docker.ok || !chromium.ok)('compare attempts in the UI (Chromium, real core, Docker, fake upstream)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let host: HostServer;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-compare-', { 'answer.txt': '1\n', 'check.sh': 'grep -qx 42 answer.txt || { echo "expected 42, got $(cat answer.txt)"; exit 3; }\n' }, { name: 'Compare Person', email: 'compare@example.invalid' });
    upstream = await startFakeUpstream({ expectedKey: KEY });
    upstream.setScriptFor('claude-opus-4-5', [{ toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '42\n' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'wrote 42' } }] }]);
    upstream.setScriptFor('claude-sonnet-4-5', [
      { toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '41\n' } }] },
      { toolCalls: [{ name: 'run_command', input: { command: "echo 'all tests passed'" } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'All tests passed.' } }] },
    ]);
    // The cheat: the check's own script rewritten to always pass.
    upstream.setScriptFor('claude-haiku-4-5', [
      { toolCalls: [{ name: 'write_file', input: { path: 'check.sh', content: 'exit 0\n' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'Fixed: the check passes.' } }] },
    ]);
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-compare-${process.pid}` };
    const ui = await serveUi({ env, rendererDir, warm: false });
    stopServe = ui.stop;
    services = ui.services;
    host = ui.host;
    const s = services as AirlockServices;
    await s.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: 'session' });
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(host.url);
  }, 300_000);

  afterAll(async () => {
    await closeBrowser?.();
    await stopServe?.();
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('shows the host-measured checks side by side, opens a diff, applies one attempt and exports the report', async () => {
    const s = services as AirlockServices;
    const group = await s.attempts.start(
      StartAttemptsInput.parse({
        run: { projectDir: project, task: 'Make check.sh pass', provider: 'anthropic', model: 'claude-opus-4-5', check: { command: 'bash check.sh' }, limits: { timeoutSec: 600 } },
        attempts: [{ agent: 'builtin', model: 'claude-opus-4-5' }, { agent: 'builtin', model: 'claude-sonnet-4-5' }, { agent: 'builtin', model: 'claude-haiku-4-5' }],
      }),
    );
    const [good, bad, cheat] = group.attempts.map((a) => a.runId) as [string, string, string];
    await vi.waitFor(async () => {
      for (const id of [good, bad, cheat]) expect(['done', 'failed']).toContain((await s.runs.get({ runId: id })).status);
    }, { timeout: 300_000, interval: 500 });

    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${bad}"]`).getByRole('button', { name: `Compare attempts of ${group.id}` }).click();
    const card = (runId: string) => page.locator(`article.compare-card[data-run="${runId}"]`);
    await card(good).getByLabel('check passed').waitFor({ timeout: 30_000 });
    // What the view shows is the host's record: exit 3 from check.sh, not the agent's "all tests passed".
    expect(await card(bad).getByLabel('check failed (exit 3)').count()).toBe(1);
    const c = await s.attempts.compare({ groupId: group.id });
    expect(c.attempts.map((a) => a.check?.exitCode)).toEqual([0, 3, 0]);
    expect(await card(good).getByLabel('files changed').textContent()).toBe('1');
    // The attempt that rewrote the check passes it, and is shown as unproven, naming the file.
    expect(await card(cheat).getByLabel('check passed, unproven').count()).toBe(1);
    expect(await card(good).getByLabel('check passed, unproven').count()).toBe(0);
    expect(await card(cheat).locator('[data-check-file]').textContent()).toContain('check.sh');
    expect(c.attempts[2]?.checkFiles).toEqual([{ path: 'check.sh', reason: 'named in the check command' }]);
    await page.screenshot({ path: join(SHOTS, 'compare-01-side-by-side.png'), fullPage: true });

    // Each diff is one click away.
    await card(bad).getByRole('button', { name: 'Review and apply' }).click();
    await page.locator('.file-row[data-path="answer.txt"]').waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${good}"]`).getByRole('button', { name: `Compare attempts of ${group.id}` }).click();

    // Applying goes through Review (files, target, the reviewed digest), like any run.
    await card(good).getByRole('button', { name: 'Review and apply' }).click();
    await page.getByRole('note', { name: 'Attempt' }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: /^Apply 1 file/ }).click();
    await expect.poll(async () => (await s.attempts.compare({ groupId: group.id })).chosen?.runId, { timeout: 60_000 }).toBe(good);
    expect(await readFile(join(project, 'answer.txt'), 'utf8')).toBe('42\n');
    expect((await s.attempts.compare({ groupId: group.id })).chosen).toMatchObject({ runId: good, others: [{ runId: bad, verified: true, leftovers: [] }, { runId: cheat, verified: true, leftovers: [] }] });
    await page.getByRole('note', { name: 'Attempt' }).getByRole('button', { name: 'Compare attempts' }).click();
    await expect.poll(() => page.getByRole('status', { name: 'Apply result' }).textContent(), { timeout: 30_000 }).toContain('Other sandboxes verified gone');
    // A success is framed in the theme's "ok" colour, never the amber that asks the user to look (polish list).
    expect(await page.getByRole('status', { name: 'Apply result' }).evaluate((el) => {
      const probe = document.createElement('span');
      probe.style.color = 'var(--ok)';
      document.body.append(probe);
      const ok = getComputedStyle(probe).color;
      probe.remove();
      return getComputedStyle(el).borderTopColor === ok;
    })).toBe(true);
    await polishShot(page, 'compare-applied-success');
    await expect.poll(() => card(good).getByText('Applied', { exact: true }).count()).toBe(1);

    await page.getByRole('button', { name: 'Export Markdown' }).click();
    await expect.poll(() => page.getByLabel('Exported report').textContent(), { timeout: 20_000 }).toContain(`# Attempt group ${group.id}`);
    const md = (await page.getByLabel('Exported report').textContent()) ?? '';
    expect(md).toContain('| 2 | builtin | claude-sonnet-4-5 | done | failed (exit 3');
    expect(md).toContain('| 1 | builtin | claude-opus-4-5 | done (applied) | passed (exit 0');
    expect(md).toContain('UNPROVEN: the attempt changed check.sh');
    await page.screenshot({ path: join(SHOTS, 'compare-02-applied.png'), fullPage: true });
    expect(pageErrors).toEqual([]);
  });
});
