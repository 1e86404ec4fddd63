import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { Allowlist, type AllowEntry } from './allowlist';
import { isIpLiteral, normalizeHostName } from './address-checks';
import { findTool } from '../common/resolve-tool';
import { hostToolEnv, isInsideFolder } from '../common/host-tool-env';

/**
 * Allow-list presets for package managers, DERIVED FROM THIS MACHINE'S OWN CONFIGURATION of each
 * tool (the registry npm is set to, the apt sources, the pip index, GOPROXY, Cargo source
 * replacement…), so mirrors and corporate registries just work. No registry host name is written
 * in this file: when a tool is neither configured nor installed, its preset is empty and says so.
 *
 * The project is not the machine: no tool runs in the project folder or reads its configuration
 * from there (docs/architecture.md §12, "Host tools never run the project's code"). Tools run from
 * the home folder with `hostToolEnv` (toolchains pinned, Python's safe path), Python isolated (`-I`);
 * registries the project's own files name (`.npmrc`, `.cargo/config.toml`) are shown as pending,
 * never allowed by the preset.
 */

export const PRESET_NAMES = ['npm', 'pip', 'cargo', 'go', 'apt'] as const;
export type PresetName = (typeof PRESET_NAMES)[number];

/** One derived preset. `sources` says where each host came from (shown in the UI and the run record). */
export interface Preset {
  name: PresetName;
  entries: AllowEntry[];
  sources: string[];
  notes: string[];
  /**
   * Hosts the project's own config asks for (a project `.npmrc` registry or scope registry): shown,
   * never allowed by the preset. The project is not the user: it takes the user's explicit yes (an
   * allow entry, or Allow on the blocked connection) before such a host is reachable.
   */
  pending: Array<{ entry: AllowEntry; from: string }>;
}

/**
 * Runs a host tool; resolves stdout on exit 0, undefined otherwise (missing tool, error, timeout).
 * `cwd` is always the user's home folder and `env` already pinned (`hostToolEnv`).
 */
export type ToolRunner = (cmd: string, args: string[], opts: { env: NodeJS.ProcessEnv; cwd: string }) => Promise<string | undefined>;

export interface PresetContext {
  /** Environment the tools see (default `process.env`). */
  env?: NodeJS.ProcessEnv;
  /** Home directory for per-user config files (default `os.homedir()`). */
  homeDir?: string;
  /** The project directory: its `.npmrc` and `.cargo/config.toml` registries are shown as pending. No tool runs there. */
  cwd?: string;
  /** Root under which `etc/apt` and `etc/pip.conf` are read (default `/`; tests point it at fixtures). */
  rootDir?: string;
  /** Ask the installed tools (`npm config`, `pip config`, `go env`); default true. */
  useTools?: boolean;
  /** How tools are run (tests may inject). */
  runTool?: ToolRunner;
}

/** The default tool runner: execFile with a timeout and no shell. */
export const execTool: ToolRunner = async (cmd, args, opts) => {
  // The tool itself comes from PATH, never from the current folder.
  const bin = await findTool(cmd, opts.env ?? process.env);
  if (!bin) return undefined;
  return new Promise((resolve) => {
    execFile(bin, args, { env: opts.env, cwd: opts.cwd, timeout: 15_000, maxBuffer: 4 * 1024 * 1024 }, (err, stdout) => {
      resolve(err ? undefined : stdout);
    });
  });
};

interface Ctx {
  env: NodeJS.ProcessEnv;
  home: string;
  cwd: string;
  root: string;
  useTools: boolean;
  run: ToolRunner;
}

function resolveCtx(c: PresetContext = {}): Ctx {
  const home = c.homeDir ?? os.homedir();
  const cwd = c.cwd ?? process.cwd();
  const env = hostToolEnv(c.env ?? process.env);
  // Tools run from the home folder; a project that holds it (the home folder opened as a project,
  // or `/`) could plant what they read there, so then no tool runs and the files are read instead.
  const useTools = (c.useTools ?? true) && !isInsideFolder(home, cwd);
  const run = c.runTool ?? execTool;
  return { env, home, cwd, root: c.rootDir ?? '/', useTools, run: (cmd, args, opts) => run(cmd, args, { ...opts, cwd: home }) };
}

async function readText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Collects hosts from URLs, skipping non-network schemes and anything that is not a plain host name. */
class Collector {
  readonly list = new Allowlist();
  readonly sources: string[] = [];
  readonly notes: string[] = [];
  private readonly seen = new Set<string>();

  /** Adds the host of a URL (`https://h/…`, `sparse+https://h/…`, `mirror+http://h/…`); returns whether it did. */
  addUrl(url: string, from: string): boolean {
    let text = url.trim().replace(/^['"]|['"]$/g, '');
    const plus = /^(?:sparse|mirror|tor|registry)\+(.*)$/i.exec(text);
    if (plus) text = plus[1] as string;
    let u: URL;
    try {
      u = new URL(text);
    } catch {
      return false;
    }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') return false;
    const host = normalizeHostName(u.hostname);
    if (!host || isIpLiteral(u.hostname)) {
      this.note(`${from}: ${u.hostname} is an address, not a host name; the egress proxy cannot allow it`);
      return false;
    }
    const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
    this.list.add({ host, ports: [port] });
    const key = `${host}:${port} ← ${from}`;
    if (!this.seen.has(key)) {
      this.seen.add(key);
      this.sources.push(key);
    }
    return true;
  }

  note(text: string): void {
    if (!this.notes.includes(text)) this.notes.push(text);
  }

  readonly pending: Preset['pending'] = [];

  /** A host the project asks for: shown, not allowed (unless the machine's own config allows it already). */
  addPending(url: string, from: string): void {
    const probe = new Collector();
    if (!probe.addUrl(url, from)) return;
    for (const entry of probe.list.entries()) {
      const port = entry.ports?.[0];
      if (this.list.entries().some((e) => e.host === entry.host && (!e.ports || (port !== undefined && e.ports.includes(port))))) continue;
      if (this.pending.some((p) => p.entry.host === entry.host && p.entry.ports?.[0] === port)) continue;
      this.pending.push({ entry, from });
      this.note(`${from} asks for ${entry.host}${port ? `:${port}` : ''}: not allowed by the preset; allow it yourself if you trust this project (--allow ${entry.host}${port ? `:${port}` : ''}, or Allow when it is blocked)`);
    }
  }

  result(name: PresetName): Preset {
    if (this.list.entries().length === 0) {
      this.note(`no ${name} registry is configured on this machine; add its host as a custom entry`);
    }
    // A host the machine's own config allows after all (found later) is not pending.
    const allowed = (e: AllowEntry) => this.list.entries().some((a) => a.host === e.host && (!a.ports || (e.ports?.[0] !== undefined && a.ports.includes(e.ports[0]))));
    return { name, entries: this.list.entries(), sources: this.sources, notes: this.notes, pending: this.pending.filter((p) => !allowed(p.entry)) };
  }
}

// ---------------------------------------------------------------- npm

/** `key=value` lines of an .npmrc (ini without sections); `${VAR}` expanded from env. */
function parseNpmrc(text: string, env: NodeJS.ProcessEnv): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const t = line.trim();
    if (!t || t.startsWith('#') || t.startsWith(';')) continue;
    const eq = t.indexOf('=');
    if (eq < 0) continue;
    const key = t.slice(0, eq).trim();
    const value = t
      .slice(eq + 1)
      .trim()
      .replace(/^['"]|['"]$/g, '')
      .replace(/\$\{([^}]+)\}/g, (_, v: string) => env[v] ?? '');
    out.set(key, value);
  }
  return out;
}

async function npmPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  await npmMachinePreset(ctx, c);
  // The project's own .npmrc is not this machine's configuration: its registries are shown, not allowed.
  const projectNpmrc = path.join(ctx.cwd, '.npmrc');
  const userNpmrc = ctx.env.npm_config_userconfig ?? ctx.env.NPM_CONFIG_USERCONFIG ?? path.join(ctx.home, '.npmrc');
  if (path.resolve(projectNpmrc) !== path.resolve(userNpmrc)) {
    const text = await readText(projectNpmrc);
    if (text !== undefined) {
      for (const [key, value] of parseNpmrc(text, {})) {
        if (key === 'registry' || /^@[^:]+:registry$/.test(key)) c.addPending(value, `project .npmrc ${key}`);
      }
    }
  }
  return c.result('npm');
}

/** The registries of this machine's npm configuration (npm itself, else its files), without the project's. */
async function npmMachinePreset(ctx: Ctx, c: Collector): Promise<void> {
  if (ctx.useTools) {
    // npm's update check would ask the registry for its own latest version: reading config must not.
    const env = { ...ctx.env, npm_config_update_notifier: 'false' };
    // From the home folder, not the project: npm merges the .npmrc of the package folder it runs in.
    const json = await ctx.run('npm', ['config', 'list', '--json'], { env, cwd: ctx.home });
    if (json) {
      try {
        const config = JSON.parse(json) as Record<string, unknown>;
        // Only registry keys are read; auth entries in the same config are never touched.
        for (const [key, value] of Object.entries(config)) {
          if ((key === 'registry' || /^@[^:]+:registry$/.test(key)) && typeof value === 'string') {
            c.addUrl(value, `npm config ${key}`);
          }
        }
        return;
      } catch {
        c.note('could not read `npm config list --json`; fell back to .npmrc files');
      }
    }
  }
  // Without npm: the same files npm reads, lowest precedence first.
  const files = [
    ctx.env.npm_config_globalconfig ?? ctx.env.NPM_CONFIG_GLOBALCONFIG,
    ctx.env.npm_config_userconfig ?? ctx.env.NPM_CONFIG_USERCONFIG ?? path.join(ctx.home, '.npmrc'),
  ].filter((f): f is string => !!f);
  const merged = new Map<string, { value: string; from: string }>();
  for (const file of files) {
    const text = await readText(file);
    if (text === undefined) continue;
    for (const [k, v] of parseNpmrc(text, ctx.env)) merged.set(k, { value: v, from: file });
  }
  const envRegistry = ctx.env.npm_config_registry ?? ctx.env.NPM_CONFIG_REGISTRY;
  if (envRegistry) merged.set('registry', { value: envRegistry, from: 'npm_config_registry' });
  for (const [key, { value, from }] of merged) {
    if (key === 'registry' || /^@[^:]+:registry$/.test(key)) c.addUrl(value, `${from} ${key}`);
  }
}

// ---------------------------------------------------------------- pip

/** `index-url`, `extra-index-url`, `find-links` values of an INI pip.conf (continuation lines included). */
function parsePipConf(text: string): Array<{ key: string; value: string }> {
  const out: Array<{ key: string; value: string }> = [];
  let current: string | undefined;
  for (const line of text.split(/\r?\n/)) {
    if (/^\s*[#;]/.test(line) || /^\s*\[/.test(line)) {
      current = undefined;
      continue;
    }
    const kv = /^([A-Za-z_-]+)\s*[=:]\s*(.*)$/.exec(line);
    if (kv) {
      current = (kv[1] as string).toLowerCase().replace(/_/g, '-');
      for (const v of (kv[2] as string).split(/\s+/).filter(Boolean)) out.push({ key: current, value: v });
    } else if (current && /^\s+\S/.test(line)) {
      for (const v of line.trim().split(/\s+/)) out.push({ key: current, value: v });
    }
  }
  return out;
}

const PIP_URL_KEYS = new Set(['index-url', 'extra-index-url', 'find-links']);

async function pipPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  let indexConfigured = false;
  const take = (key: string, value: string, from: string) => {
    if (!PIP_URL_KEYS.has(key)) return;
    const added = c.addUrl(value, from);
    if (added && key === 'index-url') indexConfigured = true;
  };
  for (const [envName, key] of [
    ['PIP_INDEX_URL', 'index-url'],
    ['PIP_EXTRA_INDEX_URL', 'extra-index-url'],
    ['PIP_FIND_LINKS', 'find-links'],
  ] as const) {
    for (const v of (ctx.env[envName] ?? '').split(/\s+/).filter(Boolean)) take(key, v, envName);
  }
  let listed = false;
  if (ctx.useTools) {
    // Python isolated (`-I`: no working directory or user site on the import path, no PYTHON*
    // variables), never the `pip3` launcher script, whose interpreter runs without it.
    const out = await ctx.run('python3', ['-I', '-m', 'pip', 'config', 'list'], { env: ctx.env, cwd: ctx.home });
    if (out !== undefined) {
      listed = true;
      for (const line of out.split(/\r?\n/)) {
        const m = /^(\S*?)\.([a-z-]+)='(.*)'$/.exec(line.trim());
        if (!m) continue;
        for (const v of (m[3] as string).split(/\s+/).filter(Boolean)) take(m[2] as string, v, `pip config ${m[1]}.${m[2]}`);
      }
    }
  }
  if (!listed) {
    const files = [
      path.join(ctx.root, 'etc/pip.conf'),
      path.join(ctx.root, 'etc/xdg/pip/pip.conf'),
      path.join(ctx.home, '.pip/pip.conf'),
      path.join(ctx.env.XDG_CONFIG_HOME ?? path.join(ctx.home, '.config'), 'pip/pip.conf'),
      ctx.env.PIP_CONFIG_FILE,
    ].filter((f): f is string => !!f);
    for (const file of files) {
      const text = await readText(file);
      if (text === undefined) continue;
      for (const { key, value } of parsePipConf(text)) take(key, value, file);
    }
  }
  if (!indexConfigured && ctx.useTools) {
    // No index configured: ask the installed pip for its built-in default index and file host.
    const out = await ctx.run(
      'python3',
      ['-I', '-c', 'from pip._internal.models.index import PyPI\nprint(PyPI.simple_url)\nprint("https://" + PyPI.file_storage_domain + "/")'],
      { env: ctx.env, cwd: ctx.home },
    );
    if (out) for (const line of out.split(/\r?\n/).filter(Boolean)) c.addUrl(line, "pip's built-in default index");
  }
  return c.result('pip');
}

// ---------------------------------------------------------------- cargo

/** A minimal TOML reader for Cargo config: `[a.b]` / `[a."b"]` tables and `key = "string"` pairs. */
function parseCargoToml(text: string): Map<string, string> {
  const out = new Map<string, string>();
  let table = '';
  const unquote = (s: string) => s.trim().replace(/^"(.*)"$/, '$1').replace(/^'(.*)'$/, '$1');
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/\s+#.*$/, '').trim();
    if (!line || line.startsWith('#')) continue;
    const t = /^\[([^\]]+)\]$/.exec(line);
    if (t) {
      table = (t[1] as string).split('.').map(unquote).join('.');
      continue;
    }
    const kv = /^([^=]+?)\s*=\s*(".*"|'.*')$/.exec(line);
    if (!kv) continue;
    const key = (kv[1] as string).split('.').map(unquote).join('.');
    out.set(table ? `${table}.${key}` : key, unquote(kv[2] as string));
  }
  return out;
}

async function cargoPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  const cargoHome = ctx.env.CARGO_HOME ?? path.join(ctx.home, '.cargo');
  // Cargo merges config from the project's ancestors down to CARGO_HOME; nearer wins.
  const files: string[] = [];
  for (let dir = path.resolve(ctx.cwd); ; dir = path.dirname(dir)) {
    files.push(path.join(dir, '.cargo/config.toml'), path.join(dir, '.cargo/config'));
    if (path.dirname(dir) === dir) break;
  }
  files.push(path.join(cargoHome, 'config.toml'), path.join(cargoHome, 'config'));
  const config = new Map<string, { value: string; from: string; project: boolean }>();
  for (const file of files.reverse()) {
    const text = await readText(file);
    if (text === undefined) continue;
    // The project's own Cargo config (and its folders') is the project's say, not this machine's.
    const project = isInsideFolder(file, ctx.cwd);
    for (const [k, v] of parseCargoToml(text)) config.set(k, { value: v, from: file, project });
  }
  for (const [k, v] of Object.entries(ctx.env)) {
    const m = /^CARGO_REGISTRIES_([A-Z0-9_]+)_INDEX$/.exec(k);
    if (m && v) config.set(`registries.${m[1]!.toLowerCase().replace(/_/g, '-')}.index`, { value: v, from: k, project: false });
  }
  let replaced = false;
  for (const [key, { value, from, project }] of config) {
    const add = (url: string) => (project ? c.addPending(url, `project ${path.relative(ctx.cwd, from)} ${key}`) : c.addUrl(url, `${from} ${key}`));
    if (/^registries\.[^.]+\.index$/.test(key)) add(value);
    const src = /^source\.([^.]+)\.(registry|replace-with)$/.exec(key);
    if (src && src[2] === 'registry') add(value);
    if (key === 'source.crates-io.replace-with' && !project) replaced = true;
  }
  if (!replaced) {
    // The default registry is not configured anywhere; Cargo's own cache on this machine names it
    // (`registry/index/<host>-<hash>/`) and keeps its config.json with the download host.
    const indexDir = path.join(cargoHome, 'registry/index');
    let dirs: string[] = [];
    try {
      dirs = await readdir(indexDir);
    } catch {
      // No cache: nothing to derive.
    }
    for (const dir of dirs) {
      const m = /^(.+)-[0-9a-f]{16}$/.exec(dir);
      if (!m) continue;
      c.addUrl(`https://${m[1]}/`, `${indexDir}/${dir}`);
      const cfg = await readText(path.join(indexDir, dir, 'config.json'));
      if (!cfg) continue;
      try {
        const parsed = JSON.parse(cfg) as { dl?: unknown; api?: unknown };
        if (typeof parsed.dl === 'string') c.addUrl(parsed.dl, `${indexDir}/${dir}/config.json dl`);
      } catch {
        // A damaged cache entry is skipped.
      }
    }
    if (dirs.length === 0) c.note('Cargo has no source replacement and no registry cache here; run `cargo fetch` once on the host or add the registry hosts');
  }
  return c.result('cargo');
}

// ---------------------------------------------------------------- go

/** `KEY=value` lines of the file `go env -w` writes. */
function parseGoEnvFile(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split(/\r?\n/)) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) out.set(m[1] as string, m[2] as string);
  }
  return out;
}

async function goPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  let goproxy = ctx.env.GOPROXY;
  let gosumdb = ctx.env.GOSUMDB;
  let fromWhere = 'environment';
  if ((goproxy === undefined || gosumdb === undefined) && ctx.useTools) {
    // From the home folder with GOTOOLCHAIN=local: a project's go.mod `toolchain` line never makes
    // go download and run another toolchain, and no go.work of the project applies.
    const out = await ctx.run('go', ['env', 'GOPROXY', 'GOSUMDB'], { env: ctx.env, cwd: ctx.home });
    if (out !== undefined) {
      const [p, s] = out.split(/\r?\n/);
      goproxy ??= p;
      gosumdb ??= s;
      fromWhere = 'go env';
    }
  }
  if (goproxy === undefined || gosumdb === undefined) {
    const file = ctx.env.GOENV ?? path.join(ctx.env.XDG_CONFIG_HOME ?? path.join(ctx.home, '.config'), 'go/env');
    const text = await readText(file);
    if (text) {
      const vars = parseGoEnvFile(text);
      goproxy ??= vars.get('GOPROXY');
      gosumdb ??= vars.get('GOSUMDB');
      fromWhere = file;
    }
  }
  for (const part of (goproxy ?? '').split(/[,|]/).map((s) => s.trim()).filter(Boolean)) {
    if (part === 'direct') c.note('GOPROXY includes "direct": modules fetched straight from their VCS hosts need those hosts added');
    else if (part !== 'off') c.addUrl(part, `GOPROXY (${fromWhere})`);
  }
  if (gosumdb && gosumdb !== 'off') {
    // "name", "name+key" or "name+key url": the URL when given, otherwise the name is the host.
    const [name, url] = gosumdb.trim().split(/\s+/);
    const host = url ?? `https://${(name ?? '').split('+')[0]}/`;
    c.addUrl(host, `GOSUMDB (${fromWhere})`);
  }
  return c.result('go');
}

// ---------------------------------------------------------------- apt

/** URIs from one-line `deb [opts] uri suite …` lines. */
function parseAptOneLine(text: string): string[] {
  const out: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/#.*$/, '').trim();
    const m = /^deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?(\S+)/.exec(line);
    if (m) out.push(m[1] as string);
  }
  return out;
}

/** URIs from deb822 `.sources` stanzas (skipping `Enabled: no`). */
function parseAptDeb822(text: string): string[] {
  const out: string[] = [];
  for (const stanza of text.split(/\r?\n\s*\r?\n/)) {
    const fields = new Map<string, string>();
    let last: string | undefined;
    for (const raw of stanza.split(/\r?\n/)) {
      if (raw.startsWith('#')) continue;
      const kv = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(raw);
      if (kv) {
        last = (kv[1] as string).toLowerCase();
        fields.set(last, kv[2] as string);
      } else if (last && /^\s+\S/.test(raw)) {
        fields.set(last, `${fields.get(last) ?? ''} ${raw.trim()}`);
      }
    }
    if ((fields.get('enabled') ?? 'yes').trim().toLowerCase() === 'no') continue;
    out.push(...(fields.get('uris') ?? '').split(/\s+/).filter(Boolean));
  }
  return out;
}

async function aptPreset(ctx: Ctx): Promise<Preset> {
  const c = new Collector();
  const etc = path.join(ctx.root, 'etc/apt');
  const main = path.join(etc, 'sources.list');
  const text = await readText(main);
  if (text) for (const uri of parseAptOneLine(text)) c.addUrl(uri, main);
  const dir = path.join(etc, 'sources.list.d');
  let names: string[] = [];
  try {
    names = (await readdir(dir)).sort();
  } catch {
    // No sources.list.d.
  }
  for (const name of names) {
    // apt itself reads only these two extensions (".disabled", ".save"… are ignored).
    const file = path.join(dir, name);
    if (name.endsWith('.list')) {
      const t = await readText(file);
      if (t) for (const uri of parseAptOneLine(t)) c.addUrl(uri, file);
    } else if (name.endsWith('.sources')) {
      const t = await readText(file);
      if (t) for (const uri of parseAptDeb822(t)) c.addUrl(uri, file);
    }
  }
  return c.result('apt');
}

const DERIVERS: Record<PresetName, (ctx: Ctx) => Promise<Preset>> = {
  npm: npmPreset,
  pip: pipPreset,
  cargo: cargoPreset,
  go: goPreset,
  apt: aptPreset,
};

/** Derives one preset from the host's configuration of that tool. */
export async function derivePreset(name: PresetName, context?: PresetContext): Promise<Preset> {
  const derive = DERIVERS[name];
  if (!derive) {
    throw new AirlockError('INVALID_INPUT', `unknown network preset "${String(name)}"; choose one of ${PRESET_NAMES.join(', ')}`);
  }
  return derive(resolveCtx(context));
}

/** Derives several presets (in parallel). */
export function derivePresets(names: readonly PresetName[], context?: PresetContext): Promise<Preset[]> {
  return Promise.all([...new Set(names)].map((n) => derivePreset(n, context)));
}
