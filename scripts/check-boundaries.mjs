#!/usr/bin/env node
// Import boundaries of docs/architecture.md §3, checked on every source file:
//   core never imports electron, main, renderer or preload;
//   contracts imports only zod (and itself);
//   renderer never imports core, main or node:* built-ins;
//   preload imports only contracts and electron;
// and no import cycle among core's modules (imports that load at run time: `import type` is
// erased, and `await import()` is how a module loads another lazily).
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { builtinModules } from 'node:module';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const builtins = new Set(builtinModules);

/** @returns {Promise<string[]>} */
async function sources(dir) {
  const out = [];
  let entries;
  try {
    entries = await readdir(path.join(root, dir), { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== 'node_modules') out.push(...(await sources(rel)));
    } else if (/\.(ts|tsx|mts|js|mjs)$/.test(e.name) && !/\.d\.ts$/.test(e.name)) out.push(rel);
  }
  return out;
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(])import\s*\(\s*['"]([^'"]+)['"]\s*\)|(?:^|[\s;])import\s*['"]([^'"]+)['"]|require\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** Top-level folder a relative import lands in, or the package name. */
function target(file, spec) {
  if (spec.startsWith('.')) {
    const abs = path.resolve(path.dirname(path.join(root, file)), spec);
    return { kind: 'local', top: path.relative(root, abs).split(path.sep)[0] };
  }
  const name = spec.startsWith('node:') ? spec : spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0];
  return { kind: 'package', name, node: spec.startsWith('node:') || builtins.has(name) };
}

const rules = {
  core: (t) => (t.kind === 'local' && ['main', 'renderer', 'preload'].includes(t.top)) || (t.kind === 'package' && t.name === 'electron'),
  contracts: (t) => (t.kind === 'local' && t.top !== 'contracts') || (t.kind === 'package' && t.name !== 'zod'),
  renderer: (t) => (t.kind === 'local' && ['core', 'main'].includes(t.top)) || (t.kind === 'package' && (t.node || t.name === 'electron')),
  preload: (t) => (t.kind === 'local' && !['contracts', 'preload'].includes(t.top)) || (t.kind === 'package' && t.name !== 'electron'),
};

/** Every violation as `file: import 'spec'`. Test files may use test helpers, so they are checked too but only for electron in core. */
export async function findViolations() {
  const violations = [];
  for (const [layer, bad] of Object.entries(rules)) {
    for (const file of await sources(layer)) {
      const text = await readFile(path.join(root, file), 'utf8');
      for (const m of text.matchAll(IMPORT)) {
        const spec = m[1] ?? m[2] ?? m[3] ?? m[4];
        if (!spec) continue;
        const t = target(file, spec);
        const isTest = /\.test\.tsx?$/.test(file);
        if (isTest && !(layer === 'core' && t.kind === 'package' && t.name === 'electron')) continue;
        if (bad(t)) violations.push(`${file}: ${layer}/ may not import '${spec}'`);
      }
    }
  }
  return violations;
}

const STATIC_IMPORT = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"](\.[^'"]+)['"]|(?:^|[\s;])import\s*['"](\.[^'"]+)['"]/gm;

/** Each import cycle among core's (non-test) modules that load at run time, as `a.ts → b.ts → a.ts`. */
export async function findImportCycles() {
  const files = (await sources('core')).filter((f) => /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f));
  const known = new Set(files);
  /** @type {Map<string, string[]>} */
  const edges = new Map();
  for (const file of files) {
    const text = await readFile(path.join(root, file), 'utf8');
    const out = [];
    for (const m of text.matchAll(STATIC_IMPORT)) {
      if (/^\s*[;]?\s*(?:import|export)\s+type\s/.test(m[0])) continue;
      const spec = m[1] ?? m[2];
      const base = path.relative(root, path.resolve(path.dirname(path.join(root, file)), spec));
      const hit = [base, `${base}.ts`, `${base}.tsx`, path.join(base, 'index.ts')].find((c) => known.has(c));
      if (hit) out.push(hit);
    }
    edges.set(file, out);
  }
  const cycles = [];
  const state = new Map(); // 1: on the stack, 2: done
  const stack = [];
  const visit = (file) => {
    state.set(file, 1);
    stack.push(file);
    for (const next of edges.get(file) ?? []) {
      if (state.get(next) === 1) cycles.push([...stack.slice(stack.indexOf(next)), next].join(' → '));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 2);
  };
  for (const file of files) if (!state.has(file)) visit(file);
  return cycles;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const cycles = await findImportCycles();
  const v = [...(await findViolations()), ...cycles.map((c) => `import cycle in core: ${c}`)];
  for (const line of v) console.error(line);
  console.log(v.length ? `${v.length} import boundary violation(s)` : 'import boundaries: ok');
  process.exitCode = v.length ? 1 : 0;
}
