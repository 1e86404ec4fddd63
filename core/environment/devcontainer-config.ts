import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { assertRealInside, buildContextDigest } from './build-context';
import { AirlockError } from '../../contracts/errors';
import { loadCompose, type ComposeService } from './compose-file';
import { parseJsonc } from './jsonc';
import { featuresDigest, readLocalFeatures, type LocalFeature } from './local-features';
import { LIFECYCLE_HOOKS, lifecycleSteps, type LifecycleHook, type LifecycleStep } from './lifecycle';
import { substituteDeep, type Substitution, type VariableContext } from './devcontainer-variables';

/** The sandbox's workspace, where `${containerWorkspaceFolder}` points. */
export const CONTAINER_WORKSPACE = '/workspace';

export { EVERY_START_HOOKS, LIFECYCLE_HOOKS, lifecycleSteps, type LifecycleHook, type LifecycleStep } from './lifecycle';

/** An option of the config that Airlock does not apply, and why (shown in the form, the CLI, the run record). */
export interface NotApplied {
  field: string;
  reason: string;
}

export type EnvironmentSource =
  | { kind: 'image'; image: string }
  | {
      kind: 'build';
      /** Project-relative paths (forward slashes); both inside the project. */
      dockerfile: string;
      context: string;
      args: Record<string, string>;
      target?: string;
    }
  | {
      kind: 'compose';
      files: string[];
      service: string;
      runServices?: string[];
      /** The service the agent's sandbox is made from (its image or build; the rest of it is not applied). */
      workspace: ComposeService;
      /** The other services that start with the run, as sidecars (docs/architecture.md §16). */
      sidecars: ComposeService[];
      notApplied: NotApplied[];
    };

export interface DevcontainerFeature {
  id: string;
  options: Record<string, unknown>;
  /** `./name` features live in the project; everything else comes from a registry. */
  local: boolean;
}

/** A devcontainer.json, resolved (docs/architecture.md §16). */
export interface DevcontainerEnvironment {
  /** Project-relative path of the devcontainer.json. */
  configPath: string;
  name?: string;
  source: EnvironmentSource;
  containerEnv: Record<string, string>;
  remoteEnv: Record<string, string>;
  containerUser?: string;
  remoteUser?: string;
  /**
   * The folder lifecycle commands run in: `workspaceFolder` mapped into the sandbox (the project's
   * folder in the container, as the reference mounts it, is ${CONTAINER_WORKSPACE}), else ${CONTAINER_WORKSPACE}.
   */
  workFolder: string;
  lifecycle: Partial<Record<LifecycleHook, LifecycleStep[]>>;
  forwardPorts: number[];
  features: DevcontainerFeature[];
  /**
   * Every feature to install, local and published, in install order, once published ones are fetched
   * and pinned (published-features.ts `pinFeatures`); absent before.
   */
  installed?: LocalFeature[];
  notApplied: NotApplied[];
  /** Host variables the user allowed by name and that the config uses. */
  localEnvUsed: string[];
  /** sha256 of the config and the files it builds from (Dockerfile, compose files): what trust is given to. */
  contentHash: string;
}

export interface ResolveOptions {
  /** The root's environment, which `${localEnv:NAME}` reads (only names in `allowedLocalEnv` are used). */
  env: NodeJS.ProcessEnv;
  /** `${localEnv:NAME}` names the user allowed (non-secret, explicit, recorded). */
  allowedLocalEnv?: readonly string[];
}

/** Options that would weaken the sandbox, never applied (docs/architecture.md §16). */
const REFUSED: Record<string, string> = {
  initializeCommand: 'it runs on the host, outside any sandbox',
  runArgs: "extra engine options are not applied: every sandbox gets Airlock's hardened settings",
  mounts: 'host mounts are not applied: the project is copied in, nothing of the host is mounted',
  workspaceMount: 'host mounts are not applied: the project is copied in, nothing of the host is mounted',
  privileged: 'privileged containers are never run',
  capAdd: 'capabilities are never added: the sandbox drops them all',
  securityOpt: "security options are not applied: the sandbox keeps no-new-privileges and the engine's default seccomp",
  appPort: 'ports are not published on the host; forwarded ports are offered as preview ports',
};

/** Stand-ins for `${containerWorkspaceFolder}` until `workspaceFolder` is mapped into the sandbox. */
const WORK_FOLDER = '\u0000airlock-work-folder\u0000';
const WORK_FOLDER_BASENAME = '\u0000airlock-work-folder-basename\u0000';

/** runArgs that ask for something specific, named in the message. */
const RUN_ARG_HINTS: Array<[RegExp, string]> = [
  [/^--(network|net)(=|$)/, 'host or other networking (the sandbox has no network but its channel)'],
  [/^--gpus(=|$)/, 'GPU access'],
  [/^--privileged$/, 'privileged mode'],
  [/^--cap-add(=|$)/, 'added capabilities'],
  [/^(-v|--volume|--mount)(=|$)/, 'host mounts'],
  [/^--device(=|$)/, 'host devices'],
];

/** Where a project's environment is read for: Airlock's data folder and the root's environment (`${localEnv:…}`). */
export interface EnvironmentHost {
  home: string;
  env: NodeJS.ProcessEnv;
}

/** Reads and resolves one devcontainer.json of a project. */
export async function loadDevcontainer(projectDir: string, configPath: string, opts: ResolveOptions): Promise<DevcontainerEnvironment> {
  const root = path.resolve(projectDir);
  const abs = path.resolve(root, configPath);
  let text: string;
  try {
    text = await readFile(abs, 'utf8');
  } catch (err) {
    throw new AirlockError('NOT_FOUND', `${configPath} is not readable (${(err as NodeJS.ErrnoException).code ?? 'error'}). Check the path, or choose another environment (--environment airlock).`, { cause: err, field: 'environment' });
  }
  const raw = parseJsonc(text, configPath);
  if (!isRecord(raw)) throw invalid(configPath, 'the file must hold one JSON object');

  const refusedLocalEnv: Substitution = { refusedLocalEnv: new Set() };
  const allowed = opts.allowedLocalEnv ?? [];
  const ctx: VariableContext = {
    localWorkspaceFolder: root,
    containerWorkspaceFolder: WORK_FOLDER,
    containerWorkspaceFolderBasename: WORK_FOLDER_BASENAME,
    env: opts.env,
    allowedLocalEnv: allowed,
    devcontainerId: createHash('sha256').update(`${root}\0${configPath}`).digest('hex').slice(0, 16),
  };
  const containerEnv = stringMap(substituteDeep(raw.containerEnv, ctx, refusedLocalEnv), configPath, 'containerEnv');
  // `customizations` are for tools (VS Code's settings and extensions): not read, so their variables are not either.
  const { customizations: _tools, ...read } = raw;
  const substituted = substituteDeep(read, ctx, refusedLocalEnv);
  const configDir = path.dirname(abs);
  const hashed: Buffer[] = [Buffer.from(text)];

  const resolvedSource = await resolveSource(substituted, { root, configDir, configPath, hashed });
  const notApplied: NotApplied[] = [];
  const work = workFolder(substituted, resolvedSource, root);
  if (work.notApplied) notApplied.push(work.notApplied);
  const inFolder = (v: string): string => v.split(WORK_FOLDER).join(work.folder).split(WORK_FOLDER_BASENAME).join(path.posix.basename(work.folder));
  const cfg = mapStrings(substituted, inFolder);
  const inProject = projectPaths(work.project);
  const source = mapStrings(resolvedSource, inFolder);
  for (const [field, reason] of Object.entries(REFUSED)) {
    const v = cfg[field];
    if (v === undefined || v === false || (Array.isArray(v) && v.length === 0)) continue;
    notApplied.push({ field, reason: field === 'runArgs' ? runArgsReason(v, reason) : reason });
  }
  for (const field of ['remoteUser', 'containerUser'] as const) {
    if (typeof cfg[field] === 'string' && cfg[field]) notApplied.push({ field, reason: `setup and the agent run as uid 1000 (airlock) with no capabilities, not as '${cfg[field]}'` });
  }
  if (cfg.overrideCommand === false) notApplied.push({ field: 'overrideCommand', reason: "the image's own entrypoint and command are not started: the sandbox's process is Airlock's helper; start a service the project needs in postStartCommand" });
  const gpu = isRecord(cfg.hostRequirements) ? cfg.hostRequirements.gpu : undefined;
  if (gpu !== undefined && gpu !== false) notApplied.push({ field: 'hostRequirements.gpu', reason: 'GPU access is not given to a sandbox' });
  for (const name of [...refusedLocalEnv.refusedLocalEnv].sort()) {
    notApplied.push({ field: `\${localEnv:${name}}`, reason: `host environment variables are not copied into the sandbox (they often hold secrets); it was left empty or at its default. Allow it by name only if it is not a secret` });
  }

  const lifecycle: DevcontainerEnvironment['lifecycle'] = {};
  for (const hook of LIFECYCLE_HOOKS) {
    const steps = lifecycleSteps(mapStrings(cfg[hook], inProject), configPath, hook);
    if (steps) lifecycle[hook] = steps;
  }
  if (source.kind === 'compose') notApplied.push(...source.notApplied);
  const declaredFeatures = features(cfg.features, configPath);
  // Local features are built into the image: their files are part of what trust is given to.
  if (declaredFeatures.some((f) => f.local)) {
    const local = await readLocalFeatures(root, { configPath, features: declaredFeatures });
    hashed.push(featuresDigest(local));
    for (const f of local) for (const [key, reason] of Object.entries(f.refused)) notApplied.push({ field: `features["${f.id}"].${key}`, reason });
  }
  const h = createHash('sha256');
  for (const b of hashed) h.update(createHash('sha256').update(b).digest());

  return {
    configPath,
    ...(typeof cfg.name === 'string' ? { name: cfg.name } : {}),
    source,
    containerEnv: mapStrings(mapStrings(containerEnv, inFolder), inProject),
    remoteEnv: mapStrings(stringMap(cfg.remoteEnv, configPath, 'remoteEnv'), inProject),
    workFolder: work.folder,
    ...(optionalString(cfg.containerUser, configPath, 'containerUser') ? { containerUser: cfg.containerUser as string } : {}),
    ...(optionalString(cfg.remoteUser, configPath, 'remoteUser') ? { remoteUser: cfg.remoteUser as string } : {}),
    lifecycle,
    forwardPorts: forwardPorts(cfg.forwardPorts, configPath, notApplied),
    features: declaredFeatures,
    notApplied,
    localEnvUsed: allowed.filter((n) => text.includes(`localEnv:${n}`) || text.includes(`env:${n}`)),
    contentHash: h.digest('hex'),
  };
}

/**
 * Where lifecycle commands run (docs/architecture.md §16): the reference mounts the project at
 * `/workspaces/<folder name>` (or workspaceMount's target, or where a compose volume binds it) and runs
 * them in `workspaceFolder`; Airlock's project is at ${CONTAINER_WORKSPACE}, so a workspaceFolder inside
 * the project maps to the same folder under it. One outside the project is named as not applied.
 */
function workFolder(cfg: Record<string, unknown>, source: EnvironmentSource, root: string): { folder: string; project?: string; notApplied?: NotApplied } {
  const mountTarget = typeof cfg.workspaceMount === 'string' ? /(?:^|,)(?:target|dst|destination)=([^,]+)/.exec(cfg.workspaceMount)?.[1] : undefined;
  const project = source.kind === 'compose' ? source.workspace.projectFolder : (mountTarget ?? `/workspaces/${path.basename(root)}`);
  const asked = typeof cfg.workspaceFolder === 'string' && cfg.workspaceFolder ? path.posix.normalize(cfg.workspaceFolder).replace(/(.)\/$/, '$1') : source.kind === 'compose' ? '/' : project;
  if (project && asked) {
    const below = path.posix.relative(project, asked);
    if (!below.startsWith('..') && !path.posix.isAbsolute(below)) return { folder: path.posix.join(CONTAINER_WORKSPACE, below), project };
  }
  return {
    folder: CONTAINER_WORKSPACE,
    ...(project ? { project } : {}),
    notApplied: { field: 'workspaceFolder', reason: `'${asked}' is not inside the project's folder${project ? ` (${project})` : ' (the compose file does not mount it)'}: the project is copied to ${CONTAINER_WORKSPACE} and setup commands run there` },
  };
}

/**
 * The project's folder in the reference's container written out in a command or a variable
 * (`node /workspaces/app/tool.mjs` where the project is mounted at `/workspaces`) names the same file
 * under ${CONTAINER_WORKSPACE} in the sandbox: rewritten there, whole path segments only. Never
 * applied to host paths (build contexts, compose files).
 */
function projectPaths(project: string | undefined): (s: string) => string {
  if (!project || project === '/' || project === CONTAINER_WORKSPACE) return (s) => s;
  const re = new RegExp(`(?<![\\w./-])${project.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=$|[/\\s"':;])`, 'g');
  return (s) => s.replace(re, CONTAINER_WORKSPACE);
}

function mapStrings<T>(v: T, f: (s: string) => string): T {
  if (typeof v === 'string') return f(v) as T;
  if (Array.isArray(v)) return v.map((x) => mapStrings(x, f)) as T;
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, mapStrings(x, f)])) as T;
  return v;
}

interface SourceCtx {
  root: string;
  configDir: string;
  configPath: string;
  hashed: Buffer[];
}

async function resolveSource(cfg: Record<string, unknown>, c: SourceCtx): Promise<EnvironmentSource> {
  const build = isRecord(cfg.build) ? cfg.build : undefined;
  const dockerfile = build?.dockerfile ?? build?.dockerFile ?? cfg.dockerFile;
  if (cfg.dockerComposeFile !== undefined) {
    const files = (Array.isArray(cfg.dockerComposeFile) ? cfg.dockerComposeFile : [cfg.dockerComposeFile]).map((f) => {
      if (typeof f !== 'string' || !f) throw invalid(c.configPath, 'dockerComposeFile must be a path or a list of paths');
      return inside(c, f, 'dockerComposeFile');
    });
    if (typeof cfg.service !== 'string' || !cfg.service) throw invalid(c.configPath, 'a dockerComposeFile configuration needs "service": the service the agent works in');
    const runServices = Array.isArray(cfg.runServices) ? cfg.runServices.filter((s): s is string => typeof s === 'string') : undefined;
    for (const f of files) await assertRealInside(c.root, f, { file: c.configPath, field: 'dockerComposeFile' });
    const project = await loadCompose(c.root, files, c.configPath, c.hashed);
    const workspace = project.services.get(cfg.service);
    const names = [...project.services.keys()];
    if (!workspace) throw invalid(c.configPath, `service '${cfg.service}' is not in ${files.join(', ')} (it has ${names.join(', ') || 'no services'})`);
    for (const s of runServices ?? []) if (!project.services.has(s)) throw invalid(c.configPath, `runServices names '${s}', which is not a service of ${files.join(', ')} (it has ${names.join(', ')})`);
    const sidecars = [...project.services.values()].filter((s) => s.name !== cfg.service && (!runServices || runServices.includes(s.name)));
    const notApplied = project.notApplied;
    return { kind: 'compose', files, service: cfg.service, ...(runServices ? { runServices } : {}), workspace, sidecars, notApplied };
  }
  if (dockerfile !== undefined) {
    if (typeof dockerfile !== 'string' || !dockerfile) throw invalid(c.configPath, 'build.dockerfile must be a path');
    const rel = inside(c, dockerfile, 'build.dockerfile');
    // Real paths, not only text: a link may not lead the build out of the project (build-context.ts).
    await assertRealInside(c.root, rel, { file: c.configPath, field: 'build.dockerfile' });
    c.hashed.push(await readInside(c.root, rel, c.configPath, 'build.dockerfile'));
    // No context: the Dockerfile's own folder, as the reference CLI builds it.
    const given = build?.context ?? cfg.context;
    const context = typeof given === 'string' ? inside(c, given, 'build.context') : path.posix.dirname(rel) === '.' ? '' : path.posix.dirname(rel);
    await assertRealInside(c.root, context, { file: c.configPath, field: 'build.context' });
    const ctxStat = await stat(path.join(c.root, context)).catch(() => undefined); // missing: refused just below as not a folder
    if (!ctxStat?.isDirectory()) throw invalid(c.configPath, `build.context '${context || '.'}' is not a folder of the project`);
    // Trust covers every file the build can read: the whole context as the engine would get it.
    c.hashed.push(await buildContextDigest(path.join(c.root, context)));
    const args = stringMap(build?.args, c.configPath, 'build.args');
    const target = build?.target;
    if (target !== undefined && typeof target !== 'string') throw invalid(c.configPath, 'build.target must be a string');
    return { kind: 'build', dockerfile: rel, context, args, ...(target ? { target } : {}) };
  }
  if (typeof cfg.image === 'string' && cfg.image.trim()) return { kind: 'image', image: cfg.image.trim() };
  throw invalid(c.configPath, 'it names no image, build.dockerfile or dockerComposeFile, so there is nothing to run');
}

/** A path the config names, relative to its folder, as a project-relative path; refused when it leaves the project. */
function inside(c: SourceCtx, p: string, field: string): string {
  const abs = path.resolve(c.configDir, p);
  const rel = path.relative(c.root, abs);
  if (rel.startsWith('..') || path.isAbsolute(rel)) throw invalid(c.configPath, `${field} '${p}' points outside the project; only the project's own files are sent to the engine`);
  return rel.split(path.sep).join('/');
}

async function readInside(root: string, rel: string, configPath: string, field: string): Promise<Buffer> {
  try {
    return await readFile(path.join(root, rel));
  } catch {
    throw new AirlockError('NOT_FOUND', `${configPath}: ${field} '${rel}' does not exist in the project. Add the file or fix the path in ${configPath}.`, { field: 'environment' });
  }
}

/**
 * `forwardPorts`: the sandbox's own ports (a number, `"3000"`, `"localhost:3000"`) are offered as
 * preview ports. A compose service's port (`"db:5432"`) is not: sidecars are on the run's internal
 * network, which nothing outside the run reaches, the host included (docs/architecture.md §16); it is
 * listed as not applied with the reason, and so is an entry that is no port.
 */
function forwardPorts(v: unknown, file: string, notApplied: NotApplied[]): number[] {
  if (v === undefined) return [];
  if (!Array.isArray(v)) throw invalid(file, 'forwardPorts must be a list of ports');
  const ports: number[] = [];
  const refused: NotApplied[] = [];
  for (const p of v) {
    // A host part is a compose service name (letters, digits, '.', '_', '-'; at most 63).
    const m = typeof p === 'string' ? /^(?:([A-Za-z0-9][A-Za-z0-9_.-]{0,62}):)?(\d{1,5})$/.exec(p.trim()) : null;
    const n = typeof p === 'number' ? p : m ? Number(m[2]) : NaN;
    const host = m?.[1]?.toLowerCase();
    const valid = Number.isInteger(n) && n > 0 && n < 65536;
    if (valid && (host === undefined || host === 'localhost' || host === '127.0.0.1')) {
      if (!ports.includes(n)) ports.push(n);
    } else if (valid && host) {
      refused.push({
        field: `forwardPorts ${JSON.stringify(p)}`,
        reason: `a compose service's port is not offered as a preview port: services run on the run's internal network, which has no route in or out (the host holds no address on it); the agent's commands reach it as ${host}:${n}`,
      });
    } else {
      refused.push({ field: `forwardPorts ${JSON.stringify(p)?.slice(0, 60) ?? typeof p}`, reason: 'not a port (1-65535) or service:port' });
    }
  }
  // The record keeps at most 100 ports and a bounded not-applied list: the rest is counted, not listed.
  const extra = Math.max(0, ports.length - MAX_FORWARD_PORTS) + Math.max(0, refused.length - MAX_FORWARD_REFUSED);
  notApplied.push(...refused.slice(0, MAX_FORWARD_REFUSED));
  if (extra > 0) notApplied.push({ field: 'forwardPorts', reason: `${extra} more entries were not read (at most ${MAX_FORWARD_PORTS} ports and ${MAX_FORWARD_REFUSED} other entries are)` });
  return ports.slice(0, MAX_FORWARD_PORTS);
}

const MAX_FORWARD_PORTS = 100;
const MAX_FORWARD_REFUSED = 20;

function features(v: unknown, file: string): DevcontainerFeature[] {
  if (v === undefined) return [];
  if (!isRecord(v)) throw invalid(file, 'features must be an object of feature ids to options');
  return Object.entries(v).map(([id, options]) => ({ id, options: isRecord(options) ? options : {}, local: id.startsWith('./') || id.startsWith('../') }));
}

function runArgsReason(v: unknown, reason: string): string {
  const args = Array.isArray(v) ? v.filter((a): a is string => typeof a === 'string') : [];
  const named = [...new Set(args.flatMap((a) => RUN_ARG_HINTS.filter(([re]) => re.test(a)).map(([, what]) => what)))];
  return named.length ? `${reason} (asked for: ${named.join(', ')})` : reason;
}

function stringMap(v: unknown, file: string, field: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isRecord(v)) throw invalid(file, `${field} must be an object of names to strings`);
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) {
    if (typeof x === 'string') out[k] = x;
    else if (typeof x === 'number' || typeof x === 'boolean') out[k] = String(x);
    else if (x !== null) throw invalid(file, `${field}.${k} must be a string`);
  }
  return out;
}

function optionalString(v: unknown, file: string, field: string): boolean {
  if (v === undefined) return false;
  if (typeof v !== 'string') throw invalid(file, `${field} must be a string`);
  return v.length > 0;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function invalid(file: string, what: string): AirlockError {
  return new AirlockError('INVALID_INPUT', `${file}: ${what}. Fix the file, or choose another environment (--environment airlock).`, { field: 'environment' });
}
