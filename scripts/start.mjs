#!/usr/bin/env node
// `npm start`: run the app. Builds what is missing or older than its sources (scripts/build.mjs), then starts
// Electron when its binary is installed, otherwise serves the same UI in the browser
// (`airlock serve`) and prints the URL to open.
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from './build.mjs';
import { electronBinary } from './electron-binary.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);

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

try {
  await ensureBuilt(['bundles', 'app']);
} catch (err) {
  console.error(`Build failed: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}

const electron = electronBinary().path;
if (electron && !args.includes('--browser')) {
  process.exit(await run(electron, [root, ...args]));
}
if (!args.includes('--browser')) {
  console.log('No Electron binary is installed here; serving the same UI in your browser instead.');
}
process.exit(await run(process.execPath, [join(root, 'bin', 'airlock.js'), 'serve', ...args.filter((a) => a !== '--browser')]));
