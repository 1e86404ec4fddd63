import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { createApiRouter } from '../../core/api/router';
import { createFakeServices, type FakeServices } from '../support/fake-services';
import { startHostServer, type HostServer } from '../../core/host/host-server';
import { requirePrerequisite } from '../support/prerequisites';
import { launchChromium } from './support/browser';
import { ensureBuiltRenderer } from './support/built-renderer';

const chromium = await requirePrerequisite('chromium');
const MB = 1024 * 1024;
const SHOTS = join(import.meta.dirname, '..', '..', 'test-results', 'screenshots');
const LINE = 'flood line 0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ\n';

/** Reads the terminal's counters and screen from inside the page. */
async function terminalState(page: Page): Promise<{ received: number; dropped: number; gaps: number; screen: string }> {
  return page.evaluate(`(() => {
    const el = document.querySelector('.terminal-host[data-terminal-id]');
    return { received: Number(el.dataset.received || 0), dropped: Number(el.dataset.dropped || 0), gaps: Number(el.dataset.gaps || 0),
      screen: el.querySelector('.xterm-rows')?.textContent ?? '' };
  })()`);
}

/**
 * A flood through the real host, the browser's terminal stream and xterm in Chromium (the
 * producer is in-process: this is about the page's end, not the sandbox's): the page is only sent
 * what it can draw, the rest is skipped behind visible gap markers, and the view ends on the
 * newest output.
 */
describe.skipIf(!chromium.ok)('a terminal flood in the browser (real host, real Chromium)', () => {
  let services: FakeServices;
  let host: HostServer;
  let closeBrowser: () => Promise<void>;
  let page: Page;

  beforeAll(async () => {
    const rendererDir = await ensureBuiltRenderer();
    services = createFakeServices({ autoFinish: false });
    host = await startHostServer({ router: createApiRouter(services), rendererDir });
    const b = await launchChromium();
    closeBrowser = b.close;
    page = await b.browser.newPage();
    await page.goto(host.url);
  }, 120_000);

  afterAll(async () => {
    await closeBrowser?.();
    await host?.close();
    await services?.dispose();
  });

  it('sends the page only what it draws, marks what it skipped, and ends on the newest output', async () => {
    const run = await services.runs.start({ projectDir: '/p', task: 'flood', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 600 } });
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${run.id}"]`).click();
    await page.locator('.terminal-host[data-terminal-id]').waitFor();

    const total = 32 * MB;
    const chunk = LINE.repeat(Math.floor(64 * 1024 / LINE.length));
    let sent = 0;
    await new Promise<void>((resolve) => {
      const pump = () => {
        for (let i = 0; i < 8 && sent < total; i++, sent += chunk.length) services.emitOutput(run.id, chunk);
        if (sent < total) setImmediate(pump);
        else resolve();
      };
      pump();
    });
    services.emitOutput(run.id, 'the very last line of the flood\n');

    let state = await terminalState(page);
    for (let i = 0; i < 600 && !state.screen.includes('the very last line of the flood'); i++) {
      await new Promise((r) => setTimeout(r, 50));
      state = await terminalState(page);
    }
    expect(state.screen).toContain('the very last line of the flood');
    await mkdir(SHOTS, { recursive: true });
    await page.screenshot({ path: join(SHOTS, 'terminal-flood.png') });
    // Flow control: the page got a small part of the flood, not all of it to throw away.
    expect(state.received).toBeLessThan(sent / 4);
    // What was skipped shows as gap markers (skipped by the host, or by the page's sink).
    expect(state.gaps).toBeGreaterThan(0);
    // The UI stayed responsive: a click on another screen answers.
    await page.getByRole('button', { name: /History/ }).click();
    await page.locator(`tr[data-run="${run.id}"]`).waitFor({ timeout: 5_000 });
  }, 120_000);
});
