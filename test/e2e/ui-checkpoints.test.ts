import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
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
 * The checkpoint timeline in Chromium against the real core and Docker (docs/architecture.md §19):
 * a run of three file-changing turns shows three checkpoints; checkpoint 1 opens in Review, applies
 * alone (only turn 1's file reaches the project), and Follow up from here starts a follow-up from it.
 */

const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const KEY = `sk-ant-e2e-${'e5f6'.repeat(6)}-CKPT`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const exists = (p: string) => stat(p).then(() => true, () => false);

describe.skipIf(!docker.ok || !chromium.ok)('checkpoint timeline (Chromium, real core, Docker, fake upstream)', () => {
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
  const serviceName = `airlock-e2e-checkpoints-${process.pid}`;

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await gitProject('airlock-e2e-ckpt-', { 'README.md': '# demo\n' }, { name: 'Checkpoint Person', email: 'ckpt@example.invalid' });
    upstream = await startFakeUpstream({ expectedKey: KEY });
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName };
    const ui = await serveUi({ env, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    host = ui.host;
    const s = services as AirlockServices;
    await s.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'one.txt', content: 'first step\n' } }] },
      { toolCalls: [{ name: 'write_file', input: { path: 'two.txt', content: 'second step\n' } }] },
      { toolCalls: [{ name: 'write_file', input: { path: 'three.txt', content: 'third step\n' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'Three steps.' } }] },
    ]);
    runId = (await s.runs.start({ projectDir: project, task: 'Three steps', agent: 'builtin', provider: 'anthropic', model: 'claude-sonnet-4-5', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 600 } })).id;
    await vi.waitFor(async () => expect((await s.runs.get({ runId })).status).toBe('done'), { timeout: 240_000, interval: 500 });
    await vi.waitFor(async () => expect((await s.runs.get({ runId })).wipe?.verified).toBe(true), { timeout: 60_000, interval: 500 });

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

  it('shows one checkpoint per turn, applies checkpoint 1 alone from Review, and continues from it', async () => {
    const s = services as AirlockServices;
    await page.goto(host.url);
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${runId}"]`).click();
    const timeline = page.getByRole('region', { name: 'Checkpoints' });
    await timeline.waitFor();
    await expect.poll(() => timeline.getByRole('listitem').count(), { timeout: 20_000 }).toBe(3);
    expect(await page.getByLabel('Checkpoint 3', { exact: true }).textContent()).toContain('the result');
    expect(await page.getByLabel('Checkpoint 1', { exact: true }).textContent()).toContain('after turn 1');
    await page.screenshot({ path: join(SHOTS, 'checkpoints-01-timeline.png'), fullPage: true });

    // Review up to checkpoint 1: only turn 1's file, under checkpoint 1's digest.
    await page.getByLabel('Checkpoint 1', { exact: true }).getByRole('button', { name: 'Review up to here' }).click();
    await page.getByRole('note', { name: 'Checkpoint' }).waitFor();
    await page.locator('.file-row[data-path="one.txt"]').waitFor();
    expect(await page.locator('.file-row').count()).toBe(1);
    const cp1 = (await s.diffs.checkpoints({ runId })).checkpoints[0];
    await expect.poll(() => page.getByLabel('Selection digest').textContent(), { timeout: 20_000 }).toBe(`${cp1?.patchSha256.slice(0, 16)}…`);
    await page.getByRole('button', { name: /^Apply 1 file/ }).click();
    await expect.poll(() => page.getByRole('status', { name: 'Apply result' }).textContent(), { timeout: 20_000 }).toContain('Applied 1 file');
    expect(await readFile(join(project, 'one.txt'), 'utf8')).toBe('first step\n');
    expect(await exists(join(project, 'two.txt'))).toBe(false);
    expect(await git(project, 'status', '--porcelain')).toBe('?? one.txt\n');

    // Continue from checkpoint 1: a follow-up that starts from its tree.
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: 'ls' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'Looked.' } }] },
    ]);
    await page.getByRole('button', { name: 'Back to run' }).click();
    await page.getByLabel('Checkpoint 1', { exact: true }).getByRole('button', { name: 'Follow up from here' }).click();
    await page.getByLabel('Follow-up task from checkpoint 1').fill('take another way');
    await page.getByRole('button', { name: 'Follow up from checkpoint 1' }).click();
    await page.getByLabel('Thread').waitFor({ timeout: 20_000 });
    const runs = await s.runs.list({});
    const next = runs.find((r) => r.thread?.parentRunId === runId);
    expect(next?.thread).toMatchObject({ checkpoint: 1, conversation: 'carried' });
    await vi.waitFor(async () => expect((await s.runs.get({ runId: next!.id })).status).toBe('done'), { timeout: 240_000, interval: 500 });
    const listing = JSON.stringify(upstream.requests.filter((r) => r.method === 'POST').at(-1)?.body);
    expect(listing).toContain('one.txt');
    expect(listing).not.toContain('two.txt');
    expect(pageErrors).toEqual([]);
  });
});
