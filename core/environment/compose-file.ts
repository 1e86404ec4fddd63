import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { isMap, isSeq, parseDocument } from 'yaml';
import { assertRealInside, buildContextDigest } from './build-context';
import { AirlockError } from '../../contracts/errors';
import type { NotApplied } from './devcontainer-config';
import { lineColumn } from './jsonc';

/**
 * The part of a compose file Airlock applies (docs/architecture.md §16): per service `image`,
 * `build`, `environment`, `command`, `entrypoint`, `user`, `working_dir`, `healthcheck`, `tmpfs`,
 * `read_only: false`; everything that would open the sandbox's isolation (ports on the host, host
 * paths, privileges, host namespaces, other networks) is not applied and is named with the reason.
 * Parsed by `yaml` (YAML 1.2 with merge keys), line and column in syntax errors.
 */

/** Where a service's image comes from; paths are project-relative (forward slashes). */
export type ComposeImageSource =
  | { kind: 'image'; image: string }
  | { kind: 'build'; context: string; dockerfile: string; args: Record<string, string>; target?: string };

export interface ComposeHealthcheck {
  /** Docker's form: `["CMD", …]` or `["CMD-SHELL", "…"]`. */
  test: string[];
  intervalMs: number;
  timeoutMs: number;
  retries: number;
  startPeriodMs: number;
}

export interface ComposeService {
  name: string;
  source: ComposeImageSource;
  environment: Record<string, string>;
  command?: string[];
  entrypoint?: string[];
  user?: string;
  workingDir?: string;
  healthcheck?: ComposeHealthcheck;
  /** Extra writable tmpfs paths (the root filesystem is read-only). */
  tmpfs: string[];
  /** `read_only: false` written in the file: the root filesystem stays writable (recorded). */
  writableRoot: boolean;
  /** Where the service's volumes mount the project folder (a bind of it or of a folder above it), as the reference would run it. */
  projectFolder?: string;
}

export interface ComposeProject {
  services: Map<string, ComposeService>;
  notApplied: NotApplied[];
}

/** Keys that would weaken isolation, with the reason they are not applied. */
const REFUSED: Record<string, string> = {
  ports: 'ports are not published on the host; the service is reachable from the sandbox by its name',
  volumes: "host paths and volumes are not mounted: the project is copied into the sandbox, and a service's data lives in its own tmpfs and goes with the run",
  volumes_from: 'volumes are not shared between containers',
  privileged: 'privileged containers are never run',
  cap_add: 'capabilities are not added beyond the few a root entrypoint needs to drop to its own user',
  security_opt: 'security options are not applied: no-new-privileges and the default seccomp stay',
  network_mode: "host or other networking is not applied: services share only the run's internal network, which has no route out",
  networks: "other networks are not joined: services share only the run's internal network",
  devices: 'host devices are not passed in',
  device_cgroup_rules: 'host devices are not passed in',
  pid: 'host namespaces are never shared',
  ipc: 'host namespaces are never shared',
  uts: 'host namespaces are never shared',
  userns_mode: 'host namespaces are never shared',
  cgroup_parent: 'the engine places the container',
  cgroup: 'host namespaces are never shared',
  sysctls: 'kernel parameters are not changed',
  extra_hosts: 'host name overrides are not applied',
  dns: 'the network has no route out, so outside resolvers are not used',
  dns_search: 'the network has no route out, so outside resolvers are not used',
  env_file: 'environment files are not read (they often hold secrets); write the values under environment',
  external_links: 'services outside the run are not reachable',
  links: "services reach each other by name on the run's network",
  gpus: 'GPU access is not given to a sandbox',
  runtime: "the run's isolation decides the runtime",
  secrets: 'compose secrets are files of the host: not mounted',
  configs: 'compose configs are files of the host: not mounted',
  container_name: 'containers are named by the run',
  mem_limit: "Airlock's own limits apply",
  cpus: "Airlock's own limits apply",
  pids_limit: "Airlock's own limits apply",
  deploy: "Airlock's own limits apply",
};

/** Keys read above, or harmless to leave aside (start order: every service is up before the agent). */
const KNOWN = new Set(['image', 'build', 'environment', 'command', 'entrypoint', 'user', 'working_dir', 'healthcheck', 'tmpfs', 'read_only', 'depends_on', 'expose', 'restart', 'labels', 'hostname', 'init', 'stop_signal', 'stop_grace_period', 'tty', 'stdin_open', 'platform', 'profiles', 'cap_drop']);

const SERVICE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$/;

/**
 * Reads the devcontainer's compose files (later files override earlier ones per service key, as
 * `docker compose -f a -f b` does) relative to the project. Variable references (`${NAME}`,
 * `${NAME:-default}`) are not filled from the host environment — it often holds secrets — but with
 * their default or empty, and are listed as not applied.
 */
export async function loadCompose(projectDir: string, files: string[], configPath: string, hashed: Buffer[]): Promise<ComposeProject> {
  const root = path.resolve(projectDir);
  const merged = new Map<string, { raw: Record<string, unknown>; dir: string; file: string; buildDir: string; volumesDir: string }>();
  const notApplied: NotApplied[] = [];
  const hostVars = new Set<string>();
  for (const rel of files) {
    const text = await readFile(path.join(root, rel), 'utf8').catch(() => {
      throw new AirlockError('NOT_FOUND', `${configPath}: dockerComposeFile '${rel}' does not exist in the project. Add the file or fix the path.`, { field: 'environment' });
    });
    hashed.push(Buffer.from(text));
    const doc = parseDocument(text, { merge: true, prettyErrors: false });
    const err = doc.errors[0];
    if (err) {
      const at = lineColumn(text, err.pos[0]);
      throw new AirlockError('INVALID_INPUT', `${rel}:${at.line}:${at.column}: ${err.message.split('\n')[0]?.replace(/\.$/, '')}. Fix the compose file, or choose another environment (--environment airlock).`, { field: 'environment' });
    }
    const value: unknown = interpolate(doc.toJS({ maxAliasCount: 100 }), hostVars);
    if (!isRecord(value) || !isRecord(value.services)) throw invalid(rel, 'it has no services');
    for (const [name, svc] of Object.entries(value.services)) {
      if (!isRecord(svc)) throw invalid(rel, `services.${name} must be a mapping`);
      const prev = merged.get(name);
      const dir = path.dirname(path.join(root, rel));
      // As `docker compose -f a -f b` merges: mappings key by key (environment, build's args…), the
      // rest replaced; a path is relative to the file that wrote it, so `build` keeps its own file's folder.
      const raw: Record<string, unknown> = { ...(prev?.raw ?? {}), ...svc };
      if (prev && svc.environment !== undefined && prev.raw.environment !== undefined) raw.environment = { ...envRecord(prev.raw.environment), ...envRecord(svc.environment) };
      if (prev && isRecord(prev.raw.build) && isRecord(svc.build)) raw.build = { ...prev.raw.build, ...svc.build, ...(isRecord(prev.raw.build.args) && isRecord(svc.build.args) ? { args: { ...prev.raw.build.args, ...svc.build.args } } : {}) };
      const buildDir = svc.build !== undefined ? dir : (prev?.buildDir ?? dir);
      const volumesDir = svc.volumes !== undefined ? dir : (prev?.volumesDir ?? dir);
      merged.set(name, { raw, dir, file: rel, buildDir, volumesDir });
    }
  }
  for (const n of [...hostVars].sort()) {
    notApplied.push({ field: `compose \${${n}}`, reason: 'host environment variables are not read into compose files (they often hold secrets); the default written in the file, or empty, was used' });
  }
  const services = new Map<string, ComposeService>();
  for (const [name, { raw, file, buildDir, volumesDir }] of merged) {
    if (!SERVICE_NAME.test(name)) throw invalid(file, `service name '${name}' must be letters, digits, '.', '_' or '-'`);
    for (const key of Object.keys(raw)) {
      const reason = REFUSED[key] ?? (KNOWN.has(key) ? undefined : 'not supported by Airlock');
      if (reason && raw[key] !== undefined && raw[key] !== null && raw[key] !== false) notApplied.push({ field: `services.${name}.${key}`, reason });
    }
    const passThrough = Object.entries(envRecord(raw.environment)).filter(([, v]) => v === null).map(([k]) => k);
    // A bare NAME copies the host's value in compose: host variables often hold secrets, so it is left out, and said.
    if (passThrough.length) notApplied.push({ field: `services.${name}.environment ${passThrough.join(', ')}`, reason: "pass-through variables (a name with no value) would copy this machine's values into the service; they are left unset: write the values in the compose file" });
    const svc = await service(name, raw, { root, dir: buildDir, file, hashed });
    const projectFolder = mountedProject(raw.volumes, root, volumesDir);
    services.set(name, projectFolder ? { ...svc, projectFolder } : svc);
  }
  return { services, notApplied };
}

interface Ctx {
  root: string;
  dir: string;
  file: string;
  hashed: Buffer[];
}

async function service(name: string, raw: Record<string, unknown>, c: Ctx): Promise<ComposeService> {
  const where = `services.${name}`;
  let source: ComposeImageSource;
  if (raw.build !== undefined) {
    const b = typeof raw.build === 'string' ? { context: raw.build } : raw.build;
    if (!isRecord(b)) throw invalid(c.file, `${where}.build must be a path or a mapping`);
    const context = insideProject(c, typeof b.context === 'string' ? b.context : '.', `${where}.build.context`);
    const dockerfileName = typeof b.dockerfile === 'string' ? b.dockerfile : 'Dockerfile';
    const dockerfile = insideProject({ ...c, dir: path.join(c.root, context) }, dockerfileName, `${where}.build.dockerfile`);
    // Real paths, not only text; trust covers the whole context (build-context.ts).
    await assertRealInside(c.root, context, { file: c.file, field: `${where}.build.context` });
    await assertRealInside(c.root, dockerfile, { file: c.file, field: `${where}.build.dockerfile` });
    c.hashed.push(await buildContextDigest(path.join(c.root, context)).catch(() => Buffer.from('no context')));
    try {
      c.hashed.push(await readFile(path.join(c.root, dockerfile)));
    } catch {
      throw new AirlockError('NOT_FOUND', `${c.file}: ${where}.build.dockerfile '${dockerfile}' does not exist in the project. Add the file or fix the path.`, { field: 'environment' });
    }
    if (b.target !== undefined && typeof b.target !== 'string') throw invalid(c.file, `${where}.build.target must be a string`);
    source = { kind: 'build', context, dockerfile, args: envMap(b.args, c.file, `${where}.build.args`), ...(b.target ? { target: b.target } : {}) };
  } else if (typeof raw.image === 'string' && raw.image.trim()) {
    source = { kind: 'image', image: raw.image.trim() };
  } else {
    throw invalid(c.file, `${where} names no image or build, so there is nothing to run`);
  }
  const tmpfs = (Array.isArray(raw.tmpfs) ? raw.tmpfs : raw.tmpfs === undefined ? [] : [raw.tmpfs]).map((t) => {
    const p = typeof t === 'string' ? t.split(':')[0] : undefined;
    if (!p || !path.posix.isAbsolute(p) || p.split('/').includes('..')) throw invalid(c.file, `${where}.tmpfs entries must be absolute paths`);
    return path.posix.normalize(p);
  });
  if (raw.read_only !== undefined && typeof raw.read_only !== 'boolean') throw invalid(c.file, `${where}.read_only must be true or false`);
  const user = optionalText(raw.user, c.file, `${where}.user`);
  const workingDir = optionalText(raw.working_dir, c.file, `${where}.working_dir`);
  const command = argv(raw.command, c.file, `${where}.command`);
  const entrypoint = argv(raw.entrypoint, c.file, `${where}.entrypoint`);
  const healthcheck = health(raw.healthcheck, c.file, `${where}.healthcheck`);
  return {
    name,
    source,
    environment: envMap(raw.environment, c.file, `${where}.environment`),
    tmpfs,
    writableRoot: raw.read_only === false,
    ...(command ? { command } : {}),
    ...(entrypoint ? { entrypoint } : {}),
    ...(user ? { user } : {}),
    ...(workingDir ? { workingDir } : {}),
    ...(healthcheck ? { healthcheck } : {}),
  };
}

/**
 * The project's folder in the container when a volume binds it or a folder above it (`..:/workspaces/app`,
 * `../..:/workspaces`): the folder the devcontainer's `workspaceFolder` is written against. Only read, never mounted.
 */
function mountedProject(volumes: unknown, root: string, dir: string): string | undefined {
  for (const v of Array.isArray(volumes) ? volumes : []) {
    const [src, target] = typeof v === 'string' ? v.split(':') : isRecord(v) && v.type !== 'volume' ? [String(v.source ?? ''), String(v.target ?? '')] : [];
    if (!src || !target || !path.posix.isAbsolute(target) || !(src.startsWith('.') || path.isAbsolute(src))) continue;
    const below = path.relative(path.resolve(dir, src), root);
    if (below.startsWith('..') || path.isAbsolute(below)) continue;
    return path.posix.join(target, below.split(path.sep).join('/'));
  }
  return undefined;
}

/** `${NAME}`, `${NAME:-default}`, `${NAME-default}`, `$NAME` resolve to their default or empty; `$$` is `$`. */
function interpolate(v: unknown, hostVars: Set<string>): unknown {
  if (typeof v === 'string') {
    return v.replace(/\$(\$|\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))/g, (_m, _all, braced?: string, op?: string, def?: string, bare?: string) => {
      if (_all === '$') return '$';
      hostVars.add((braced ?? bare) as string);
      return op === ':-' || op === '-' ? (def ?? '') : '';
    });
  }
  if (Array.isArray(v)) return v.map((x) => interpolate(x, hostVars));
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, interpolate(x, hostVars)]));
  return v;
}

function argv(v: unknown, file: string, field: string): string[] | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'string') return ['/bin/sh', '-c', v];
  if (Array.isArray(v) && v.every((a) => typeof a === 'string' || typeof a === 'number')) return v.map(String);
  throw invalid(file, `${field} must be a command line or a list of arguments`);
}

/** Docker duration strings (`1m30s`, `500ms`, `5s`) in milliseconds. */
function duration(v: unknown, fallback: number, file: string, field: string): number {
  if (v === undefined) return fallback;
  const s = String(v);
  const parts = [...s.matchAll(/(\d+(?:\.\d+)?)(ms|us|ns|h|m|s)/g)];
  if (!parts.length || parts.map((p) => p[0]).join('') !== s) throw invalid(file, `${field} '${s}' is not a duration (e.g. 5s, 1m30s)`);
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001, ns: 0.000001 };
  return Math.round(parts.reduce((t, p) => t + Number(p[1]) * (unit[p[2] as string] as number), 0));
}

function health(v: unknown, file: string, field: string): ComposeHealthcheck | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isRecord(v)) throw invalid(file, `${field} must be a mapping`);
  if (v.disable === true) return undefined;
  const t = v.test;
  let test: string[];
  if (typeof t === 'string') test = ['CMD-SHELL', t];
  else if (Array.isArray(t) && t.length > 1 && t.every((a) => typeof a === 'string') && (t[0] === 'CMD' || t[0] === 'CMD-SHELL')) test = t as string[];
  else throw invalid(file, `${field}.test must be a command line, or ["CMD", …] / ["CMD-SHELL", "…"]`);
  const retries = v.retries === undefined ? 3 : Number(v.retries);
  if (!Number.isInteger(retries) || retries < 1) throw invalid(file, `${field}.retries must be a positive integer`);
  return {
    test,
    intervalMs: duration(v.interval, 30_000, file, `${field}.interval`),
    timeoutMs: duration(v.timeout, 30_000, file, `${field}.timeout`),
    retries,
    startPeriodMs: duration(v.start_period, 0, file, `${field}.start_period`),
  };
}

/** A service's `environment` as a mapping (a list's bare `NAME` becomes `NAME: null`, a pass-through). */
function envRecord(v: unknown): Record<string, unknown> {
  if (Array.isArray(v)) {
    const out: Record<string, unknown> = {};
    for (const e of v) {
      if (typeof e !== 'string') continue;
      const eq = e.indexOf('=');
      if (eq > 0) out[e.slice(0, eq)] = e.slice(eq + 1);
      else if (e) out[e] = null;
    }
    return out;
  }
  return isRecord(v) ? v : {};
}

function envMap(v: unknown, file: string, field: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  const out: Record<string, string> = {};
  if (Array.isArray(v)) {
    for (const e of v) {
      if (typeof e !== 'string') throw invalid(file, `${field} entries must be NAME=value`);
      const eq = e.indexOf('=');
      // A bare NAME would copy the host's value: left out (listed with the host variables by the caller's reader).
      if (eq > 0) out[e.slice(0, eq)] = e.slice(eq + 1);
    }
    return out;
  }
  if (!isRecord(v)) throw invalid(file, `${field} must be a mapping or a list of NAME=value`);
  for (const [k, x] of Object.entries(v)) {
    if (x === null || x === undefined) continue;
    if (typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean') out[k] = String(x);
    else throw invalid(file, `${field}.${k} must be a string`);
  }
  return out;
}

function insideProject(c: Ctx, p: string, field: string): string {
  const rel = path.relative(c.root, path.resolve(c.dir, p));
  if (rel.startsWith('..') || path.isAbsolute(rel)) throw invalid(c.file, `${field} '${p}' points outside the project; only the project's own files are sent to the engine`);
  return rel.split(path.sep).join('/');
}

function optionalText(v: unknown, file: string, field: string): string | undefined {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string' && typeof v !== 'number') throw invalid(file, `${field} must be a string`);
  return String(v);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !isMap(v) && !isSeq(v);
}

function invalid(file: string, what: string): AirlockError {
  return new AirlockError('INVALID_INPUT', `${file}: ${what}. Fix the compose file, or choose another environment (--environment airlock).`, { field: 'environment' });
}
