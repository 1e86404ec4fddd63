import { createHash } from 'node:crypto';
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
import { serveUi } from './support/serve-ui';
import { git, gitProject } from './support/git-project';
import { ensureBuiltRenderer } from './support/built-renderer';

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const KEY = `sk-ant-e2e-${'a9b1'.repeat(6)}-APLY`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => `${f(i + 1)}\n`).join('');
/** 30 lines; the run edits lines 3 (and adds 3b), 15 and 28: three hunks. */
const BIG = lines(30, (i) => `line ${i}`);
const BIG_RUN = BIG.replace('line 3\n', 'line 3 (agent)\nline 3b\n').replace('line 15\n', 'line 15 (agent)\n').replace('line 28\n', 'line 28 (agent)\n');
const CONFLICT = 'value = 1\n';

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `apply-${name}.png`), fullPage: true });
}


describe.skipIf(!docker.ok || !chromium.ok)('review and apply like a git client (Chromium, real core, Docker, fake upstream)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let host: HostServer;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let runId = '';
  const pageErrors: string[] = [];
  const serviceName = `airlock-e2e-apply-${process.pid}`;

  const openReview = async () => {
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${runId}"]`).click();
    await page.getByRole('button', { name: 'Review & apply' }).click();
    await page.locator('.file-row[data-path="src/big.txt"]').waitFor();
  };
  /** The Apply button, once the host has rendered the current selection. */
  const applyButton = () => page.getByRole('button', { name: /^Apply \d+ file/ });
  const diff = () => page.getByLabel('Diff of src/big.txt');

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-apply-', { 'src/big.txt': BIG, 'src/conflict.txt': CONFLICT }, { name: 'Apply Person', email: 'apply@example.invalid' });

    upstream = await startFakeUpstream({ expectedKey: KEY });
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'src/big.txt', content: BIG_RUN } }], usage: { input: 100, output: 20 } },
      { toolCalls: [{ name: 'write_file', input: { path: 'src/conflict.txt', content: 'value = 2 // run\n' } }], usage: { input: 110, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Edited two files.' } }], usage: { input: 120, output: 10 } },
    ]);

    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName };
    const ui = await serveUi({ env, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    host = ui.host;
    const s = services as AirlockServices;
    await s.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });
    // The run itself is the UI's business elsewhere (ui-run.test.ts); here it only makes a result to review.
    runId = (await s.runs.start({ projectDir: project, task: 'Edit two files', agent: 'builtin', provider: 'anthropic', model: 'claude-sonnet-4-5', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 600 } })).id;
    await vi.waitFor(async () => expect((await s.runs.get({ runId })).status).toBe('done'), { timeout: 240_000, interval: 500 });

    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.goto(host.url);
  }, 300_000);

  afterAll(async () => {
    await closeBrowser?.();
    if (services && keychain.ok) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('applies two hunks and not one line of a third to a branch with a custom message, authored by the project identity', async () => {
    await openReview();
    await page.locator('.file-row[data-path="src/big.txt"] .tree-file').click();
    await expect.poll(() => diff().textContent(), { timeout: 20_000 }).toContain('line 28 (agent)');
    // Leave out the middle hunk, and the added "line 3b" (new line 4) of the first.
    await diff().getByLabel('hunk 2', { exact: true }).uncheck();
    await diff().getByLabel('line +4', { exact: true }).uncheck();
    await page.getByLabel('apply src/conflict.txt').uncheck();
    await expect.poll(() => applyButton().textContent()).toBe('Apply 1 file, 1 in part');
    await page.locator('.patch-preview summary').click();
    const shown = page.getByLabel('Patch to apply');
    await expect.poll(() => shown.textContent(), { timeout: 20_000 }).toContain('+line 28 (agent)');
    const shownText = (await shown.textContent()) ?? '';
    expect(shownText).not.toContain('line 15 (agent)');
    expect(shownText).not.toContain('+line 3b');
    // What is shown is exactly the host's rendering of this selection.
    const host = await (services as AirlockServices).diffs.preview({ runId, files: ['src/big.txt'], selection: [{ path: 'src/big.txt', hunks: [2], lines: ['-3', '+3'] }] });
    expect(shownText).toBe(host.text);
    expect(await page.getByLabel('Selection digest').textContent()).toBe(`${host.sha256.slice(0, 16)}…`);
    await shot(page, '01-hunks');

    await page.getByLabel('New branch with a commit').check();
    // The message starts as the agent's summary, the task in its body.
    expect(await page.getByLabel('Commit message').inputValue()).toBe('Edited two files.\n\nTask: Edit two files');
    await page.getByLabel('Branch name').fill('airlock/two-hunks');
    await page.getByLabel('Commit message').fill('Take two hunks\n\nThe middle one stays out.');
    await applyButton().click();
    await expect.poll(() => page.getByRole('status', { name: 'Apply result' }).textContent(), { timeout: 20_000 }).toContain('on branch airlock/two-hunks');
    // The selection stays as it was applied (the run record's refetch does not reset it).
    expect(await applyButton().textContent()).toBe('Apply 1 file, 1 in part');
    await shot(page, '02-branch');

    const show = await git(project, 'show', '--format=%an <%ae>%n%B', 'airlock/two-hunks');
    expect(show).toMatch(/^Apply Person <apply@example\.invalid>\nTake two hunks\n\nThe middle one stays out\.\n/);
    expect(show.match(/^@@ /gm)).toHaveLength(2);
    expect(show).toContain('+line 3 (agent)');
    expect(show).toContain('+line 28 (agent)');
    expect(show).not.toContain('line 15 (agent)');
    expect(show).not.toContain('line 3b');
    expect(await git(project, 'show', 'airlock/two-hunks:src/big.txt')).toBe(BIG.replace('line 3\n', 'line 3 (agent)\n').replace('line 28\n', 'line 28 (agent)\n'));
    // The working tree and the current branch are untouched.
    expect(await readFile(join(project, 'src', 'big.txt'), 'utf8')).toBe(BIG);
    expect((await git(project, 'rev-parse', '--abbrev-ref', 'HEAD')).trim()).toBe('main');
    // The apply log records the selection and its digest.
    const log = (await readFile(join(home, 'runs', runId, 'apply.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { data: Record<string, unknown> });
    expect(log.at(-1)?.data).toMatchObject({ mode: 'branch', branch: 'airlock/two-hunks', patchSha256: host.sha256, selection: [{ path: 'src/big.txt', hunks: [2], lines: ['-3', '+3'] }] });
  });

  it('applies whole or nothing: a conflict writes nothing (git agrees) and opens the merge view; the rest only on request; resolved, the banner updates; again, nothing to apply', async () => {
    await writeFile(join(project, 'src', 'conflict.txt'), 'value = 3 // mine\n');
    const statusBefore = await git(project, 'status', '--porcelain', '-uall');
    const diffBefore = await git(project, 'diff');
    expect(statusBefore).toBe(' M src/conflict.txt\n');
    await page.reload();
    await openReview();
    await expect.poll(() => applyButton().textContent()).toBe('Apply 2 files');
    await applyButton().click();
    const outcome = page.getByRole('status', { name: 'Apply result' });
    await expect.poll(() => outcome.textContent(), { timeout: 20_000 }).toContain('Nothing was written.');
    expect(await outcome.textContent()).toContain('1 file of this change conflicts with edits in your project');
    // git sees only the user's own edit: not one byte of the run's was written.
    expect(await git(project, 'status', '--porcelain', '-uall')).toBe(statusBefore);
    expect(await git(project, 'diff')).toBe(diffBefore);
    expect(await readFile(join(project, 'src', 'big.txt'), 'utf8')).toBe(BIG);
    // The conflict opens first, in the merge view.
    const merge = page.getByRole('region', { name: 'Resolve src/conflict.txt' });
    await expect.poll(() => merge.textContent(), { timeout: 20_000 }).toContain('value = 3 // mine');
    expect(await merge.textContent()).toContain('value = 2 // run');
    // The partial apply is there, and says what it leaves inconsistent.
    const leaves = await outcome.getByLabel('What a partial apply leaves').textContent();
    expect(leaves).toContain('(src/big.txt) leaves src/conflict.txt as it is in your project, without the run\'s changes');
    await shot(page, '03-nothing-written');

    await outcome.getByRole('button', { name: "Apply the 1 file that doesn't conflict" }).click();
    await expect.poll(() => outcome.textContent(), { timeout: 20_000 }).toContain('Applied 1 file.');
    expect(await outcome.textContent()).toContain('1 file not applied');
    expect(await readFile(join(project, 'src', 'big.txt'), 'utf8')).toBe(BIG_RUN);
    expect(await readFile(join(project, 'src', 'conflict.txt'), 'utf8')).toBe('value = 3 // mine\n');
    await merge.waitFor();
    await merge.getByRole('button', { name: 'Both' }).click();
    expect(await merge.getByLabel('Merged result').inputValue()).toBe('value = 3 // mine\nvalue = 2 // run\n');

    // The user edits the file again before saving: nothing is written, the view reloads.
    await writeFile(join(project, 'src', 'conflict.txt'), 'value = 4 // mine again\n');
    await merge.getByRole('button', { name: 'Save resolution' }).click();
    await expect.poll(() => merge.getByRole('alert').textContent(), { timeout: 20_000 }).toContain('changed again');
    await expect.poll(() => merge.textContent()).toContain('value = 4 // mine again');
    expect(await readFile(join(project, 'src', 'conflict.txt'), 'utf8')).toBe('value = 4 // mine again\n');
    await shot(page, '04-changed-again');

    await merge.getByRole('button', { name: 'Both' }).click();
    await merge.getByLabel('Merged result').fill('value = 4 // mine again\nvalue = 2 // run, kept by hand\n');
    await merge.getByRole('button', { name: 'Save resolution' }).click();
    await page.getByLabel('src/conflict.txt resolved').waitFor({ timeout: 20_000 });
    // The banner follows: no open conflict is left.
    await expect.poll(() => outcome.getByLabel('All resolved').textContent()).toContain('All conflicts resolved.');
    expect(await outcome.locator('.banner.error').count()).toBe(0);
    expect(await readFile(join(project, 'src', 'conflict.txt'), 'utf8')).toBe('value = 4 // mine again\nvalue = 2 // run, kept by hand\n');
    const log = (await readFile(join(home, 'runs', runId, 'apply.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { data: Record<string, unknown> });
    expect(log.at(-1)?.data).toMatchObject({ mode: 'resolve', applied: ['src/conflict.txt'] });
    expect(log.at(-3)?.data).toMatchObject({ mode: 'working-tree', applied: [], held: ['src/big.txt'] });
    await shot(page, '05-resolved');

    // Applying the same result again: the project has it all (the resolution counts), so nothing is written.
    const stateBefore = await git(project, 'diff');
    await applyButton().click();
    await expect.poll(() => outcome.textContent(), { timeout: 20_000 }).toContain('Nothing to apply: your project already has these 2 files.');
    const nothing = page.getByRole('button', { name: 'Nothing to apply' });
    expect(await nothing.isDisabled()).toBe(true);
    expect(await git(project, 'diff')).toBe(stateBefore);
    await shot(page, '06-nothing-to-apply');
    await page.setViewportSize({ width: 800, height: 600 });
    await shot(page, '06-nothing-to-apply-800');
    await page.setViewportSize({ width: 1360, height: 900 });
    // Back to the committed files for the next test.
    await git(project, 'checkout', '--', 'src/big.txt', 'src/conflict.txt');
  });

  it('downloads the patch of a selection: the bytes are the host patch, with its SHA-256', async () => {
    await page.reload();
    await openReview();
    await page.getByRole('button', { name: 'Select none' }).click();
    await page.locator('.file-row[data-path="src/big.txt"] .tree-file').click();
    await expect.poll(() => diff().textContent(), { timeout: 20_000 }).toContain('line 15 (agent)');
    await diff().getByLabel('hunk 2', { exact: true }).check();
    await expect.poll(() => applyButton().textContent()).toBe('Apply 1 file, 1 in part');
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download patch' }).click()]);
    expect(download.suggestedFilename()).toBe(`airlock-${runId}.patch`);
    const bytes = await readFile((await download.path()) as string);
    const hostPatch = await (services as AirlockServices).diffs.preview({ runId, files: ['src/big.txt'], selection: [{ path: 'src/big.txt', hunks: [1] }] });
    expect(bytes.toString('utf8')).toBe(hostPatch.text);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(hostPatch.sha256);
    await expect.poll(() => page.getByRole('status', { name: 'Export result' }).textContent()).toContain(hostPatch.sha256.slice(0, 16));
    await shot(page, '07-download');
    // git takes it as it is (the project's big.txt is still the base).
    await writeFile(join(home, 'dl.patch'), bytes);
    await git(project, 'apply', '--check', join(home, 'dl.patch'));
    const log = (await readFile(join(home, 'runs', runId, 'apply.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as { data: Record<string, unknown> });
    expect(log.at(-1)?.data).toMatchObject({ mode: 'patch', target: 'download', patchSha256: hostPatch.sha256 });
    expect(pageErrors).toEqual([]);
  });

  it('every screen has an address: reload stays on Review, Back and Forward move between screens inside the app', async () => {
    await openReview();
    const origin = new URL(host.url).origin;
    const fragment = () => new URL(page.url()).hash;
    expect(fragment()).toBe(`#/review/${runId}`);
    await page.reload();
    await page.locator('.file-row[data-path="src/big.txt"]').waitFor();
    expect(fragment()).toBe(`#/review/${runId}`);
    // Back: the run's screen, then History, all on the app's own page.
    await page.goBack();
    await page.getByRole('button', { name: 'Review & apply' }).waitFor();
    expect(fragment()).toBe(`#/run/${runId}`);
    await page.goBack();
    await page.locator(`tr[data-run="${runId}"]`).waitFor();
    expect(fragment()).toBe('#/history');
    expect(new URL(page.url()).origin).toBe(origin);
    await page.goForward();
    await page.getByRole('button', { name: 'Review & apply' }).waitFor();
    // A link to a review opens it in a fresh page too.
    const other = await page.context().newPage();
    await other.goto(`${host.url}#/review/${runId}`);
    await other.locator('.file-row[data-path="src/big.txt"]').waitFor();
    await other.close();
    expect(pageErrors).toEqual([]);
  });
});
