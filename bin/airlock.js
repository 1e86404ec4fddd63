#!/usr/bin/env node
// The CLI entry: runs the CLI built at build time (out/cli, from core/cli/entry.ts). In a source
// checkout it first rebuilds the bundles when a source is newer than them; an installed package has
// no sources and runs the built files as they are.
import { existsSync } from 'node:fs';
import module from 'node:module';

// Node ≥ 22.1 keeps the compiled bundle on disk between starts (a no-op on older Node).
module.enableCompileCache?.();

if (existsSync(new URL('../scripts/build.mjs', import.meta.url)) && existsSync(new URL('../core/cli/entry.ts', import.meta.url))) {
  const { ensureBuilt } = await import('../scripts/build.mjs');
  await ensureBuilt(['bundles']);
}
await import('../out/cli/airlock.js');
