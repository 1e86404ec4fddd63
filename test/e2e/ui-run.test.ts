import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile, access } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { StartRunInput } from '../../contracts/runs';
import type { HostServer } from '../../core/host/host-server';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { serveUi } from './support/serve-ui';
import { ensureBuiltRenderer } from './support/built-renderer';

const exec = promisify(execFile);
const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

/** A distinctive key: it must appear nowhere in the UI. */
const KEY = `sk-ant-e2e-${'5c1d'.repeat(6)}-UIKY`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

async function terminalText(page: Page): Promise<string> {
  return (await page.locator('.terminal-view:not([hidden]) .xterm-rows').first().textContent()) ?? '';
}

describe.skipIf(!docker.ok || !chromium.ok)('the UI served by `airlock serve`, with the real core (Chromium, Docker, fake upstream)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let host: HostServer;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const pageErrors: string[] = [];
  const serviceName = `airlock-e2e-${process.pid}`;

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await mkdtemp(join(tmpdir(), 'airlock-e2e-project-'));
    await mkdir(join(project, 'src'));
    await writeFile(join(project, 'README.md'), '# demo\n');
    await writeFile(join(project, 'src', 'app.js'), 'export function answer() {\n  return 1;\n}\n');
    await writeFile(join(project, '.env'), 'SECRET_TOKEN=do-not-copy\n');
    await exec('git', ['init', '-q', '-b', 'main'], { cwd: project });
    await exec('git', ['add', 'README.md', 'src'], { cwd: project });
    await exec('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', 'commit', '-qm', 'init'], { cwd: project });

    upstream = await startFakeUpstream({ expectedKey: KEY });
    upstream.setScript([
      { text: 'Let me change the answer.', toolCalls: [{ name: 'edit_file', input: { path: 'src/app.js', old_text: 'return 1;', new_text: 'return 42;' } }], usage: { input: 200, output: 40 } },
      { toolCalls: [{ name: 'write_file', input: { path: '.github/workflows/ci.yml', content: 'on: push\njobs: {}\n' } }], usage: { input: 210, output: 30 } },
      { toolCalls: [{ name: 'run_command', input: { command: 'for i in 1 2 3; do echo line-$i; done; echo hello-from-sandbox' } }], usage: { input: 220, output: 30 } },
      { toolCalls: [{ name: 'run_command', input: { command: 'echo second-command' } }], usage: { input: 230, output: 30 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'The answer is now 42.' } }], usage: { input: 240, output: 20 } },
    ]);

    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName };
    const ui = await serveUi({ env, rendererDir });
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
    if (services && keychain.ok) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('shows the setup check', async () => {
    await page.getByRole('button', { name: /Setup check/ }).click();
    await expect.poll(() => page.locator('[data-check="docker.engine"]').textContent(), { timeout: 20_000 }).toContain('Container engine');
    await shot(page, '01-setup-check');
  });

  it('adds a key (pointed at the fake upstream) and never shows it again', async () => {
    await page.getByRole('button', { name: /Keys & providers/ }).click();
    const row = page.locator('tr[data-provider="anthropic"]');
    await row.getByRole('button', { name: /Add key|Replace key/ }).click();
    await row.getByLabel('Anthropic base URL').fill(upstream.url);
    await row.getByLabel('Anthropic API key').fill(KEY);
    const sessionOnly = page.getByLabel(/this session only/);
    if (await sessionOnly.isVisible()) await sessionOnly.check();
    await row.getByRole('button', { name: 'Save' }).click();
    await expect.poll(() => row.textContent(), { timeout: 20_000 }).toContain('••••UIKY');
    await row.getByRole('button', { name: 'Test' }).click();
    await expect.poll(() => row.locator('[role=status]').textContent(), { timeout: 20_000 }).toMatch(/^ok/);
    expect(await page.content()).not.toContain(KEY);
    await shot(page, '02-keys');
  });

  let runId = '';

  it('starts a run: excluded files previewed, terminal output and changed files live, a command approved', async () => {
    await page.getByRole('button', { name: /New run/ }).click();
    await page.getByLabel('Project folder').fill(project);
    await page.getByLabel('Task').fill('Make the answer 42');
    await page.locator('#r-provider').selectOption('anthropic');
    await page.getByLabel('Model', { exact: true }).fill('claude-sonnet-4-5');
    await page.getByLabel('Ask before each command').check();
    // Sent with the run and checked by the runs:start contract.
    await page.getByLabel('Git history').selectOption('10');
    await expect.poll(() => page.getByRole('region', { name: 'Excluded files' }).textContent(), { timeout: 15_000 }).toContain('.env');
    await shot(page, '03-new-run');
    await page.getByRole('button', { name: 'Start run' }).click();

    // The first command waits for approval; by then the edits show in the changed-files tree.
    const approval = page.getByRole('alertdialog', { name: 'Approve command' });
    await approval.waitFor({ timeout: 240_000 });
    expect(await approval.textContent()).toContain('hello-from-sandbox');
    // The question has the focus, not Approve: a stray Enter answers nothing. The header says who is waited for.
    expect(await approval.evaluate((el) => el === document.activeElement)).toBe(true);
    await page.keyboard.press('Enter');
    expect(await approval.textContent()).toContain('hello-from-sandbox');
    expect(await approval.locator(':focus').count()).toBe(0);
    runId = (await page.locator('.run-header + .row .mono').first().textContent()) ?? '';
    expect(runId).toMatch(/^r-/);
    await expect.poll(() => page.getByRole('tree', { name: 'Changed files' }).textContent(), { timeout: 30_000 }).toContain('app.js');
    await page.locator('.tree-file[data-path="src/app.js"]').click();
    await expect.poll(() => page.getByLabel('Diff of src/app.js').textContent(), { timeout: 20_000 }).toContain('return 42;');
    await shot(page, '04-run-approval');
    expect(await page.locator('.run-header').getByLabel('Waiting for you').textContent()).toBe('waiting for you');
    // Stop asks first; Keep running leaves the run as it is.
    await page.locator('.run-header').getByRole('button', { name: 'Stop' }).click();
    const confirmStop = page.getByRole('group', { name: 'Confirm stop' });
    expect(await confirmStop.textContent()).toContain('Stop this run?');
    expect(await confirmStop.getByRole('button', { name: 'Keep running' }).evaluate((el) => el === document.activeElement)).toBe(true);
    await page.setViewportSize({ width: 800, height: 600 });
    await shot(page, '04b-confirm-stop-800');
    await page.setViewportSize({ width: 1360, height: 900 });
    await confirmStop.getByRole('button', { name: 'Keep running' }).click();
    expect(await page.locator('.run-header .badge').first().textContent()).toBe('running');
    await approval.getByRole('button', { name: 'Approve' }).click();

    // The second command waits too: the run is still going, and the first one's output is on screen.
    await expect.poll(() => approval.textContent(), { timeout: 60_000 }).toContain('second-command');
    await expect.poll(() => terminalText(page), { timeout: 30_000 }).toContain('hello-from-sandbox');
    expect(await page.locator('.run-header .badge').textContent()).toBe('running');
    await page.getByRole('button', { name: 'Split' }).click();
    await shot(page, '05-run-live-terminal');

    // An interactive shell into the live sandbox.
    await page.getByRole('button', { name: 'New shell' }).click();
    await page.locator('.terminal-host[data-terminal-id^="shell:"]').waitFor({ timeout: 30_000 });
    await page.locator('.terminal-host[data-terminal-id^="shell:"]').click();
    await page.keyboard.type('echo shell-$((40+2)) && id -u\r');
    await expect.poll(() => terminalText(page), { timeout: 30_000 }).toContain('shell-42');
    await shot(page, '05b-run-shell');
    // Leave the shell before the run ends (the sandbox is wiped with the run).
    await page.keyboard.type('exit\r');
    await expect.poll(() => terminalText(page), { timeout: 30_000 }).toContain('[exited');
    await page.getByRole('tab', { name: 'Terminal' }).click();
    await approval.getByRole('button', { name: 'Deny' }).click();

    await expect.poll(() => page.locator('.run-header .badge').textContent(), { timeout: 120_000 }).toBe('done');
    await expect.poll(() => page.getByRole('log', { name: 'Transcript' }).textContent(), { timeout: 20_000 }).toContain('The answer is now 42.');
    await shot(page, '06-run-done');
  });

  it('reviews and applies to the project: the risky CI workflow is flagged and left out', async () => {
    await page.getByRole('button', { name: 'Review & apply' }).click();
    const risky = page.locator('.file-row[data-path=".github/workflows/ci.yml"]');
    await risky.waitFor();
    expect(await risky.textContent()).toMatch(/CI|workflow/i);
    expect(await risky.getByRole('checkbox').isChecked()).toBe(false);
    expect(await page.locator('.file-row[data-path="src/app.js"]').getByRole('checkbox').isChecked()).toBe(true);
    // Risky files come first.
    expect(await page.locator('.file-row').first().getAttribute('data-path')).toBe('.github/workflows/ci.yml');
    await shot(page, '07-review');
    await page.getByRole('button', { name: /^Apply 1 file/ }).click();
    await expect.poll(() => page.getByRole('status', { name: 'Apply result' }).textContent(), { timeout: 20_000 }).toContain('Applied 1 file');
    expect(await readFile(join(project, 'src', 'app.js'), 'utf8')).toContain('return 42;');
    await expect(access(join(project, '.github', 'workflows', 'ci.yml'))).rejects.toThrow();
    await shot(page, '08-applied');

    // Then to a new branch, like a git client: the user's identity (the project's git config) and
    // the message they edited (prefilled with the task).
    await exec('git', ['config', 'user.name', 'E2E Person'], { cwd: project });
    await exec('git', ['config', 'user.email', 'e2e@example.invalid'], { cwd: project });
    await page.getByLabel('New branch with a commit').check();
    const branch = await page.getByLabel('Branch name').inputValue();
    const message = page.getByLabel('Commit message');
    expect((await message.inputValue()).length).toBeGreaterThan(0);
    await message.fill('Make the answer 42\n\nAs the task asked.');
    await page.getByRole('button', { name: /^Apply 1 file/ }).click();
    await expect.poll(() => page.getByRole('status', { name: 'Apply result' }).textContent(), { timeout: 20_000 }).toContain(`on branch ${branch}`);
    const log = (await exec('git', ['log', '-1', "--format=%an <%ae>%n%B", branch], { cwd: project })).stdout;
    expect(log).toMatch(/^E2E Person <e2e@example\.invalid>\nMake the answer 42\n\nAs the task asked\.\n/);
    expect((await exec('git', ['show', `${branch}:src/app.js`], { cwd: project })).stdout).toContain('return 42;');
    await expect.poll(() => page.getByLabel('Applied status').textContent(), { timeout: 20_000 }).toContain(`Applied to branch ${branch}`);
    // Again to the same branch: refused by name, the old success line is gone, a free name is offered.
    await page.getByRole('button', { name: /^Apply 1 file/ }).click();
    await page.getByRole('button', { name: `Use ${branch}-2` }).waitFor();
    expect(await page.getByRole('status', { name: 'Apply result' }).count()).toBe(0);
    expect(await page.content()).toContain(`Branch '${branch}' already exists`);
    await shot(page, '08b-reapply-refused');
  });

  it('lists the run in history and replays it: transcript, terminal, diff, audit verified', async () => {
    await page.getByRole('button', { name: /History/ }).click();
    const row = page.locator(`tr[data-run="${runId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain('done');
    expect(await row.textContent()).toContain('applied → airlock/');
    await shot(page, '09-history');
    // A fresh page load: everything comes back from the store on disk.
    await page.reload();
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${runId}"]`).click();
    await expect.poll(() => terminalText(page), { timeout: 20_000 }).toContain('hello-from-sandbox');
    await expect.poll(() => page.getByRole('log', { name: 'Transcript' }).textContent(), { timeout: 20_000 }).toContain('Let me change the answer.');
    await expect.poll(() => page.getByRole('tree', { name: 'Changed files' }).textContent(), { timeout: 20_000 }).toContain('ci.yml');
    await expect.poll(() => page.getByRole('status', { name: 'Audit log verified' }).textContent(), { timeout: 20_000 }).toMatch(/^✓ Audit log verified/);
    await shot(page, '10-replay');
    expect(await page.content()).not.toContain(KEY);
    expect(pageErrors).toEqual([]);
  });
  it('continues a run from its view: the follow-up carries the conversation and result, History shows the thread, review applies the whole thread', async () => {
    // Its own first turn (through the same core), so this test stands on the key added above only.
    upstream.setScript([
      { toolCalls: [{ name: 'write_file', input: { path: 'notes/plan.md', content: 'turn-one-plan\n' } }], usage: { input: 100, output: 10 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Wrote the plan.' } }], usage: { input: 110, output: 10 } },
    ]);
    const first = await (services as AirlockServices).runs.start(StartRunInput.parse({ projectDir: project, task: 'Write the plan', provider: 'anthropic', model: 'claude-sonnet-4-5' }));
    await expect.poll(async () => (await (services as AirlockServices).runs.get({ runId: first.id })).status, { timeout: 240_000 }).toBe('done');
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${first.id}"]`).click();

    upstream.setScript([
      { toolCalls: [{ name: 'read_file', input: { path: 'notes/plan.md' } }], usage: { input: 300, output: 20 } },
      { toolCalls: [{ name: 'write_file', input: { path: 'src/empty.js', content: 'export const empty = [];\n' } }], usage: { input: 320, output: 20 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'Handled the empty case.' } }], usage: { input: 340, output: 10 } },
    ]);
    const before = upstream.requests.length;
    await page.getByLabel('Follow-up task').fill('Also handle the empty case');
    await page.getByRole('button', { name: 'Follow up', exact: true }).click();
    await expect.poll(() => page.getByLabel('Thread').textContent(), { timeout: 30_000 }).toContain(`Turn 2 of a thread · continues${first.id}`);
    await expect.poll(() => page.locator('.run-header .badge').first().textContent(), { timeout: 240_000 }).toBe('done');
    const followUp = (await page.locator('.run-header + .row .mono').first().textContent()) ?? '';
    expect(followUp).not.toBe(first.id);
    // The model saw turn 1 in turn 2's first request, and read turn 1's file in the new sandbox.
    const turnTwo = upstream.requests.slice(before).filter((r) => r.method === 'POST');
    expect(JSON.stringify(turnTwo[0]?.body)).toContain('Write the plan');
    expect(JSON.stringify(turnTwo[1]?.body)).toContain('turn-one-plan');
    await shot(page, '11-follow-up');

    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${followUp}"]`).waitFor();
    const rows = await page.locator('tr[data-run]').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.run));
    expect(rows.indexOf(followUp)).toBe(rows.indexOf(first.id) + 1);
    expect(await page.locator(`tr[data-run="${first.id}"]`).textContent()).toContain('thread · 2 turns');
    expect(await page.locator(`tr[data-run="${followUp}"]`).textContent()).toContain('↳ turn 2');
    await shot(page, '12-history-thread');

    await page.locator(`tr[data-run="${followUp}"]`).click();
    await page.getByRole('button', { name: 'Review & apply' }).click();
    await page.locator('.file-row[data-path="src/empty.js"]').waitFor();
    expect(await page.locator('.file-row').count()).toBe(1);
    await page.getByLabel(/The whole thread/).check();
    await page.locator('.file-row[data-path="notes/plan.md"]').waitFor();
    await page.getByRole('button', { name: /^Apply 2 file/ }).click();
    await expect.poll(() => page.getByRole('status', { name: 'Apply result' }).textContent(), { timeout: 20_000 }).toContain('Applied 2 file');
    expect(await readFile(join(project, 'src', 'empty.js'), 'utf8')).toBe('export const empty = [];\n');
    expect(await readFile(join(project, 'notes', 'plan.md'), 'utf8')).toBe('turn-one-plan\n');
    await shot(page, '13-thread-applied');
    expect(await page.content()).not.toContain(KEY);
  });
});
