import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..', '..');
export const RENDERER_DIR = join(root, 'out', 'renderer');

/** Builds the UI with electron-vite (once per test process) when it is missing. */
export async function ensureBuiltRenderer(force = false): Promise<string> {
  if (!force && existsSync(join(RENDERER_DIR, 'index.html'))) return RENDERER_DIR;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js'), 'build'], { cwd: root, stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`electron-vite build exited with ${code}`))));
  });
  return RENDERER_DIR;
}
