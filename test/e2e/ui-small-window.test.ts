import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { deflateSync } from 'node:zlib';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AirlockServices } from '../../core/api/services';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { gitProject } from './support/git-project';
import { polishShot } from './support/polish-shot';
import { serveUi } from './support/serve-ui';

/**
 * Issue 28 items 6–8 and the first-load flash, against the real core, engine and Chromium in an
 * 800×600 window: what is painted first, a collapsible sidebar, every screen fitting, the words of
 * a command that exited 1 and of a collapsed write, the wipe proof named by the run, and pictures in
 * review (a PNG, and a hostile SVG that must neither run nor fetch).
 */

const exec = promisify(execFile);
const docker = await requirePrerequisite('docker');
const chromium = await requirePrerequisite('chromium');
const keychain = await requirePrerequisite('keychain');

const KEY = `sk-ant-e2e-${'5c3d'.repeat(6)}-SMALL`;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const W = 800;
const H = 600;

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `small-${name}.png`) });
}

/** A solid-colour RGB PNG, encoded here (CRC-32 by table: Node 20 has no zlib.crc32). */
function png(width: number, height: number, rgb: [number, number, number]): Buffer {
  const table = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (b: Buffer) => {
    let c = 0xffffffff;
    for (const x of b) c = (table[(c ^ x) & 0xff] as number) ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const sum = Buffer.alloc(4);
    sum.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, sum]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const row = Buffer.concat([Buffer.from([0]), Buffer.concat(Array.from({ length: width }, () => Buffer.from(rgb)))]);
  const raw = Buffer.concat(Array.from({ length: height }, () => row));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr), chunk('IDAT', deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}

/**
 * What a page paints, recorded from before the app's script runs: every heading and whether the New
 * run form ever appeared, in order. Installed with addInitScript, so it sees the very first frame's DOM.
 */
const PAINT_RECORDER = `(() => {
  const seen = [];
  window.__airlockPainted = seen;
  const look = () => {
    const h = document.querySelector('main h1');
    const text = h ? h.textContent : document.querySelector('[aria-busy="true"]') ? '(loading)' : undefined;
    if (text !== undefined && seen[seen.length - 1] !== text) seen.push(text);
    if (document.getElementById('r-provider') && !seen.includes('(new-run-form)')) seen.push('(new-run-form)');
  };
  new MutationObserver(look).observe(document, { childList: true, subtree: true, characterData: true });
})();`;

/** Everything interactive on screen that sticks out sideways, and how far the page and main area scroll sideways. */
async function overflow(page: Page): Promise<{ page: number; main: number; outside: string[] }> {
  return page.evaluate(() => {
    const vw = window.innerWidth;
    const main = document.querySelector('.main') as HTMLElement;
    // Inside a scroller of its own (a diff, a terminal's tab strip) an element may sit past the edge by design.
    const scrolls = (el: Element) => {
      for (let p = el.parentElement; p && p !== main; p = p.parentElement) {
        const o = getComputedStyle(p).overflowX;
        if (o === 'auto' || o === 'scroll') return true;
      }
      return false;
    };
    const outside = [...document.querySelectorAll('button, input, select, textarea, a[href], summary')]
      .filter((el) => el.getClientRects().length > 0 && !scrolls(el))
      .filter((el) => {
        const r = el.getBoundingClientRect();
        return r.width > 1 && (r.right > vw + 0.5 || r.left < -0.5);
      })
      .map((el) => el.getAttribute('aria-label') || (el.textContent ?? '').trim().slice(0, 40) || el.tagName);
    return { page: document.documentElement.scrollWidth - vw, main: main.scrollWidth - main.clientWidth, outside };
  });
}

/** The element is inside the window and is what a click at its centre hits (not covered, not off-screen). */
async function onScreenAndClickable(page: Page, selector: string): Promise<{ inside: boolean; hit: boolean }> {
  await page.locator(selector).scrollIntoViewIfNeeded();
  return page.locator(selector).evaluate((el) => {
    const r = el.getBoundingClientRect();
    const inside = r.left >= 0 && r.top >= 0 && r.right <= window.innerWidth && r.bottom <= window.innerHeight;
    const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return { inside, hit: !!at && (at === el || el.contains(at)) };
  });
}

describe.skipIf(!docker.ok || !chromium.ok)('an 800×600 window: first paint, sidebar, every screen, words, pictures (`airlock serve`, real core, Chromium, Docker)', () => {
  let home: string;
  let project: string;
  let upstream: FakeUpstream;
  let services: AirlockServices | undefined;
  let stopServe: (() => Promise<void>) | undefined;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  let url = '';
  let runId = '';
  /** A loopback server the hostile SVG points at: any request to it means the picture fetched something. */
  let lure: Server;
  let lureUrl = '';
  const lureHits: string[] = [];
  const pageErrors: string[] = [];

  const before = png(64, 40, [200, 30, 30]);
  const after = png(64, 40, [30, 120, 220]);
  const hostileSvg = () =>
    `<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="120" height="60" onload="window.top.__svgRan='onload'">\n` +
    `<style>@import url("${lureUrl}/css");</style>\n` +
    `<script>window.top.__svgRan='script'; fetch('${lureUrl}/script');</script>\n` +
    `<script href="${lureUrl}/external.js" xlink:href="${lureUrl}/external.js"></script>\n` +
    `<image href="${lureUrl}/image.png" xlink:href="${lureUrl}/image.png" width="10" height="10"/>\n` +
    `<rect id="hostile-rect" width="120" height="60" fill="green"/>\n</svg>\n`;

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    lure = createServer((req, res) => {
      lureHits.push(req.url ?? '');
      res.end('');
    });
    await new Promise<void>((r) => lure.listen(0, '127.0.0.1', r));
    const addr = lure.address();
    lureUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;

    const rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-small-home-'));
    project = await gitProject('airlock-e2e-small-project-', { 'README.md': '# demo\n', 'logo.svg': '<svg xmlns="http://www.w3.org/2000/svg" width="120" height="60"><rect width="120" height="60" fill="orange"/></svg>\n' }, { name: 'Small Window', email: 'small@example.test' });
    await writeFile(join(project, 'chart.png'), before);
    await exec('git', ['add', 'chart.png'], { cwd: project });
    await exec('git', ['commit', '-qm', 'chart'], { cwd: project });

    upstream = await startFakeUpstream({ expectedKey: KEY });
    const env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-small-${process.pid}` };
    const ui = await serveUi({ env, rendererDir });
    stopServe = ui.stop;
    services = ui.services;
    url = ui.host.url;

    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    await page.setViewportSize({ width: W, height: H });
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    await page.addInitScript(PAINT_RECORDER);
  });

  afterAll(async () => {
    await closeBrowser?.();
    if (services) await services.keys.remove({ provider: 'anthropic' }).catch(() => undefined);
    await stopServe?.();
    await upstream?.close();
    await new Promise<void>((r) => (lure ? lure.close(() => r()) : r()));
    for (const dir of [home, project]) if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('first load with no key: Keys is the first screen painted, New run never flashes', async () => {
    await page.goto(url);
    await page.getByRole('heading', { name: 'Keys & providers' }).waitFor({ timeout: 60_000 });
    const painted = await page.evaluate(() => (window as unknown as { __airlockPainted: string[] }).__airlockPainted);
    // Nothing but "Loading…" before the Keys screen; the New run form never drawn.
    expect(painted.filter((p) => p !== '(loading)')[0]).toBe('Keys & providers');
    expect(painted).not.toContain('New run');
    expect(painted).not.toContain('(new-run-form)');
    await shot(page, 'first-paint-keys');
  });

  it('the sidebar starts collapsed at 800 px, is reachable with Tab, toggles with Enter and Alt+0, and is remembered', async () => {
    const toggle = page.locator('.sidebar-toggle');
    expect(await page.locator('.app').getAttribute('class')).toContain('collapsed');
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');
    // The nav keeps its names while collapsed (icons on screen, labels for assistive tech and tests).
    expect(await page.getByRole('button', { name: /^History/ }).isVisible()).toBe(true);
    await shot(page, 'sidebar-collapsed');

    await page.locator('body').focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.getAttribute('aria-label'))).toBe('Expand sidebar');
    await page.keyboard.press('Enter');
    expect(await toggle.getAttribute('aria-expanded')).toBe('true');
    await page.reload();
    await page.locator('.sidebar-toggle[aria-expanded="true"]').waitFor();
    await shot(page, 'sidebar-expanded');

    await page.keyboard.press('Alt+0');
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');
    await page.reload();
    await page.locator('.sidebar-toggle[aria-expanded="false"]').waitFor();
  });

  it('a run with a failing command, a write, and pictures: "exit 1", the path, a wipe proof named by the run', async () => {
    await services!.keys.set({ provider: 'anthropic', key: KEY, baseUrl: upstream.url, storage: keychain.ok ? 'keychain' : 'session' });
    // The first key stored and no run yet: Keys points to a first run (polish list).
    await page.getByRole('button', { name: /^New run/ }).click();
    await page.getByRole('button', { name: /^Keys/ }).click();
    await page.getByRole('note', { name: 'Next step' }).getByRole('button', { name: 'Start a first run' }).waitFor({ timeout: 20_000 });
    await polishShot(page, 'keys-first-run-next');
    // The app keeps one sandbox started ahead (the warm pool): wait for ours, so this run takes it.
    const ours = ['--filter', 'label=airlock.pool', '--filter', `label=airlock.owner=${hostname()}:${process.pid}`];
    await expect.poll(async () => (await exec('docker', ['ps', '-q', ...ours])).stdout.trim(), { timeout: 240_000, interval: 500 }).not.toBe('');

    upstream.setScript([
      { toolCalls: [{ name: 'run_command', input: { command: `echo ${after.toString('base64')} | base64 -d > chart.png && echo drew-chart` } }] },
      { toolCalls: [{ name: 'run_command', input: { command: 'test -f results/missing.csv' } }] },
      { toolCalls: [{ name: 'write_file', input: { path: 'logo.svg', content: hostileSvg() } }] },
      { toolCalls: [{ name: 'run_command', input: { command: "{ printf '\\211PNG\\r\\n\\032\\n'; head -c 5000000 /dev/zero; } > big.png" } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'Redrew the chart and the logo.' } }] },
    ]);
    await page.getByRole('button', { name: /^New run/ }).click();
    await page.getByLabel('Project folder').fill(project);
    await page.getByLabel('Task').fill('Redraw the chart');
    await page.locator('#r-provider').selectOption('anthropic');
    await page.getByLabel('Model', { exact: true }).fill('claude-sonnet-4-5');
    await shot(page, 'new-run');
    expect(await overflow(page)).toEqual({ page: 0, main: 0, outside: [] });
    await page.getByRole('button', { name: 'Start run' }).click();
    await expect.poll(() => page.locator('.run-header .badge').textContent(), { timeout: 240_000 }).toBe('done');
    runId = (await page.locator('.run-header + .row .mono').first().textContent()) ?? '';
    expect(runId).toMatch(/\S/);

    const transcript = page.getByRole('log', { name: 'Transcript' });
    const failing = transcript.locator('details.t-item', { hasText: 'test -f results/missing.csv' });
    expect(await failing.locator('summary').textContent()).toContain('exit 1');
    // A command that ran and exited 1 is not a failed tool call.
    expect(await transcript.locator('summary .del-n').count()).toBe(0);
    expect(await transcript.textContent()).not.toContain('failed');
    // A collapsed write names its file.
    const write = transcript.locator('details.t-item', { hasText: 'write_file' });
    expect(await write.getAttribute('open')).toBeNull();
    expect(await write.locator('summary').textContent()).toContain('logo.svg');
    await failing.scrollIntoViewIfNeeded();
    await shot(page, 'run-transcript');

    const run = await services!.runs.get({ runId });
    expect(run.wipe?.verified).toBe(true);
    expect(run.wipe?.pooledAs).toMatch(/^w-/);
    const wipe = page.getByRole('region', { name: 'Run report' }).getByRole('region', { name: 'Sandbox wipe' });
    await wipe.scrollIntoViewIfNeeded();
    const wipeText = (await wipe.textContent()) ?? '';
    expect(wipeText).toContain(`Verified gone: the sandbox of run ${runId}`);
    expect(wipeText).toContain(`warm pool) as ${run.wipe?.pooledAs}`);
    expect(wipeText).toContain(`run ${runId}'s sandbox`);
    await shot(page, 'run-report');
  });

  it('review shows the PNG before and after, side by side and one over the other, from the host\'s bytes', async () => {
    await page.getByRole('button', { name: 'Review & apply' }).click();
    await page.getByRole('heading', { name: 'Review & apply' }).waitFor();
    await page.locator('.file-row[data-path="chart.png"] .tree-file').click();
    const pics = page.getByRole('region', { name: 'Pictures' });
    const beforeImg = pics.getByRole('figure', { name: 'Before' }).locator('img');
    const afterImg = pics.getByRole('figure', { name: 'After' }).locator('img');
    await afterImg.waitFor({ timeout: 30_000 });
    expect(await beforeImg.getAttribute('src')).toBe(`data:image/png;base64,${before.toString('base64')}`);
    expect(await afterImg.getAttribute('src')).toBe(`data:image/png;base64,${after.toString('base64')}`);
    await expect.poll(() => afterImg.evaluate((i) => (i as HTMLImageElement).complete && (i as HTMLImageElement).naturalWidth)).toBe(64);
    expect(await beforeImg.evaluate((i) => (i as HTMLImageElement).naturalWidth)).toBe(64);
    // Side by side: the same row.
    const [b1, a1] = [await beforeImg.boundingBox(), await afterImg.boundingBox()];
    expect(Math.abs((b1?.y ?? 0) - (a1?.y ?? 1))).toBeLessThan(2);
    expect((a1?.x ?? 0)).toBeGreaterThan((b1?.x ?? 0) + (b1?.width ?? 0));
    await pics.scrollIntoViewIfNeeded();
    await shot(page, 'review-png-side');
    await pics.getByRole('button', { name: 'One over the other' }).click();
    expect(await pics.getByRole('button', { name: 'One over the other' }).getAttribute('aria-pressed')).toBe('true');
    const [b2, a2] = [await beforeImg.boundingBox(), await afterImg.boundingBox()];
    expect((a2?.y ?? 0)).toBeGreaterThanOrEqual((b2?.y ?? 0) + (b2?.height ?? 0));
    await shot(page, 'review-png-stacked');
    expect(await overflow(page)).toEqual({ page: 0, main: 0, outside: [] });

    // Over the cap: said, not sent.
    await page.locator('.file-row[data-path="big.png"] .tree-file').click();
    await expect.poll(() => page.getByRole('figure', { name: 'After' }).textContent(), { timeout: 30_000 }).toContain('Too large to show here (4.8 MiB; pictures up to 4.0 MiB are drawn)');
    expect(await page.getByRole('figure', { name: 'Before' }).textContent()).toContain('Not there before');
  });

  it('a hostile SVG is drawn only as an image: no script runs, nothing is fetched, no markup enters the page', async () => {
    await page.locator('.file-row[data-path="logo.svg"] .tree-file').click();
    const afterImg = page.getByRole('region', { name: 'Pictures' }).getByRole('figure', { name: 'After' }).locator('img');
    await afterImg.waitFor({ timeout: 30_000 });
    const src = (await afterImg.getAttribute('src')) ?? '';
    expect(src.startsWith('data:image/svg+xml;base64,')).toBe(true);
    // Exactly the bytes the host holds in its object store (the run's result), not something the sandbox said.
    expect(Buffer.from(src.slice('data:image/svg+xml;base64,'.length), 'base64').toString('utf8')).toBe(hostileSvg());
    await expect.poll(() => afterImg.evaluate((i) => (i as HTMLImageElement).complete && (i as HTMLImageElement).naturalWidth)).toBe(120);
    await page.getByRole('region', { name: 'Pictures' }).scrollIntoViewIfNeeded();
    await shot(page, 'review-svg');
    expect(await page.evaluate(() => (window as unknown as { __svgRan?: string }).__svgRan)).toBeUndefined();
    expect(await page.locator('#hostile-rect').count()).toBe(0);
    expect(await page.locator('main svg').count()).toBe(0);
    // The picture has loaded (an image document loads no subresource, so nothing is pending): the lure saw nothing.
    expect(lureHits).toEqual([]);
    // The served page's CSP allows pictures only from this origin and data: URLs.
    const res = await page.request.get(url);
    expect(res.headers()['content-security-policy']).toContain("img-src 'self' data:");
    expect(res.headers()['content-security-policy']).toContain("default-src 'none'");
  });

  it('every screen fits 800×600 with the sidebar collapsed and expanded; History keeps Cost, Started, Run again and Delete on screen', async () => {
    await page.goto(url);
    await page.getByRole('heading').first().waitFor();
    for (const expanded of [false, true]) {
      const state = expanded ? 'expanded' : 'collapsed';
      if ((await page.locator('.sidebar-toggle').getAttribute('aria-expanded')) !== String(expanded)) await page.locator('.sidebar-toggle').click();
      const screens: Array<[string, () => Promise<void>]> = [
        ['new-run', () => page.getByRole('button', { name: /^New run/ }).click()],
        ['keys', () => page.getByRole('button', { name: /^Keys/ }).click()],
        ['setup-check', () => page.getByRole('button', { name: /^Setup check/ }).click()],
        ['settings', () => page.getByRole('button', { name: /^Settings/ }).click()],
        ['history', () => page.getByRole('button', { name: /^History/ }).click()],
      ];
      for (const [name, open] of screens) {
        await open();
        await page.locator('main h1').waitFor();
        await shot(page, `${name}-${state}`);
        expect({ name, ...(await overflow(page)) }).toEqual({ name, page: 0, main: 0, outside: [] });
      }
      // History: the run's row shows its cost and start and both actions, inside the window and clickable.
      const row = `tr[data-run="${runId}"]`;
      for (const cell of ['td[data-label="Cost"]', 'td[data-label="Started"]']) expect(await onScreenAndClickable(page, `${row} ${cell}`)).toEqual({ inside: true, hit: true });
      const runAgain = `${row} button:has-text("Run again")`;
      const del = `${row} button:has-text("Delete")`;
      expect(await onScreenAndClickable(page, runAgain)).toEqual({ inside: true, hit: true });
      expect(await onScreenAndClickable(page, del)).toEqual({ inside: true, hit: true });
      await shot(page, `history-row-${state}`);
      await page.locator(del).click();
      const confirm = page.locator(row).getByRole('group', { name: 'Confirm delete' });
      expect(await onScreenAndClickable(page, `${row} [aria-label="Confirm delete"] button:has-text("Keep")`)).toEqual({ inside: true, hit: true });
      await shot(page, `history-confirm-${state}`);
      await confirm.getByRole('button', { name: 'Keep' }).click();

      // The run's own screens: live view (finished), review, audit log.
      await page.locator(row).click();
      await page.locator('.run-header').waitFor();
      await shot(page, `run-${state}`);
      expect({ name: 'run', ...(await overflow(page)) }).toEqual({ name: 'run', page: 0, main: 0, outside: [] });
      await page.getByRole('button', { name: 'Review & apply' }).click();
      await page.getByRole('heading', { name: 'Review & apply' }).waitFor();
      await shot(page, `review-${state}`);
      expect({ name: 'review', ...(await overflow(page)) }).toEqual({ name: 'review', page: 0, main: 0, outside: [] });
      await page.getByRole('button', { name: 'Back to run' }).click();
      await page.getByRole('region', { name: 'Run report' }).getByRole('button', { name: 'Open audit log' }).click();
      await page.getByRole('heading', { name: 'Audit log' }).waitFor();
      await page.getByRole('region', { name: 'Audit records' }).locator('table').waitFor({ timeout: 30_000 });
      await shot(page, `audit-${state}`);
      expect({ name: 'audit', ...(await overflow(page)) }).toEqual({ name: 'audit', page: 0, main: 0, outside: [] });
    }
    expect(await page.content()).not.toContain(KEY);
    expect(pageErrors).toEqual([]);
  });
  it('the polish list (issue 41), each item checked and pictured at 1280×800 and 800×600', async () => {
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.goto(url);
    await page.getByRole('heading').first().waitFor();
    // A wide window with the sidebar open, then shrunk: nothing sticks out sideways.
    if ((await page.locator('.sidebar-toggle').getAttribute('aria-expanded')) !== 'true') await page.locator('.sidebar-toggle').click();
    await page.getByRole('button', { name: /^New run/ }).click();
    await page.locator('main h1').waitFor();
    await page.setViewportSize({ width: W, height: H });
    expect(await overflow(page)).toEqual({ page: 0, main: 0, outside: [] });
    await polishShot(page, 'shrunk-with-sidebar-open');
    await page.locator('.sidebar-toggle').click();

    // The New run form at 1280×800: Start run on screen without scrolling, every select labelled, the
    // allowlist's syntax said, a missing optional isolation level a quiet note, folder errors in the app's words.
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.getByLabel('Project folder').fill(project);
    await page.getByLabel('Task').fill('Polish');
    const start = await page.getByRole('button', { name: 'Start run' }).boundingBox();
    expect((start?.y ?? 1e9) + (start?.height ?? 0)).toBeLessThanOrEqual(800);
    expect(await page.getByLabel('Network', { exact: true }).count()).toBe(1);
    expect(await page.getByLabel('Isolation', { exact: true }).count()).toBe(1);
    await page.getByLabel('Network', { exact: true }).selectOption('allowlist');
    expect(await page.locator('#r-allow-help').textContent()).toContain('*.example.com');
    // Each field's name is level with its control, not centred beside the notes under it.
    // Both measured in one frame, once the environment row (read after the folder) has its final height.
    await page.getByTestId('environment-found').waitFor({ timeout: 20_000 });
    for (const id of ['r-isolation', 'r-network']) {
      const offset = await page.evaluate((i) => (document.querySelector(`label[for="${i}"]`) as HTMLElement).getBoundingClientRect().top - (document.getElementById(i) as HTMLElement).getBoundingClientRect().top, id);
      expect(Math.abs(offset), id).toBeLessThan(12);
    }
    expect(await page.locator('.new-run .banner.warn, form .banner.warn').filter({ hasText: 'Virtual machine' }).count()).toBe(0);
    await polishShot(page, 'new-run-form');
    await page.getByLabel('Project folder').fill(join(project, 'no-such-folder'));
    await expect.poll(() => page.locator('main').textContent(), { timeout: 20_000 }).toContain('choose an existing folder');
    expect(await page.locator('main').textContent()).not.toContain('pass the path');
    await polishShot(page, 'new-run-missing-folder');

    // The finished run: changed files listed (never "No changed files yet."), each command once in the transcript.
    await page.getByRole('button', { name: /^History/ }).click();
    await page.locator(`tr[data-run="${runId}"]`).click();
    await page.locator('.run-header').waitFor();
    const transcript = page.getByRole('log', { name: 'Transcript' });
    await transcript.waitFor();
    // The transcript is read after the view opens: wait for it, then count (one item per command, not two).
    await transcript.locator('details.t-item', { hasText: 'drew-chart' }).first().waitFor({ timeout: 20_000 });
    expect(await transcript.locator('details.t-item', { hasText: 'test -f results/missing.csv' }).count()).toBe(1);
    expect(await page.locator('main').textContent()).not.toContain('No changed files yet.');
    await polishShot(page, 'finished-run');

    // Review of a picture: no Unified/Split (they mean nothing for an image).
    await page.getByRole('button', { name: 'Review & apply' }).click();
    await page.getByRole('heading', { name: 'Review & apply' }).waitFor();
    await page.locator('.file-row[data-path="chart.png"] .tree-file').click();
    await page.getByRole('region', { name: 'Pictures' }).waitFor({ timeout: 30_000 });
    expect(await page.getByRole('button', { name: 'Split' }).count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Unified' }).count()).toBe(0);
    await polishShot(page, 'review-picture');

    // Settings: the MCP switch is one of the form's fields (Save applies it); the prepared environments' Clear.
    await page.getByRole('button', { name: /^Settings/ }).click();
    const settingsForm = page.getByRole('form', { name: 'Settings' });
    await settingsForm.getByLabel(/Serve MCP over HTTP/).waitFor();
    await settingsForm.getByLabel(/Serve MCP over HTTP/).scrollIntoViewIfNeeded();
    await polishShot(page, 'settings-mcp-switch');
    await page.getByRole('region', { name: 'Prepared environments' }).scrollIntoViewIfNeeded();
    await polishShot(page, 'settings-prepared-environments');

    // Keys: a stored key is "Replace key", and the next step points to a run.
    await page.getByRole('button', { name: /^Keys/ }).click();
    await page.getByRole('heading', { name: 'Keys & providers' }).waitFor();
    // Settings was scrolled down; Keys starts at its top.
    expect(await page.locator('.main').evaluate((m) => m.scrollTop)).toBe(0);
    expect(await page.locator('tr[data-provider="anthropic"]').getByRole('button', { name: 'Add key' }).count()).toBe(0);
    await polishShot(page, 'keys');
    expect(pageErrors).toEqual([]);
  }, 180_000);
});
