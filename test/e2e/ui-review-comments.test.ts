/**
 * Review that talks back (docs/architecture.md §11, "Comments to the agent"), in Chromium against the
 * real core, Docker and the scripted upstream: a comment on a line and a rejected hunk in Review, sent
 * with "Ask the agent to revise"; the follow-up's first model request quotes both at their file and
 * line, the rejected hunk is left out of apply, and the follow-up's Review shows the comments and what
 * changed since them.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
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
import { gitProject } from './support/git-project';
import { serveUi } from './support/serve-ui';

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const KEY = `sk-ant-e2e-${'9a8b'.repeat(6)}-CMNT`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const lines = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => `${f(i + 1)}\n`).join('');
/** 30 lines; turn 1 edits line 3 and line 28 (two hunks); turn 2 answers the comments. */
const BASE = lines(30, (i) => `line ${i}`);
const T1 = BASE.replace('line 3\n', 'line 3 (agent)\n').replace('line 28\n', 'line 28 (agent)\n');
const T2 = BASE.replace('line 3\n', 'line three (agent)\n');

describe.skipIf(!docker.ok || !chromium.ok)('review comments go back to the agent (Chromium, real core, Docker, fake upstream)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let host: HostServer;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let first = '';
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-comments-', { 'src/big.txt': BASE }, { name: 'Comment Person', email: 'comment@example.invalid' });
    upstream = await startFakeUpstream({ expectedKey: KEY });
    const ui = await serveUi({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-comments-${process.pid}` }, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    host = ui.host;
    const s = ui.services;
    await s.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'src/big.txt', content: T1 } }], usage: { input: 100, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Edited two lines.' } }], usage: { input: 110, output: 10 } },
      { toolCalls: [{ name: 'write_file', input: { path: 'src/big.txt', content: T2 } }], usage: { input: 200, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Answered the review.' } }], usage: { input: 210, output: 10 } },
    ]);
    first = (await s.runs.start({ projectDir: project, task: 'Edit two lines', agent: 'builtin', provider: 'anthropic', model: 'claude-sonnet-4-5', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 600 } })).id;
    await vi.waitFor(async () => expect((await s.runs.get({ runId: first })).wipe?.verified).toBe(true), { timeout: 240_000, interval: 500 });
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
    for (const d of [home, project]) if (d) await rm(d, { recursive: true, force: true });
  });

  it('a line comment and a rejected hunk become the follow-up\'s task, quoted at file and line; the next review shows what changed since', async () => {
    // The review's own address opens it directly.
    await page.goto(`${host.url}#/review/${first}`);
    await page.locator('.file-row[data-path="src/big.txt"] .tree-file').click();
    const diff = page.getByLabel('Diff of src/big.txt');
    await expect.poll(() => diff.textContent(), { timeout: 20_000 }).toContain('line 28 (agent)');

    await diff.getByLabel('comment on line +3').click();
    await page.getByLabel('Comment', { exact: true }).fill('Spell the number out.');
    await page.getByRole('button', { name: 'Save comment' }).click();
    await diff.getByLabel('comment on hunk 2').click();
    await page.getByLabel(/Reject this hunk/).check();
    await page.getByLabel('Comment', { exact: true }).fill('Leave line 28 alone.');
    await page.getByRole('button', { name: 'Save comment' }).click();
    // The rejected hunk is out of apply; the commented line stays in.
    expect(await diff.getByLabel('hunk 2', { exact: true }).isChecked()).toBe(false);
    expect(await diff.getByLabel('hunk 1', { exact: true }).isChecked()).toBe(true);
    const panel = page.getByRole('region', { name: 'Comments for the agent' });
    await expect.poll(() => panel.locator('li').count()).toBe(2);
    // Kept across a reload (the window's session).
    await page.reload();
    await expect.poll(() => panel.locator('li').count(), { timeout: 20_000 }).toBe(2);
    await page.locator('.file-row[data-path="src/big.txt"] .tree-file').click();
    await expect.poll(() => diff.textContent(), { timeout: 20_000 }).toContain('line 28 (agent)');
    await expect.poll(() => diff.getByLabel('hunk 2', { exact: true }).isChecked()).toBe(false);
    expect(await diff.getByLabel('hunk 1', { exact: true }).isChecked()).toBe(true);
    await page.screenshot({ path: join(SHOTS, 'review-comments.png'), fullPage: true });

    const before = upstream.requests.length;
    await panel.getByRole('button', { name: 'Ask the agent to revise' }).click();
    await page.waitForURL(/#\/run\/r-/);
    const followUp = new URL(page.url()).hash.replace('#/run/', '');
    expect(followUp).not.toBe(first);
    const s = services as AirlockServices;
    await vi.waitFor(async () => expect((await s.runs.get({ runId: followUp })).status).toBe('done'), { timeout: 240_000, interval: 500 });
    expect((await s.runs.get({ runId: followUp })).thread).toMatchObject({ parentRunId: first });

    // The agent got both comments at their file and line.
    const sent = JSON.stringify(upstream.requests.slice(before).find((r) => r.path.startsWith('/v1/messages'))?.body ?? '');
    expect(sent).toContain('src/big.txt:');
    expect(sent).toContain('line 3 `line 3 (agent)`: Spell the number out.');
    expect(sent).toMatch(/hunk 2 \(@@ -2\d,\d+ \+2\d,\d+ @@\): REJECTED — undo this hunk; Leave line 28 alone\./);

    // The follow-up's Review: the comments, and its own change is what changed since them.
    await page.goto(`${host.url}#/review/${followUp}`);
    const note = page.getByRole('note', { name: 'Your comments' });
    await expect.poll(() => note.textContent().catch(() => ''), { timeout: 20_000 }).toContain('Spell the number out.');
    await page.locator('.file-row[data-path="src/big.txt"] .tree-file').click();
    await expect.poll(() => diff.textContent(), { timeout: 20_000 }).toContain('line three (agent)');
    expect(await diff.textContent()).toContain('line 28 (agent)');
    expect(await page.getByRole('region', { name: 'Comments for the agent' }).count()).toBe(0);
    expect(pageErrors).toEqual([]);
  });
});
