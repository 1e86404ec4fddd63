import { access, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where Airlock's own files are, for each way it ships:
 * - a source checkout or the npm-installed CLI: the package root (the folder whose package.json names
 *   `airlock`), with built bundles under `out/` and the sandbox and VM files under `resources/`;
 * - the packaged desktop app: the package root is `app.asar` (main, preload and renderer run from
 *   it), and what the engine reads or hands to Docker and QEMU sits beside it in
 *   `process.resourcesPath` as extra resources (no process outside Electron can read an asar).
 * The root is found by walking up from this module, so it does not depend on where a bundler puts chunks.
 */
export interface ResourcePaths {
  /** The package root: a checkout, the installed npm package, or the packaged app (app.asar). */
  appRoot: string;
  /** Running from a packaged app (extra resources in `process.resourcesPath`). */
  packaged: boolean;
  /** `Dockerfile` and `agents.Dockerfile` of the sandbox image. */
  sandboxDir: string;
  /** The built in-sandbox payload copied to /opt/airlock: `helper.js`, `agent/agent.js`. */
  payloadDir: string;
  /** The VM guest's init script (`guest-init.sh`). */
  vmDir: string;
  /** The built UI (`index.html` and its assets). */
  rendererDir: string;
  /** The built Electron preload. */
  preloadFile: string;
}

export const PACKAGE_NAME = 'airlock';

/** The nearest folder at or above `from` whose package.json names `airlock`. */
export async function findPackageRoot(from: string): Promise<string> {
  let dir = path.resolve(from);
  for (;;) {
    try {
      const pkg = JSON.parse(await readFile(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown };
      if (pkg.name === PACKAGE_NAME) return dir;
    } catch {
      // Not here (or unreadable): keep walking up.
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`cannot find Airlock's package root (a package.json naming '${PACKAGE_NAME}') above ${from}`);
    dir = parent;
  }
}

/** The layout below a package root; `resourcesPath` is Electron's, when running in Electron. */
export function layoutFor(appRoot: string, resourcesPath?: string): ResourcePaths {
  // Under `electron .` in a checkout, resourcesPath is Electron's own folder: only a root inside it
  // (resources/app.asar or resources/app) is a packaged app.
  const packaged = resourcesPath !== undefined && path.dirname(appRoot) === path.resolve(resourcesPath);
  const extra = packaged ? path.resolve(resourcesPath) : undefined;
  return {
    appRoot,
    packaged,
    sandboxDir: extra ? path.join(extra, 'sandbox') : path.join(appRoot, 'resources', 'sandbox'),
    payloadDir: extra ? path.join(extra, 'sandbox', 'payload') : path.join(appRoot, 'out', 'sandbox'),
    vmDir: extra ? path.join(extra, 'vm') : path.join(appRoot, 'resources', 'vm'),
    rendererDir: path.join(appRoot, 'out', 'renderer'),
    preloadFile: path.join(appRoot, 'out', 'preload', 'index.cjs'),
  };
}

/** Finds the layout from a module's location (default: this one) and Electron's resourcesPath. */
export async function locateResources(from = path.dirname(fileURLToPath(import.meta.url)), resourcesPath = electronResourcesPath()): Promise<ResourcePaths> {
  return layoutFor(await findPackageRoot(from), resourcesPath);
}

function electronResourcesPath(): string | undefined {
  const p = (process as { resourcesPath?: unknown }).resourcesPath;
  return typeof p === 'string' && p !== '' ? p : undefined;
}

// The package root is found once, when this module loads, so callers that must stay synchronous
// can ask; a failure surfaces where a resource is asked for, not as a failed import. The layout is
// derived on each call: Electron's resourcesPath is read then, not at import.
const root: string | Error = await findPackageRoot(path.dirname(fileURLToPath(import.meta.url))).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));

/** This process's resource layout (see {@link ResourcePaths}). */
export function resourcePaths(): ResourcePaths {
  if (root instanceof Error) throw root;
  return layoutFor(root, electronResourcesPath());
}

/**
 * The files Airlock needs at run time that are absent (empty when all are there): the sandbox
 * Dockerfiles and built payload, the VM guest init, the built UI, and in a packaged app the preload.
 */
export async function missingResources(paths: ResourcePaths = resourcePaths()): Promise<string[]> {
  const needed = [
    path.join(paths.sandboxDir, 'Dockerfile'),
    path.join(paths.sandboxDir, 'agents.Dockerfile'),
    path.join(paths.payloadDir, 'helper.js'),
    path.join(paths.payloadDir, 'agent', 'agent.js'),
    path.join(paths.payloadDir, 'agent', 'package.json'),
    path.join(paths.vmDir, 'guest-init.sh'),
    path.join(paths.rendererDir, 'index.html'),
    ...(paths.packaged ? [paths.preloadFile] : []),
  ];
  const present = await Promise.all(needed.map((f) => access(f).then(() => true, () => false)));
  return needed.filter((_, i) => !present[i]);
}
