import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import type { HostServer } from '../../core/host/host-server';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { serveUi } from './support/serve-ui';
import { git, gitProject } from './support/git-project';

/*
 * Review of a 2-turn thread in Chromium against the real core and Docker (docs/architecture.md §11
 * "Picking hunks and lines", "Resolving a conflict in place"; §15): lines picked in the split
 * layout applied to a branch, and a conflict of the whole thread resolved in the merge view.
 */

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const KEY = `sk-ant-e2e-${'c3d4'.repeat(6)}-THRD`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => `${f(i + 1)}\n`).join('');
/** 20 lines: turn 1 edits line 3 and adds 3b after it, turn 2 edits line 15. */
const LINES = lines(20, (i) => `line ${i}`);
const LINES_T1 = LINES.replace('line 3\n', 'line 3 (turn 1)\nline 3b\n');
const LINES_T2 = LINES_T1.replace('line 15\n', 'line 15 (turn 2)\n');
/** Turn 1 edits "two", turn 2 "eight"; the user edits "two" in the project meanwhile. */
const MERGE = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n';
const MERGE_T1 = MERGE.replace('two\n', 'two (turn 1)\n');
const MERGE_T2 = MERGE_T1.replace('eight\n', 'eight (turn 2)\n');
const MINE = MERGE.replace('two\n', 'two (mine)\n');

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `thread-review-${name}.png`), fullPage: true });
}


describe.skipIf(!docker.ok || !chromium.ok)('reviewing a thread: split-layout lines and a thread-scope merge (Chromium, real core, Docker, fake upstream)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let host: HostServer;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let first = '';
  let followUp = '';
  const pageErrors: string[] = [];
  const serviceName = `airlock-e2e-thread-review-${process.pid}`;

  /** Review of the follow-up turn, scope "The whole thread". */
  const openThreadReview = async () => {
    await page.goto(host.url);
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${followUp}"]`).click();
    await page.getByRole('button', { name: 'Review & apply' }).click();
    await page.locator('.file-row[data-path="src/merge.txt"]').waitFor();
    await page.getByLabel(/The whole thread/).check();
    // Only the thread's total has turn 1's change to lines.txt.
    await page.locator('.file-row[data-path="src/lines.txt"]').waitFor();
  };
  const applyButton = () => page.getByRole('button', { name: /^Apply \d+ file/ });
  const diff = () => page.getByLabel('Diff of src/lines.txt');
  const applyLog = async (runId: string) => (await readFile(join(home, 'runs', runId, 'apply.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { data: Record<string, unknown> });

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-thread-', { 'src/lines.txt': LINES, 'src/merge.txt': MERGE }, { name: 'Thread Person', email: 'thread@example.invalid' });

    upstream = await startFakeUpstream({ expectedKey: KEY });
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName };
    const ui = await serveUi({ env, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    host = ui.host;
    const s = services as AirlockServices;
    await s.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });
    // The thread is made through the core (the Continue box is ui-run.test.ts's business); review is the UI's here.
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'src/lines.txt', content: LINES_T1 } }], usage: { input: 100, output: 20 } },
      { toolCalls: [{ name: 'write_file', input: { path: 'src/merge.txt', content: MERGE_T1 } }], usage: { input: 110, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Turn one.' } }], usage: { input: 120, output: 10 } },
    ]);
    first = (await s.runs.start({ projectDir: project, task: 'Turn one', agent: 'builtin', provider: 'anthropic', model: 'claude-sonnet-4-5', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 600 } })).id;
    await vi.waitFor(async () => expect((await s.runs.get({ runId: first })).status).toBe('done'), { timeout: 240_000, interval: 500 });
    // Continue needs the parent's sandbox verified gone.
    await vi.waitFor(async () => expect((await s.runs.get({ runId: first })).wipe?.verified).toBe(true), { timeout: 60_000, interval: 500 });
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'src/lines.txt', content: LINES_T2 } }], usage: { input: 200, output: 20 } },
      { toolCalls: [{ name: 'write_file', input: { path: 'src/merge.txt', content: MERGE_T2 } }], usage: { input: 210, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Turn two.' } }], usage: { input: 220, output: 10 } },
    ]);
    followUp = (await s.runs.continue({ runId: first, task: 'Turn two' })).id;
    await vi.waitFor(async () => expect((await s.runs.get({ runId: followUp })).status).toBe('done'), { timeout: 240_000, interval: 500 });
    expect((await s.runs.get({ runId: followUp })).thread).toMatchObject({ rootRunId: first, parentRunId: first, turn: 2 });

    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
  }, 600_000);

  afterAll(async () => {
    await closeBrowser?.();
    if (services && keychain.ok) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('picks lines in the split layout (removals left, additions right) and applies exactly those to a branch', async () => {
    await openThreadReview();
    await page.getByRole('button', { name: 'Select none' }).click();
    await page.locator('.file-row[data-path="src/lines.txt"] .tree-file').click();
    await expect.poll(() => diff().textContent(), { timeout: 20_000 }).toContain('line 15 (turn 2)');
    await page.getByRole('button', { name: 'Split' }).click();
    // Thread total of lines.txt: hunk 1 is turn 1's (-3, +3, +4 "line 3b"), hunk 2 turn 2's (-15, +16).
    const removed = diff().getByLabel('line -3', { exact: true });
    const added = diff().getByLabel('line +4', { exact: true });
    await removed.waitFor();
    // The removal is ticked in the left column, the addition in the right one.
    expect(await removed.evaluate((el) => (el.closest('td') as HTMLTableCellElement).cellIndex)).toBe(0);
    expect(await added.evaluate((el) => (el.closest('td') as HTMLTableCellElement).cellIndex)).toBe(3);
    // Take turn 1's edit of line 3 but not the added "line 3b", and of turn 2's hunk only the removal of line 15.
    await page.getByLabel('apply src/lines.txt').check();
    await added.uncheck();
    await diff().getByLabel('line +16', { exact: true }).uncheck();
    await expect.poll(() => applyButton().textContent()).toBe('Apply 1 file, 1 in part');
    const selection = [{ path: 'src/lines.txt', lines: ['-3', '+3', '-15'] }];
    const hostPatch = await (services as AirlockServices).diffs.preview({ runId: followUp, scope: 'thread', files: ['src/lines.txt'], selection });
    await expect.poll(() => page.getByLabel('Selection digest').textContent(), { timeout: 20_000 }).toBe(`${hostPatch.sha256.slice(0, 16)}…`);
    await page.locator('.patch-preview summary').click();
    expect(await page.getByLabel('Patch to apply').textContent()).toBe(hostPatch.text);
    await shot(page, '01-split-lines');

    // The unified layout shows the same ticks, and the digest does not change.
    await page.getByRole('button', { name: 'Unified' }).click();
    expect(await diff().getByLabel('line +4', { exact: true }).isChecked()).toBe(false);
    expect(await diff().getByLabel('line +16', { exact: true }).isChecked()).toBe(false);
    expect(await diff().getByLabel('line -15', { exact: true }).isChecked()).toBe(true);
    expect(await page.getByLabel('Selection digest').textContent()).toBe(`${hostPatch.sha256.slice(0, 16)}…`);
    await page.getByRole('button', { name: 'Split' }).click();

    await page.getByLabel('New branch with a commit').check();
    await page.getByLabel('Branch name').fill('airlock/split-lines');
    await applyButton().click();
    await expect.poll(() => page.getByRole('status', { name: 'Apply result' }).textContent(), { timeout: 20_000 }).toContain('on branch airlock/split-lines');
    await shot(page, '02-split-applied');

    // git: the branch has exactly the picked lines; line 15 is gone, its replacement was not taken.
    expect(await git(project, 'show', 'airlock/split-lines:src/lines.txt')).toBe(LINES.replace('line 3\n', 'line 3 (turn 1)\n').replace('line 15\n', ''));
    expect(await git(project, 'diff', '--name-only', 'main', 'airlock/split-lines')).toBe('src/lines.txt\n');
    expect(await readFile(join(project, 'src', 'lines.txt'), 'utf8')).toBe(LINES);
    const log = await applyLog(followUp);
    expect(log.at(-1)?.data).toMatchObject({ mode: 'branch', scope: 'thread', patchSha256: hostPatch.sha256, selection });
  });

  it("resolves a conflict of the whole thread in the merge view: base is where the thread started, the run's side is the total", async () => {
    await writeFile(join(project, 'src', 'merge.txt'), MINE);
    await openThreadReview();
    await page.getByRole('button', { name: 'Select none' }).click();
    await page.getByLabel('apply src/merge.txt').check();
    await page.getByLabel(/Working tree/).check();
    await applyButton().click();
    const outcome = page.getByRole('status', { name: 'Apply result' });
    await expect.poll(() => outcome.textContent(), { timeout: 20_000 }).toContain('Nothing was written. 1 file of this change conflicts');
    await outcome.getByRole('button', { name: 'Resolve' }).click();
    const merge = page.getByRole('region', { name: 'Resolve src/merge.txt' });
    await expect.poll(() => merge.textContent(), { timeout: 20_000 }).toContain('two (mine)');
    expect(await merge.getByLabel('Merge scope').textContent()).toContain('whole thread');
    const conflict = merge.getByLabel('Conflict 1');
    // Base: the file as turn 1 read it ("two"), not turn 1's result, which is the run's side with turn 2's.
    expect(await conflict.locator('.merge-sides > div').nth(1).textContent()).toBe('Base (when the thread started)two\n');
    expect(await conflict.locator('.merge-sides > div').nth(2).textContent()).toBe("The whole thread's resulttwo (turn 1)\n");
    expect(await merge.getByRole('group', { name: /Choose for conflict/ }).count()).toBe(1);
    await merge.getByRole('button', { name: 'Both' }).click();
    const merged = MINE.replace('two (mine)\n', 'two (mine)\ntwo (turn 1)\n').replace('eight\n', 'eight (turn 2)\n');
    expect(await merge.getByLabel('Merged result').inputValue()).toBe(merged);
    await shot(page, '03-thread-merge');

    await merge.getByRole('button', { name: 'Save resolution' }).click();
    await page.getByLabel('src/merge.txt resolved').waitFor({ timeout: 20_000 });
    expect(await readFile(join(project, 'src', 'merge.txt'), 'utf8')).toBe(merged);
    expect(await git(project, 'diff', '--stat', '--', 'src/merge.txt')).toContain('src/merge.txt');
    await shot(page, '04-thread-resolved');
    const log = await applyLog(followUp);
    expect(log.at(-1)?.data).toMatchObject({ mode: 'resolve', scope: 'thread', applied: ['src/merge.txt'], resolved: { path: 'src/merge.txt' } });
    expect(await page.content()).not.toContain(KEY);
    expect(pageErrors).toEqual([]);
  });
});
