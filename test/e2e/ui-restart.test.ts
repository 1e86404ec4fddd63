import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';
import { serveUi, type ServedUi } from './support/serve-ui';

const chromium = await requirePrerequisite('chromium');
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');

/**
 * Browser mode across restarts (docs/architecture.md §5): `serve` keeps its port per data folder
 * when it is free and says so; a tab left open from the last start is told to open the new address,
 * naming the command that was run; a taken port is said, and another used.
 */
describe.skipIf(!chromium.ok)('airlock serve across restarts (Chromium, real core)', () => {
  let home: string;
  let rendererDir: string;
  let closeBrowser: () => Promise<void>;
  let page: Page;
  const running: ServedUi[] = [];
  const serve = async (env: NodeJS.ProcessEnv = {}) => {
    const ui = await serveUi({ env: { ...process.env, AIRLOCK_HOME: home, AIRLOCK_KEYCHAIN_SERVICE: `airlock-e2e-restart-${process.pid}`, ...env }, rendererDir, warm: false });
    running.push(ui);
    return ui;
  };

  beforeAll(async () => {
    await mkdir(SHOTS, { recursive: true });
    rendererDir = await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-e2e-restart-'));
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
  });

  afterAll(async () => {
    await closeBrowser?.();
    for (const ui of running) await ui.stop();
    await rm(home, { recursive: true, force: true });
  });

  it('keeps the port, tells the old tab to open the new address (naming npm start), and says when the port is taken', async () => {
    const first = await serve();
    await page.goto(first.host.url);
    await page.getByRole('button', { name: /Keys & providers/ }).waitFor();
    await first.stop();
    // `npm start` serves through `airlock serve` when Electron cannot start.
    const second = await serve({ npm_lifecycle_event: 'start' });
    expect(second.host.port).toBe(first.host.port);
    expect(second.host.token).not.toBe(first.host.token);
    expect(second.stdout()).toContain(`Same port as last time (${first.host.port}, kept for this data folder)`);
    const lost = page.getByRole('alert', { name: 'Connection lost' });
    await expect.poll(() => lost.textContent({ timeout: 1000 }), { timeout: 30_000 }).toContain('Airlock restarted: open the new address printed by `npm start`');
    expect(await page.getByText('disconnected — retrying').count()).toBe(0);
    await page.setViewportSize({ width: 800, height: 600 });
    await page.screenshot({ path: join(SHOTS, 'restart-01-old-tab.png') });
    await page.setViewportSize({ width: 1360, height: 900 });
    // The old address itself is the 403 page, naming the same command.
    const res = await page.goto(first.host.url);
    expect(res?.status()).toBe(403);
    expect(await page.textContent('body')).toContain('open the new address printed by `npm start`');
    // The new address works.
    await page.goto(second.host.url);
    await page.getByRole('button', { name: /Keys & providers/ }).waitFor();
    await second.stop();

    // Something else took the port meanwhile: another one is used, and serve says so.
    const squatter: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((r) => squatter.listen(first.host.port, '127.0.0.1', () => r()));
    try {
      const third = await serve();
      expect(third.host.port).not.toBe(first.host.port);
      expect(third.stdout()).toContain(`Port ${first.host.port}, used last time, is taken; serving on another one`);
      // The 403 page of a plain `airlock serve` names that command.
      const r = await page.goto(`http://127.0.0.1:${third.host.port}/?token=stale`);
      expect(r?.status()).toBe(403);
      expect(await page.textContent('body')).toContain('printed by `airlock serve`');
      await third.stop();
    } finally {
      squatter.close();
    }
  });
});
