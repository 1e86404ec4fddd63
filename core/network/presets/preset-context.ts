import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { Allowlist, type AllowEntry } from '../allowlist';
import { isIpLiteral, normalizeHostName } from '../address-checks';
import { findTool } from '../../common/resolve-tool';
import { hostToolEnv, isInsideFolder } from '../../common/host-tool-env';

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
  /** The host's environment the tools see (the user's own settings, on purpose), from the root. */
  env: NodeJS.ProcessEnv;
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
  const bin = await findTool(cmd, opts.env);
  if (!bin) return undefined;
  return new Promise((resolve) => {
    execFile(bin, args, { env: opts.env, cwd: opts.cwd, timeout: 15_000, maxBuffer: 4 * 1024 * 1024 }, (err, stdout) => {
      resolve(err ? undefined : stdout);
    });
  });
};

/** A resolved `PresetContext`: tools run from the home folder with the pinned environment. */
export interface Ctx {
  env: NodeJS.ProcessEnv;
  home: string;
  cwd: string;
  root: string;
  useTools: boolean;
  run: ToolRunner;
}

export function resolveCtx(c: PresetContext): Ctx {
  const home = c.homeDir ?? os.homedir();
  const cwd = c.cwd ?? process.cwd();
  const env = hostToolEnv(c.env);
  // Tools run from the home folder; a project that holds it (the home folder opened as a project,
  // or `/`) could plant what they read there, so then no tool runs and the files are read instead.
  const useTools = (c.useTools ?? true) && !isInsideFolder(home, cwd);
  const run = c.runTool ?? execTool;
  return { env, home, cwd, root: c.rootDir ?? '/', useTools, run: (cmd, args, opts) => run(cmd, args, { ...opts, cwd: home }) };
}

/** A file's text, or undefined when it cannot be read. */
export async function readText(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Collects hosts from URLs, skipping non-network schemes and anything that is not a plain host name. */
export class Collector {
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
