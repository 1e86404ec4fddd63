// Where the Electron binary is, found without `require('electron')` (which would try to download
// it): ELECTRON_OVERRIDE_DIST_PATH, else node_modules/electron/dist. `path` is undefined when there
// is none, and `reason` says why (installed with ELECTRON_SKIP_BINARY_DOWNLOAD=1, say).
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export function electronBinary() {
  if (process.env.ELECTRON_OVERRIDE_DIST_PATH) return { path: process.env.ELECTRON_OVERRIDE_DIST_PATH, reason: '' };
  const pathFile = join(root, 'node_modules', 'electron', 'path.txt');
  if (!existsSync(pathFile)) {
    return { reason: 'no Electron binary is installed (electron was installed with ELECTRON_SKIP_BINARY_DOWNLOAD=1 or its download failed; run `npx install-electron` where its download host is reachable)' };
  }
  const bin = join(root, 'node_modules', 'electron', 'dist', readFileSync(pathFile, 'utf8').trim());
  return existsSync(bin) ? { path: bin, reason: '' } : { reason: `the Electron binary ${bin} is missing` };
}
