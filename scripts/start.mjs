#!/usr/bin/env node
// `npm start`: run the app. Builds the UI when it is missing or older than its sources, then starts
// Electron when its binary is installed, otherwise serves the same UI in the browser
// (`airlock serve`) and prints the URL to open.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(full));
    else newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

function needsBuild() {
  const built = join(root, 'out', 'renderer', 'index.html');
  if (!existsSync(built) || !existsSync(join(root, 'out', 'main', 'index.js'))) return true;
  const builtAt = statSync(built).mtimeMs;
  return ['renderer', 'contracts', 'main', 'preload'].some((d) => existsSync(join(root, d)) && newestMtime(join(root, d)) > builtAt);
}

/** The Electron binary, without touching `require('electron')` (which tries to download it). */
function electronBinary() {
  if (process.env.ELECTRON_OVERRIDE_DIST_PATH) return process.env.ELECTRON_OVERRIDE_DIST_PATH;
  const pathFile = join(root, 'node_modules', 'electron', 'path.txt');
  if (!existsSync(pathFile)) return undefined;
  const bin = join(root, 'node_modules', 'electron', 'dist', readFileSync(pathFile, 'utf8').trim());
  return existsSync(bin) ? bin : undefined;
}

function run(cmd, cmdArgs, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, cmdArgs, { cwd: root, stdio: 'inherit', ...opts });
    const forward = (sig) => child.kill(sig);
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}

if (needsBuild()) {
  console.log('Building the UI…');
  const code = await run(process.execPath, [join(root, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js'), 'build']);
  if (code !== 0) process.exit(code);
}

const electron = electronBinary();
if (electron && !args.includes('--browser')) {
  process.exit(await run(electron, [root, ...args]));
}
if (!args.includes('--browser')) {
  console.log('No Electron binary is installed here; serving the same UI in your browser instead.');
}
process.exit(await run(process.execPath, [join(root, 'bin', 'airlock.js'), 'serve', ...args.filter((a) => a !== '--browser')]));
