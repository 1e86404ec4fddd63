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

// One signal path: the app runs in its own process group, so a terminal's Ctrl+C (sent to the whole
// foreground group) reaches only this script and is forwarded once. npm forwards the same SIGINT to us
// again within milliseconds; a repeat that close is the same keypress and is not forwarded, while a
// real second Ctrl+C is, and the app answers it (it keeps cleaning up rather than dying mid-way).
const SAME_KEYPRESS_MS = 500;
const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function run(cmd, cmdArgs, opts = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, cmdArgs, { cwd: root, stdio: 'inherit', detached: true, ...opts });
    const last = new Map();
    const forward = (sig) => {
      const now = Date.now();
      const prev = last.get(sig);
      last.set(sig, now);
      if (prev !== undefined && now - prev < SAME_KEYPRESS_MS) return;
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
    };
    for (const sig of SIGNALS) process.on(sig, forward);
    // If this script dies some other way, do not leave the app running on its own.
    const orphanGuard = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    };
    process.on('exit', orphanGuard);
    child.on('exit', (code, signal) => {
      for (const sig of SIGNALS) process.off(sig, forward);
      process.off('exit', orphanGuard);
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
