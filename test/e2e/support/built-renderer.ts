import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..', '..');
export const RENDERER_DIR = join(root, 'out', 'renderer');

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** Builds the UI with electron-vite when it is missing or older than its sources. */
export async function ensureBuiltRenderer(): Promise<string> {
  const index = join(RENDERER_DIR, 'index.html');
  const fresh = existsSync(index) && statSync(index).mtimeMs >= Math.max(newest(join(root, 'renderer')), newest(join(root, 'contracts')));
  if (fresh) return RENDERER_DIR;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js'), 'build'], { cwd: root, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`electron-vite build exited with ${code}`))));
  });
  return RENDERER_DIR;
}
