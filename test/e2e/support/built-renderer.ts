import { join } from 'node:path';
import { ensureBuilt, root } from '../../../scripts/build.mjs';

export const RENDERER_DIR = join(root, 'out', 'renderer');

/** Builds the app (main, preload, UI) with scripts/build.mjs when it is missing or older than its sources. */
export async function ensureBuiltRenderer(): Promise<string> {
  await ensureBuilt(['app']);
  return RENDERER_DIR;
}
