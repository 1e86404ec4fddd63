import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext } from 'playwright-core';

export const CHROMIUM = process.env.AIRLOCK_CHROMIUM ?? '/usr/bin/chromium';

/** Debian Chromium, headless, with a fresh profile (docs/architecture.md §7); it keeps its own secrets in the profile, away from the test keyring. */
export async function launchChromium(): Promise<{ browser: BrowserContext; close(): Promise<void> }> {
  const userDataDir = await mkdtemp(join(tmpdir(), 'airlock-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1360, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-dev-shm-usage', '--password-store=basic'],
  });
  return {
    browser: context,
    async close() {
      await context.close().catch(() => {});
      await rm(userDataDir, { recursive: true, force: true });
    },
  };
}

export type { Browser, BrowserContext };
