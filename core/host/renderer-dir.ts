import { access, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The package root (the folder whose package.json names `airlock`), found from this file upward. */
export async function findPackageRoot(from = dirname(fileURLToPath(import.meta.url))): Promise<string> {
  let dir = from;
  for (;;) {
    try {
      const pkg = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as { name?: string };
      if (pkg.name === 'airlock') return dir;
    } catch {
      // not here; keep walking up
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the airlock package root');
    dir = parent;
  }
}

/** Where the built renderer is (`out/renderer`), unless AIRLOCK_RENDERER_DIR says otherwise. */
export async function defaultRendererDir(env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return env.AIRLOCK_RENDERER_DIR ?? join(await findPackageRoot(), 'out', 'renderer');
}

export async function hasBuiltRenderer(dir: string): Promise<boolean> {
  return access(join(dir, 'index.html')).then(() => true, () => false);
}
