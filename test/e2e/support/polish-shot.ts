import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Page } from 'playwright-core';

/** Where the polish list's screenshots go (issue 41): one per item at each size, named by the item. */
export const POLISH_SHOTS = join(import.meta.dirname, '..', '..', '..', 'test-results', 'screenshots', 'polish');

/** The two window sizes the polish list is judged at. */
const SIZES = [
  { width: 1280, height: 800 },
  { width: 800, height: 600 },
] as const;

/**
 * Screenshots the page as it is at 1280×800 and at 800×600 (the viewport, not the full page: what the
 * user sees without scrolling), then puts the window back as it was. At each size the page must not
 * scroll sideways; that is checked here because every polish screen must fit the small window.
 */
export async function polishShot(page: Page, item: string): Promise<void> {
  await mkdir(POLISH_SHOTS, { recursive: true });
  const before = page.viewportSize();
  try {
    for (const size of SIZES) {
      await page.setViewportSize(size);
      // Let layout settle for the new size (two frames) before measuring and taking the picture.
      await page.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      if (overflow > 0) throw new Error(`${item}: the page scrolls sideways by ${overflow}px at ${size.width}×${size.height}`);
      await page.screenshot({ path: join(POLISH_SHOTS, `${item}-${size.width}x${size.height}.png`) });
    }
  } finally {
    if (before) await page.setViewportSize(before);
  }
}
