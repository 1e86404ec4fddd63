import { access } from 'node:fs/promises';
import { join } from 'node:path';
import { resourcePaths } from '../common/resources';

/** Where the built renderer is (`out/renderer` in the package), unless AIRLOCK_RENDERER_DIR says otherwise. */
export async function defaultRendererDir(env: NodeJS.ProcessEnv): Promise<string> {
  return env.AIRLOCK_RENDERER_DIR ?? resourcePaths().rendererDir;
}

export async function hasBuiltRenderer(dir: string): Promise<boolean> {
  return access(join(dir, 'index.html')).then(() => true, () => false);
}
