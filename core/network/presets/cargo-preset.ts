// Cargo: registries and source replacement of this machine; the project's own Cargo config is pending.
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { isInsideFolder } from '../../common/host-tool-env';
import { Collector, readText, type Ctx, type Preset } from './preset-context';

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

export async function cargoPreset(ctx: Ctx): Promise<Preset> {
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
