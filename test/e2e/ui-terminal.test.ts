import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MAX_SHELLS_PER_RUN, isFinalStatus } from '../../contracts';
import type { AirlockServices } from '../../core/api/services';
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

const KEY = `sk-ant-e2e-${'7e4a'.repeat(6)}-TERM`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

const visible = (page: Page) => page.locator('.terminal-view:not([hidden])');

/** The visible terminal's screen rows, as text. */
async function screenRows(page: Page): Promise<string[]> {
  const rows = await visible(page).locator('.xterm-rows > div').allTextContents();
  return rows.map((r) => r.replace(/\u00a0/g, ' '));
}

async function screenText(page: Page): Promise<string> {
  return (await screenRows(page)).join('\n');
}

/** The xterm's size as the page reports it (what the view fitted, and told the PTY). */
async function viewSize(page: Page): Promise<{ cols: number; rows: number }> {
  const host = visible(page).locator('.terminal-host');
  return { cols: Number(await host.getAttribute('data-cols')), rows: Number(await host.getAttribute('data-rows')) };
}

/** The size once it stopped changing (a viewport resize settles over a few frames and a debounce). */
async function settledSize(page: Page): Promise<{ cols: number; rows: number }> {
  let last = await viewSize(page);
  await expect.poll(async () => {
    const now = await viewSize(page);
    const same = now.cols === last.cols && now.rows === last.rows;
    last = now;
    return same;
  }, { timeout: 20_000, interval: 250 }).toBe(true);
  return last;
}

/** Types a command into the focused shell; with `until`, waits for that text on screen (no typing ahead). */
async function run(page: Page, command: string, until?: string): Promise<void> {
  await page.keyboard.type(command);
  await page.keyboard.press('Enter');
  if (until !== undefined) await expect.poll(() => screenText(page), { timeout: 20_000 }).toContain(until);
}

/** `clear`, then waits for the screen to hold just the prompt (typed-ahead keys would be echoed first). */
async function clearScreen(page: Page): Promise<void> {
  await run(page, 'clear');
  await expect.poll(async () => (await screenRows(page)).filter((r) => r.trim()).join('\n'), { timeout: 20_000 }).toMatch(/^[^\n]*\$\s*$/);
}

/** Moves onto and clicks `text` where it last shows on the visible terminal's screen (links need a hover first). */
async function clickText(page: Page, text: string): Promise<void> {
  const rows = await screenRows(page);
  let y = rows.length - 1;
  while (y >= 0 && !rows[y]!.includes(text)) y--;
  expect(y, `"${text}" on screen`).toBeGreaterThanOrEqual(0);
  const x = rows[y]!.indexOf(text);
  const { cols } = await viewSize(page);
  const screen = await visible(page).locator('.xterm-screen').boundingBox();
  const row = await visible(page).locator('.xterm-rows > div').nth(y).boundingBox();
  if (!screen || !row) throw new Error('terminal not laid out');
  const cell = screen.width / cols;
  const px = screen.x + (x + 2) * cell + cell / 2;
  const py = row.y + row.height / 2;
  await page.mouse.move(px - cell, py);
  await page.mouse.move(px, py);
  await page.mouse.click(px, py);
}

/** Notices (bottom right) could cover the terminal's lower rows: a click dismisses one; the shell gets the keyboard back. */
async function dismissNotices(page: Page): Promise<void> {
  while (await page.locator('.notice').count()) await page.locator('.notice').first().click();
  await visible(page).locator('.xterm-helper-textarea').focus();
}

async function clipboard(page: Page): Promise<string> {
  return page.evaluate(() => navigator.clipboard.readText());
}

describe.skipIf(!docker.ok || !chromium.ok)('the terminal panel with the real core: shells, search, copy, links, themes (Chromium, Docker)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let host: HostServer;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let context: BrowserContext;
  let page: Page;
  let runId = '';
  const pageErrors: string[] = [];
  const dialogs: string[] = [];
  const popups: string[] = [];
  const serviceName = `airlock-e2e-term-${process.pid}`;

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-home-'));
    project = await mkdtemp(join(tmpdir(), 'airlock-e2e-project-'));
    await writeFile(join(project, 'README.md'), '# demo\n');
    await exec('git', ['init', '-q', '-b', 'main'], { cwd: project });

    upstream = await startFakeUpstream({ expectedKey: KEY });
    // The run waits for approval of its one command: its sandbox lives while the shells are used.
    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: 'echo run-terminal-says-hello' } }], usage: { input: 100, output: 10 } },
      { toolCalls: [{ name: 'finish', input: { summary: 'done' } }], usage: { input: 100, output: 10 } },
    ]);

    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: serviceName };
    const ui = await serveUi({ env, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    host = ui.host;
    await services!.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });

    const b = await launchChromium();
    closeBrowser = b.close;
    context = b.browser;
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: new URL(host.url).origin });
    context.on('page', (p) => popups.push(p.url() || 'about:blank'));
    page = await context.newPage();
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await page.goto(host.url);
    popups.length = 0;

    const started = await services!.runs.start({ projectDir: project, task: 'Hold the sandbox open', agent: 'builtin', provider: 'anthropic', model: 'claude-sonnet-4-5', approval: 'ask', isolation: 'container', network: 'none', limits: { timeoutSec: 1800 } });
    runId = started.id;
    await vi.waitFor(async () => expect((await services!.runs.get({ runId })).pendingApproval?.command).toContain('run-terminal-says-hello'), { timeout: 240_000, interval: 500 });
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${runId}"]`).click();
    await page.getByRole('alertdialog', { name: 'Approve command' }).waitFor({ timeout: 30_000 });
  });

  afterAll(async () => {
    await closeBrowser?.();
    if (services && runId) {
      await services.runs.cancel({ runId }).catch(() => undefined);
      await vi.waitFor(async () => expect(isFinalStatus((await services!.runs.get({ runId })).status)).toBe(true), { timeout: 120_000, interval: 500 }).catch(() => undefined);
    }
    if (services && keychain.ok) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await rm(home, { recursive: true, force: true });
    await rm(project, { recursive: true, force: true });
  });

  it('opens a shell that takes the keyboard, with its PTY at the view size, at open and after a resize', async () => {
    await page.getByRole('button', { name: 'New shell' }).click();
    await expect.poll(() => page.getByRole('tab', { name: 'Shell 1' }).getAttribute('aria-selected')).toBe('true');
    await expect.poll(() => screenText(page), { timeout: 30_000 }).toMatch(/\$\s*$/m);
    // No click into the terminal: it has the keyboard already.
    const before = await settledSize(page);
    expect(before.cols).toBeGreaterThan(20);
    await run(page, 'stty size');
    await expect.poll(() => screenRows(page), { timeout: 20_000 }).toContainEqual(expect.stringMatching(new RegExp(`^${before.rows} ${before.cols}\\s*$`)));

    await page.setViewportSize({ width: 1100, height: 760 });
    await expect.poll(async () => (await viewSize(page)).cols, { timeout: 20_000 }).not.toBe(before.cols);
    const after = await settledSize(page);
    await run(page, 'clear; stty size');
    await expect.poll(() => screenRows(page), { timeout: 20_000 }).toContainEqual(expect.stringMatching(new RegExp(`^${after.rows} ${after.cols}\\s*$`)));

    // A command longer than a row wraps onto the next one instead of overwriting its own row.
    const long = `${'W'.repeat(after.cols + 17)}-end`;
    await clearScreen(page);
    await run(page, `echo ${long}`);
    // The output: one full row of W, then the rest (the command line before it wraps the same way).
    const outputAt = (rows: string[]) => rows.findIndex((r, i) => r.trimEnd() === 'W'.repeat(after.cols) && rows[i + 1]?.trimEnd() === `${'W'.repeat(17)}-end`);
    await expect.poll(async () => outputAt(await screenRows(page)), { timeout: 20_000 }).toBeGreaterThan(0);
    const joined = (await screenRows(page)).map((r) => r.padEnd(after.cols, ' ')).join('');
    expect(joined).toContain(`$ echo ${long}`);
    expect(joined.split(long).length - 1).toBe(2); // the command line and its output, both whole
  });

  it('searches with Ctrl+F, highlights and counts matches, copies the selection and the whole buffer', async () => {
    await run(page, 'echo needle-$((6*7))-found; echo other; echo needle-$((6*7))-again', 'needle-42-again');
    await page.keyboard.press('Control+f');
    const box = visible(page).getByRole('searchbox', { name: 'Search Shell 1' });
    await expect.poll(() => box.evaluate((el) => el === document.activeElement)).toBe(true);
    await page.keyboard.type('needle-42');
    await expect.poll(() => visible(page).getByRole('status', { name: 'Matches' }).textContent()).toMatch(/^[12] of 2$/);
    // The matches are highlighted (decorations over the cells), the active one selected.
    await expect.poll(() => visible(page).locator('.xterm-decoration-container .xterm-decoration').count()).toBeGreaterThanOrEqual(2);
    await page.keyboard.press('Enter');
    await expect.poll(() => visible(page).getByRole('status', { name: 'Matches' }).textContent()).toMatch(/^[12] of 2$/);
    await page.screenshot({ path: join(SHOTS, 'terminal-search.png') });

    await visible(page).getByRole('button', { name: 'Copy', exact: true }).click();
    await expect.poll(() => clipboard(page)).toBe('needle-42');
    await visible(page).getByRole('button', { name: 'Copy all' }).click();
    await expect.poll(() => clipboard(page)).toContain('needle-42-found\nother\nneedle-42-again');
    expect(await clipboard(page)).toContain('echo needle-$((6*7))-found; echo other;');

    // Esc closes the search and gives the keyboard back to the shell.
    await box.press('Escape');
    expect(await visible(page).getByRole('searchbox').count()).toBe(0);
    await run(page, 'echo typed-after-search');
    await expect.poll(() => screenText(page), { timeout: 20_000 }).toContain('\ntyped-after-search');
  });

  it('opens links through the guard: only this run\'s published preview ports, on localhost; javascript:, other ports and the UI\'s own port do not', async () => {
    const uiPort = new URL(host.url).port;
    await dismissNotices(page);
    await clearScreen(page);
    // A server in the sandbox, published: the link it prints names its sandbox port.
    await run(page, 'clear; (python3 -m http.server 8000 --bind 127.0.0.1 --directory /tmp >/dev/null 2>&1 &)');
    const published = await services!.runs.publishPort({ runId, port: 8000 });
    await vi.waitFor(async () => expect((await fetch(`${published.url}`)).status).toBe(200), { timeout: 20_000, interval: 200 });
    // printf builds the links, so only the output rows hold them (not the command line).
    await run(page, `printf '\\e]8;;%s\\e\\\\js-link-here\\e]8;;\\e\\\\\\n' 'javascript:alert(document.domain)'`, '\njs-link-here');
    await run(page, `printf 'dev %s://localhost:3000/app\\n' http`, 'dev http://localhost:3000/app');
    await run(page, `printf 'ui %s://127.0.0.1:${uiPort}/x\\n' http`, `/x`);
    await run(page, `printf 'open %s://127.0.0.1:8000/tl now\\n' http`, '/tl now');

    await clickText(page, 'js-link-here');
    await clickText(page, 'localhost:3000/app');
    await expect.poll(() => page.getByRole('alert').allTextContents()).toContainEqual(expect.stringContaining('Not opened: http://localhost:3000/app'));
    await dismissNotices(page);
    // Issue 22, item 6: any loopback port used to open, the UI's own included.
    await clickText(page, `127.0.0.1:${uiPort}/x`);
    await expect.poll(() => page.getByRole('alert').allTextContents()).toContainEqual(expect.stringContaining(`Not opened: http://127.0.0.1:${uiPort}/x`));
    const popup = context.waitForEvent('page', { timeout: 20_000 });
    await dismissNotices(page);
    await clickText(page, '127.0.0.1:8000');
    const opened = await popup;
    await expect.poll(() => opened.url()).toBe(`http://localhost:${published.hostPort}/tl`);
    await opened.close();
    expect(popups).toHaveLength(1);
    expect(dialogs).toEqual([]);
  });

  it('runs several shells, each its own PTY; closing a tab ends its shell; the number is capped', async () => {
    await page.getByRole('button', { name: 'New shell' }).click();
    await expect.poll(() => page.getByRole('tab', { name: 'Shell 2' }).getAttribute('aria-selected')).toBe('true');
    await expect.poll(() => screenText(page), { timeout: 30_000 }).toMatch(/\$\s*$/m);
    const shell2 = (await page.locator('.tab-with-close', { hasText: 'Shell 2' }).getAttribute('data-terminal-id'))!;

    await page.getByRole('tab', { name: 'Shell 1' }).click();
    await run(page, 'clear; cd /tmp && export AIRLOCK_MARK=one; pwd');
    await expect.poll(() => screenRows(page), { timeout: 20_000 }).toContainEqual(expect.stringMatching(/^\/tmp\s*$/));
    await page.getByRole('tab', { name: 'Shell 2' }).click();
    await run(page, 'pwd; echo "mark=[$AIRLOCK_MARK]"');
    await expect.poll(() => screenText(page), { timeout: 20_000 }).toContain('mark=[]');
    expect(await screenRows(page)).toContainEqual(expect.stringMatching(/^\/workspace\s*$/));

    // Closing a tab ends its shell in the sandbox: the host no longer has it.
    expect((await services!.terminals.write({ terminalId: shell2, data: '' })).written).toBe(true);
    await page.getByRole('button', { name: 'Close Shell 2' }).click();
    expect(await page.getByRole('tab', { name: 'Shell 2' }).count()).toBe(0);
    await expect.poll(async () => (await services!.terminals.write({ terminalId: shell2, data: '' })).written, { timeout: 20_000 }).toBe(false);

    for (let n = 3; n <= MAX_SHELLS_PER_RUN + 1; n++) {
      await page.getByRole('button', { name: 'New shell' }).click();
      await expect.poll(() => page.getByRole('tab', { name: `Shell ${n}` }).getAttribute('aria-selected'), { timeout: 30_000 }).toBe('true');
    }
    expect(await page.locator('.tab-with-close').count()).toBe(MAX_SHELLS_PER_RUN);
    await page.getByRole('button', { name: 'New shell' }).click();
    await expect.poll(() => page.locator('.terminal-notice').textContent()).toContain(`${MAX_SHELLS_PER_RUN} shells are open`);
    expect(await page.locator('.tab-with-close').count()).toBe(MAX_SHELLS_PER_RUN);
    await page.getByRole('tab', { name: 'Shell 1' }).click();
    await page.screenshot({ path: join(SHOTS, 'terminal-tabs.png') });
    // The host refuses a ninth too, whoever asks.
    await expect(services!.runs.openShell({ runId, cols: 80, rows: 24 })).rejects.toThrow(/already has 8 shells open/);
  });

  it('switches light / dark / system, saved in settings, for the app and the terminal', async () => {
    const termBackground = () => visible(page).locator('.terminal-host').evaluate((el) => getComputedStyle(el).backgroundColor);
    const xtermBackground = () => visible(page).locator('.xterm-scrollable-element').evaluate((el) => getComputedStyle(el).backgroundColor);
    // Room again (the cap's notice goes), and some colour on screen for the screenshots.
    await page.getByRole('button', { name: `Close Shell ${MAX_SHELLS_PER_RUN + 1}` }).click();
    expect(await page.locator('.terminal-notice').count()).toBe(0);
    await page.getByRole('tab', { name: 'Shell 1' }).click();
    await run(page, `for c in 31 32 33 34 35 36; do printf '\\e[%sm colour-%s \\e[1m bold-%s \\e[0m\\n' $c $c $c; done`, 'colour-36');
    await page.getByRole('radio', { name: 'Light' }).click();
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe('light');
    await expect.poll(xtermBackground).toBe('rgb(251, 252, 253)');
    expect(await termBackground()).toBe('rgb(251, 252, 253)');
    expect((await services!.settings.get({})).theme).toBe('light');
    await page.screenshot({ path: join(SHOTS, 'terminal-light.png') });

    await page.getByRole('radio', { name: 'Dark' }).click();
    await expect.poll(xtermBackground).toBe('rgb(13, 17, 23)');
    expect(await termBackground()).toBe('rgb(13, 17, 23)');
    expect((await services!.settings.get({})).theme).toBe('dark');
    await page.screenshot({ path: join(SHOTS, 'terminal-dark.png') });

    // Saved: a reload comes back dark. "System" follows the OS preference.
    await page.reload();
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await page.getByRole('radio', { name: 'System' }).click();
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe('light');
    await page.emulateMedia({ colorScheme: 'dark' });
    await expect.poll(() => page.evaluate(() => document.documentElement.dataset.theme)).toBe('dark');
    expect((await services!.settings.get({})).theme).toBe('system');
    expect(pageErrors).toEqual([]);
    expect(await page.content()).not.toContain(KEY);
  });
});
