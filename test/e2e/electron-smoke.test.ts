import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { _electron as electron, type ElectronApplication, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuiltRenderer } from './support/built-renderer';

const root = join(import.meta.dirname, '..', '..');

/** The Electron binary, found without `require('electron')` (which would try to download it). */
function electronBinary(): { path?: string; reason: string } {
  if (process.env.ELECTRON_OVERRIDE_DIST_PATH) return { path: process.env.ELECTRON_OVERRIDE_DIST_PATH, reason: '' };
  const pathFile = join(root, 'node_modules', 'electron', 'path.txt');
  if (!existsSync(pathFile)) {
    return { reason: 'no Electron binary is installed (electron was installed with ELECTRON_SKIP_BINARY_DOWNLOAD=1; run `npx install-electron` where its download host is reachable)' };
  }
  const bin = join(root, 'node_modules', 'electron', 'dist', readFileSync(pathFile, 'utf8').trim());
  return existsSync(bin) ? { path: bin, reason: '' } : { reason: `the Electron binary ${bin} is missing` };
}

const bin = electronBinary();
if (!bin.path) console.warn(`Electron smoke test skipped: ${bin.reason}`);

describe.skipIf(!bin.path)(`Electron window smoke test${bin.path ? '' : ` (skipped: ${bin.reason})`}`, () => {
  let app: ElectronApplication;
  let page: Page;
  let home: string;

  beforeAll(async () => {
    await ensureBuiltRenderer();
    home = await mkdtemp(join(tmpdir(), 'airlock-electron-'));
    app = await electron.launch({
      executablePath: bin.path,
      args: [root, '--no-sandbox', `--user-data-dir=${join(home, 'user-data')}`],
      env: { ...process.env, AIRLOCK_HOME: home, ELECTRON_ENABLE_LOGGING: '1' },
    });
    page = await app.firstWindow();
    await page.waitForLoadState('domcontentloaded');
  });
  afterAll(async () => {
    await app?.close().catch(() => undefined);
    if (home) await rm(home, { recursive: true, force: true });
  });

  it('opens one locked-down window', async () => {
    const count = await app.evaluate(({ BrowserWindow }) => BrowserWindow.getAllWindows().length);
    expect(count).toBe(1);
    // Context isolation: the page's globals are not the preload's; a sandboxed renderer has no Node.
    const probes = await page.evaluate(() => ({
      isolated: Object.getPrototypeOf((window as unknown as { airlock: object }).airlock) === Object.prototype && !('ipcRenderer' in window),
      webview: document.createElement('webview').constructor === HTMLUnknownElement,
      csp: document.querySelector('meta[http-equiv="Content-Security-Policy"]')?.getAttribute('content') ?? '',
    }));
    expect(probes.isolated).toBe(true);
    expect(probes.webview).toBe(true);
    expect(probes.csp).toContain("script-src 'self'");
  });

  it('exposes only the generic bridge: no Node, no raw ipcRenderer', async () => {
    const surface = await page.evaluate(() => ({
      bridge: Object.keys((window as unknown as { airlock: object }).airlock).sort(),
      require: typeof (window as unknown as { require?: unknown }).require,
      process: typeof (window as unknown as { process?: unknown }).process,
    }));
    expect(surface).toEqual({ bridge: ['invoke', 'on'], require: 'undefined', process: 'undefined' });
  });

  it('serves contracts through the bridge and refuses unknown channels', async () => {
    const results = await page.evaluate(async () => {
      const bridge = (window as unknown as { airlock: { invoke(c: string, i: unknown): Promise<{ ok: boolean; error?: { kind: string } }> } }).airlock;
      return [await bridge.invoke('settings:appInfo', {}), await bridge.invoke('shell:exec', {}), await bridge.invoke('runs:get', { runId: 'nope' })];
    });
    expect(results[0]?.ok).toBe(true);
    expect(results[1]).toMatchObject({ ok: false, error: { kind: 'INVALID_INPUT' } });
    expect(results[2]).toMatchObject({ ok: false, error: { kind: 'INVALID_INPUT' } });
  });

  it('blocks window.open and navigation away from the UI', async () => {
    const opened = await page.evaluate(() => window.open('https://example.invalid/') === null);
    expect(opened).toBe(true);
    const before = page.url();
    await page.evaluate(() => { location.href = 'https://example.invalid/'; });
    await page.waitForTimeout(500);
    expect(page.url()).toBe(before);
  });
});
