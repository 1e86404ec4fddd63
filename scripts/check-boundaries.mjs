#!/usr/bin/env node
// Import boundaries of docs/architecture.md §3, checked on every source file:
//   core never imports electron, main, renderer or preload;
//   contracts imports only zod (and itself);
//   renderer never imports core, main or node:* built-ins;
//   preload imports only contracts and electron;
//   core's folders form a graph in the declared order (CORE_FOLDER_ORDER): a folder imports only
//   folders before it, so there is no cycle between folders (`await import()` counts: loading
//   lazily does not change who depends on whom; `import type` is erased and does not);
//   in-sandbox code under resources/ imports only the wire protocol and a few shared helpers
//   (RESOURCES_MAY_IMPORT), never keys, proxy or runs;
// and no import cycle among core's modules (imports that load at run time: `import type` is
// erased, and `await import()` is how a module loads another lazily);
// and no new ambient read in core/ (process.env, airlockHome(), connectEngine()): only the roots
// may read ambient state (AMBIENT_ROOTS); files below them that still do are counted in
// scripts/ambient-baseline.json, which may only shrink (docs/architecture.md §5). A line marked
// `ambient-ok: <why>` (the text of a script that runs in the sandbox) does not count.
// Every function takes the repository root, so tests can check fixtures in a temp folder.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { builtinModules } from 'node:module';

const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const builtins = new Set(builtinModules);

/** @returns {Promise<string[]>} */
async function sources(root, dir) {
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
      if (e.name !== 'node_modules') out.push(...(await sources(root, rel)));
    } else if (/\.(ts|tsx|mts|js|mjs)$/.test(e.name) && !/\.d\.ts$/.test(e.name)) out.push(rel);
  }
  return out;
}

const IMPORT = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(])import\s*\(\s*['"]([^'"]+)['"]\s*\)|(?:^|[\s;])import\s*['"]([^'"]+)['"]|require\(\s*['"]([^'"]+)['"]\s*\)/gm;

/** Top-level folder a relative import lands in, or the package name. */
function target(root, file, spec) {
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
export async function findViolations(root = repoRoot) {
  const violations = [];
  for (const [layer, bad] of Object.entries(rules)) {
    for (const file of await sources(root, layer)) {
      const text = await readFile(path.join(root, file), 'utf8');
      for (const m of text.matchAll(IMPORT)) {
        const spec = m[1] ?? m[2] ?? m[3] ?? m[4];
        if (!spec) continue;
        const t = target(root, file, spec);
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
export async function findImportCycles(root = repoRoot) {
  const files = (await sources(root, 'core')).filter((f) => /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f));
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

/**
 * core's folders, lowest first: a folder may import (at run time) only the folders before it. `(root)`
 * is core's own top-level files (the composition root: app-context.ts, app.ts, app-services.ts).
 * A new folder gets its place here (docs/architecture.md §3).
 */
export const CORE_FOLDER_ORDER = ['common', 'settings', 'channel', 'agents', 'upstream', 'keys', 'audit', 'workspace', 'sandbox', 'proxy', 'network', 'environment', 'doctor', 'runs', 'api', 'host', 'mcp', '(root)', 'cli'];

/** Files in-sandbox code (resources/) may import from outside resources/: the wire protocol and a few helpers. */
export const RESOURCES_MAY_IMPORT = ['core/channel/protocol.ts', 'core/channel/guards.ts', 'core/channel/mux.ts', 'core/channel/channel-duplex.ts', 'core/common/command-env.ts', 'contracts/agent-events.ts'];

const TYPE_ONLY = /^\s*[;]?\s*(?:import|export)\s+type\s/;

/** The file a relative import names (with its extension or index), or undefined when it is not a source file. */
function resolveLocal(root, file, spec, known) {
  const base = path.relative(root, path.resolve(path.dirname(path.join(root, file)), spec));
  return [base, `${base}.ts`, `${base}.tsx`, path.join(base, 'index.ts')].find((c) => known.has(c));
}

/** core's folder of a file under core/: its first folder, or `(root)` for core's own files. */
function coreFolder(file) {
  const parts = file.split(path.sep);
  return parts.length > 2 ? parts[1] : '(root)';
}

/** Run-time imports (static and `import()`, not `import type`) of relative specifiers in `text`. */
function runtimeImports(text) {
  const out = [];
  for (const m of text.matchAll(IMPORT)) {
    const spec = m[1] ?? m[2] ?? m[3] ?? m[4];
    if (!spec?.startsWith('.')) continue;
    if (m[1] && TYPE_ONLY.test(m[0])) continue;
    out.push(spec);
  }
  return out;
}

/**
 * Imports between core's folders that go against CORE_FOLDER_ORDER, folders missing from it, and
 * each cycle between folders (as `keys → proxy → keys`, with one import that makes each step).
 */
export async function findFolderViolations(root = repoRoot) {
  const files = (await sources(root, 'core')).filter((f) => /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f));
  const known = new Set(files);
  const rank = new Map(CORE_FOLDER_ORDER.map((f, i) => [f, i]));
  const violations = [];
  /** @type {Map<string, Map<string, string>>} folder → folder → one `file: import 'spec'` that makes the edge */
  const edges = new Map();
  for (const file of files) {
    const from = coreFolder(file);
    if (!rank.has(from)) {
      violations.push(`${file}: core/${from}/ has no place in the folder order; add it to CORE_FOLDER_ORDER in scripts/check-boundaries.mjs`);
      continue;
    }
    for (const spec of runtimeImports(await readFile(path.join(root, file), 'utf8'))) {
      const hit = resolveLocal(root, file, spec, known);
      if (!hit) continue;
      const to = coreFolder(hit);
      if (to === from || !rank.has(to)) continue;
      if (!edges.has(from)) edges.set(from, new Map());
      if (!edges.get(from).has(to)) edges.get(from).set(to, `${file}: import '${spec}'`);
      if (rank.get(to) > rank.get(from)) violations.push(`${file}: core/${from}/ may not import '${spec}' (core/${to}/ comes after core/${from}/ in the folder order)`);
    }
  }
  for (const cycle of folderCycles(edges)) {
    const steps = cycle.slice(0, -1).map((f, i) => edges.get(f).get(cycle[i + 1]));
    violations.push(`folder cycle in core: ${cycle.join(' → ')} (${steps.join('; ')})`);
  }
  return violations;
}

/** Each elementary cycle found by a depth-first walk, as a list of folders ending where it began. */
function folderCycles(edges) {
  const cycles = [];
  const state = new Map();
  const stack = [];
  const visit = (f) => {
    state.set(f, 1);
    stack.push(f);
    for (const next of edges.get(f)?.keys() ?? []) {
      if (state.get(next) === 1) cycles.push([...stack.slice(stack.indexOf(next)), next]);
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(f, 2);
  };
  for (const f of [...edges.keys()].sort()) if (!state.has(f)) visit(f);
  return cycles;
}

/**
 * Imports of in-sandbox code (resources/, tests aside) that leave resources/ for anything but
 * RESOURCES_MAY_IMPORT, and imports of those files that leave the set (the bundle takes them too).
 * Type-only imports count here: a sandbox has no business naming the host's key or run types.
 */
export async function findResourceViolations(root = repoRoot) {
  const all = [...(await sources(root, 'resources')), ...(await sources(root, 'core')), ...(await sources(root, 'contracts'))].filter((f) => /\.tsx?$/.test(f) && !/\.test\.tsx?$/.test(f));
  const known = new Set(all);
  const allowed = new Set(RESOURCES_MAY_IMPORT);
  const violations = [];
  const check = async (file) => {
    const text = await readFile(path.join(root, file), 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const spec = m[1] ?? m[2] ?? m[3] ?? m[4];
      if (!spec?.startsWith('.')) continue;
      const hit = resolveLocal(root, file, spec, known) ?? path.relative(root, path.resolve(path.dirname(path.join(root, file)), spec));
      if (hit.split(path.sep)[0] === 'resources' || allowed.has(hit)) continue;
      violations.push(`${file}: in-sandbox code may not import '${spec}' (only resources/ and ${RESOURCES_MAY_IMPORT.join(', ')})`);
    }
  };
  for (const file of all.filter((f) => f.startsWith(`resources${path.sep}`))) await check(file);
  for (const file of RESOURCES_MAY_IMPORT) if (known.has(file)) await check(file);
  return violations;
}

/** The composition roots: they read the environment, the home and the engine, and hand them down. */
const AMBIENT_ROOTS = ['core/cli/entry.ts'];
/**
 * `connectEngine()` called bare (not `app.connectEngine()`, the context's method, nor its declaration
 * `connectEngine(): Promise<Engine>`), `airlockHome()` with no environment, and any `process.env`.
 */
const AMBIENT = /process\.env\b|(?<![.\w])airlockHome\(\)|(?<![.\w])connectEngine\(\)(?!\s*:)/g;
/** A line that says why it is not the host's ambient state (text of a script that runs in the sandbox). */
const NOT_AMBIENT = /ambient-ok: \S/;

/**
 * Ambient reads in core/ (tests aside) beyond the baseline: `process.env`, `airlockHome()` and
 * `connectEngine()` outside the roots. Comment lines do not count. `baseline` maps a file to the
 * reads it still has; a file not in it may have none.
 */
export async function findAmbientReads(root = repoRoot, baseline = undefined) {
  const allowed = baseline ?? JSON.parse(await readFile(path.join(root, 'scripts', 'ambient-baseline.json'), 'utf8').catch(() => '{}'));
  const violations = [];
  for (const file of await sources(root, 'core')) {
    const rel = file.split(path.sep).join('/');
    if (/\.test\.tsx?$/.test(rel) || AMBIENT_ROOTS.includes(rel)) continue;
    const text = await readFile(path.join(root, file), 'utf8');
    const code = text.split('\n').filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l) && !NOT_AMBIENT.test(l)).join('\n');
    const found = [...code.matchAll(AMBIENT)].map((m) => m[0]);
    const limit = allowed[rel] ?? 0;
    if (found.length > limit) {
      violations.push(
        `${rel}: reads ambient state (${[...new Set(found)].join(', ')}) ${found.length} time(s), ${limit} allowed. core/ takes the home, engine, keychain service and environment from the AppContext it is given (core/app-context.ts): add a parameter, do not default it (docs/architecture.md §5).`,
      );
    }
  }
  return violations;
}

const BARE_CATCH = /\.catch\(\(\) => (?:undefined|\{\}|false|null)\)|\bcatch\s*(?:\([^)]*\))?\s*\{\s*\}/g;

/**
 * Errors swallowed without a word in core/ (tests aside): `.catch(() => undefined)` (or `{}`, `false`,
 * `null`) and an empty `catch {}`, on a line with no `//` comment and not under a comment line. Each
 * goes to the debug sink (`.catch(debugLog.swallow('where'))`) or says why ignoring is right
 * (docs/architecture.md §5). `baseline` (scripts/bare-catch-baseline.json) maps a file to the bare
 * ones it still has; it may only shrink.
 */
export async function findBareCatches(root = repoRoot, baseline = undefined) {
  const allowed = baseline ?? JSON.parse(await readFile(path.join(root, 'scripts', 'bare-catch-baseline.json'), 'utf8').catch(() => '{}')); // no baseline: none allowed
  const violations = [];
  for (const file of await sources(root, 'core')) {
    const rel = file.split(path.sep).join('/');
    if (/\.test\.tsx?$/.test(rel)) continue;
    const lines = (await readFile(path.join(root, file), 'utf8')).split('\n');
    let found = 0;
    lines.forEach((line, i) => {
      const said = line.includes('//') || /^\s*(\/\/|\*|\/\*)/.test(lines[i - 1] ?? '');
      if (!said) found += [...line.matchAll(BARE_CATCH)].length;
    });
    const limit = allowed[rel] ?? 0;
    if (found > limit) {
      violations.push(`${rel}: swallows ${found} error(s) without a word, ${limit} allowed. Use .catch(debugLog.swallow('where')) (core/common/debug-log.ts) or say in a comment why ignoring is right (docs/architecture.md §5).`);
    }
  }
  return violations;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const cycles = await findImportCycles();
  const v = [...(await findViolations()), ...(await findFolderViolations()), ...(await findResourceViolations()), ...(await findAmbientReads()), ...(await findBareCatches()), ...cycles.map((c) => `import cycle in core: ${c}`)];
  for (const line of v) console.error(line);
  console.log(v.length ? `${v.length} import boundary violation(s)` : 'import boundaries: ok');
  // Citations of docs/architecture.md stay valid (scripts/check-doc-citations.mjs), so lint and CI check them too.
  const { findBrokenCitations } = await import('./check-doc-citations.mjs');
  const broken = await findBrokenCitations();
  for (const line of broken) console.error(line);
  console.log(broken.length ? `${broken.length} broken docs/architecture.md citation(s)` : 'architecture.md citations: ok');
  process.exitCode = v.length || broken.length ? 1 : 0;
}
