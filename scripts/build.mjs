#!/usr/bin/env node
// Builds everything that runs, at build time (nothing is transpiled at run time):
//  - with esbuild, from the one configuration below: the CLI (out/cli), the in-sandbox helper and
//    the built-in agent (out/sandbox, copied into the sandbox image at /opt/airlock);
//  - with electron-vite (electron.vite.config.ts): Electron main, preload and the renderer (out/).
// `node scripts/build.mjs [bundles|app|all] [--if-stale]`; bin/airlock.js, scripts/start.mjs and
// the test setup call ensureBuilt() so a source checkout never runs stale bundles.
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { mkdir, rm, utimes, writeFile } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
/** Inlined into the CLI although installed: zod's ESM tree is ~100 files, and resolving them one by one doubled `airlock --help`'s start. */
const CLI_INLINED = ['zod'];

/**
 * The esbuild bundles. The CLI leaves the package's production dependencies external (npm installs
 * them beside it), but for CLI_INLINED; the helper and agent run on the image's Debian Node 18 with nothing installed
 * beside them but node-pty, so they carry everything.
 */
export const BUNDLES = [
  {
    name: 'cli',
    outdir: 'out/cli',
    options: {
      entryPoints: { airlock: 'core/cli/entry.ts' },
      format: 'esm',
      target: 'node20',
      external: Object.keys(pkg.dependencies ?? {}).filter((d) => !CLI_INLINED.includes(d)).flatMap((d) => [d, `${d}/*`]),
      splitting: true,
      chunkNames: 'chunks/[name]-[hash]',
    },
  },
  {
    name: 'helper',
    outdir: 'out/sandbox',
    options: {
      entryPoints: { helper: 'resources/sandbox/helper/main.ts' },
      format: 'cjs',
      target: 'node18',
      external: ['node-pty'], // native; lives in the image's /opt/airlock/node_modules
      banner: { js: '// Airlock in-sandbox helper (generated from resources/sandbox/helper; do not edit)' },
    },
  },
  {
    name: 'agent',
    outdir: 'out/sandbox/agent',
    options: {
      entryPoints: { agent: 'resources/sandbox/agent/main.ts' },
      format: 'cjs',
      target: 'node18',
      banner: { js: '// Airlock built-in agent (generated from resources/sandbox/agent; do not edit)' },
    },
    // The image's /opt/airlock has no package.json; this one keeps Node from reading agent.js as ESM.
    extraFiles: { 'package.json': '{"type":"commonjs","private":true}\n' },
  },
];

/** What each target is built from, and the stamp that records when it was last built. */
const TARGETS = {
  bundles: { sources: ['core', 'contracts', 'resources/sandbox', 'scripts/build.mjs', 'package.json'], outputs: ['out/cli/airlock.js', 'out/sandbox/helper.js', 'out/sandbox/agent/agent.js'] },
  app: { sources: ['core', 'contracts', 'main', 'preload', 'renderer', 'electron.vite.config.ts', 'package.json'], outputs: ['out/main/index.js', 'out/preload/index.cjs', 'out/renderer/index.html'] },
};

const stampFile = (target) => join(root, 'out', `.built-${target}`);

function newestMtime(path) {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = 0;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

/** True when an output or the stamp is missing, or a source is newer than the last build. */
export function isStale(target) {
  const { sources, outputs } = TARGETS[target];
  const stamp = stampFile(target);
  if (!existsSync(stamp) || outputs.some((o) => !existsSync(join(root, o)))) return true;
  const builtAt = statSync(stamp).mtimeMs;
  return sources.some((s) => existsSync(join(root, s)) && newestMtime(join(root, s)) > builtAt);
}

/** The stamp's mtime is when the build started: a source saved during the build makes it stale. */
async function stamp(target, startedAt) {
  const at = new Date(startedAt);
  await writeFile(stampFile(target), `${at.toISOString()}\n`);
  await utimes(stampFile(target), at, at);
}

/** Builds the CLI, helper and agent bundles into out/. */
export async function buildBundles() {
  const startedAt = Date.now();
  const { build } = await import('esbuild');
  const runtimeDeps = new Set(Object.keys(pkg.dependencies ?? {}));
  const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
  for (const bundle of BUNDLES) {
    const outdir = join(root, bundle.outdir);
    if (bundle.name !== 'helper') await rm(outdir, { recursive: true, force: true });
    await mkdir(outdir, { recursive: true });
    const result = await build({
      absWorkingDir: root,
      bundle: true,
      platform: 'node',
      outdir,
      legalComments: 'none',
      logLevel: 'warning',
      metafile: true,
      ...bundle.options,
    });
    // Whatever the bundle leaves external must be installed where it runs: a Node builtin, or (for
    // the CLI) a production dependency. A dev-only import would break the installed CLI.
    for (const out of Object.values(result.metafile.outputs)) {
      for (const imp of out.imports) {
        if (!imp.external || builtins.has(imp.path) || (bundle.name !== 'cli' && (bundle.options.external ?? []).includes(imp.path))) continue;
        const name = imp.path.startsWith('@') ? imp.path.split('/').slice(0, 2).join('/') : imp.path.split('/')[0];
        if (!runtimeDeps.has(name)) throw new Error(`the ${bundle.name} bundle imports '${imp.path}', which is not a production dependency`);
      }
    }
    for (const [name, content] of Object.entries(bundle.extraFiles ?? {})) await writeFile(join(outdir, name), content);
  }
  await stamp('bundles', startedAt);
}

/** Builds Electron main, preload and the renderer with electron-vite. */
export async function buildApp() {
  const startedAt = Date.now();
  const code = await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(root, 'node_modules', 'electron-vite', 'bin', 'electron-vite.js'), 'build'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('error', reject);
    child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0)));
  });
  if (code !== 0) throw new Error(`electron-vite build exited with ${code}`);
  await stamp('app', startedAt);
}

/** Builds the given targets that are stale (or all of them with `force`). */
export async function ensureBuilt(targets = ['bundles', 'app'], { force = false, log = (m) => process.stderr.write(`${m}\n`) } = {}) {
  for (const target of targets) {
    if (!force && !isStale(target)) continue;
    log(target === 'app' ? 'Building the app (main, preload, UI)…' : 'Building the CLI, sandbox helper and agent…');
    await (target === 'app' ? buildApp() : buildBundles());
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const which = args.find((a) => !a.startsWith('--')) ?? 'all';
  if (!['bundles', 'app', 'all'].includes(which)) {
    process.stderr.write('usage: node scripts/build.mjs [bundles|app|all] [--if-stale]\n');
    process.exit(2);
  }
  try {
    await ensureBuilt(which === 'all' ? ['bundles', 'app'] : [which], { force: !args.includes('--if-stale') });
  } catch (err) {
    process.stderr.write(`build failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
}
