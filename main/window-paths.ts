import type { ResourcePaths } from '../core/common/resources';

export interface WindowPaths {
  preload: string;
  rendererDir: string;
  /** The electron-vite dev server, in an unpackaged development build only. */
  devServerUrl?: string;
}

/**
 * The built preload and UI, as core/common/resources.ts finds them (checkout or packaged app).
 * `ELECTRON_RENDERER_URL` counts only when the app is not packaged: an installed app never loads
 * a page someone named in its environment into the window the bridge trusts.
 */
export function windowPaths(resources: Pick<ResourcePaths, 'preloadFile' | 'rendererDir'>, opts: { packaged: boolean; env?: NodeJS.ProcessEnv }): WindowPaths {
  const dev = opts.packaged ? undefined : (opts.env ?? process.env).ELECTRON_RENDERER_URL;
  return { preload: resources.preloadFile, rendererDir: resources.rendererDir, ...(dev ? { devServerUrl: dev } : {}) };
}
