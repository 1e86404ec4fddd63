import { createHash } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { AirlockError } from '../../contracts/errors';
import type { ImageProgress } from '../sandbox/driver';
import { buildContextTar } from '../sandbox/image';
import type { DevcontainerEnvironment, DevcontainerFeature } from './devcontainer-config';
import { LIFECYCLE_HOOKS, lifecycleSteps, type LifecycleHook, type LifecycleStep } from './lifecycle';
import { BASE_REPOSITORY } from './derived-image';
import { engineBuild, imageId } from './engine-build';
import { parseJsonc } from './jsonc';

/**
 * Local devcontainer features (docs/architecture.md §16): a `./name` feature is a folder of the
 * project beside devcontainer.json with `devcontainer-feature.json` and `install.sh`. Each is run as
 * root in a build step on top of the user's image, in the order written, with its options as
 * environment variables (the spec's names: upper case, other characters `_`; defaults from the
 * feature's `options`), and its `containerEnv` becomes the image's ENV. Published features (an OCI
 * reference) are not fetched: they are refused naming the feature.
 */

/** A feature folder's files, bounded: a feature is a script and its few helpers, not a payload. */
const MAX_FEATURE_BYTES = 16 * 1024 * 1024;

/** What a feature may ask of its container that a hardened sandbox does not grant (named, never applied). */
const FEATURE_REFUSED: Record<string, string> = {
  privileged: 'privileged containers are never run',
  capAdd: 'capabilities are never added: the sandbox drops them all',
  securityOpt: "security options are not applied: the sandbox keeps no-new-privileges and Airlock's seccomp profile",
  init: "no init process is added: the sandbox's process is Airlock's helper, which reaps what it starts",
  mounts: 'mounts are not applied: nothing of the host is mounted',
  entrypoint: "the feature's entrypoint is not started: the sandbox's process is Airlock's helper; start a service in postStartCommand",
};

export interface LocalFeature {
  id: string;
  /** Project-relative folder. */
  dir: string;
  files: Record<string, Buffer>;
  env: Record<string, string>;
  containerEnv: Record<string, string>;
  /** What its devcontainer-feature.json asks that the sandbox does not grant, with the reason (named as not applied). */
  refused: Record<string, string>;
  /** `id` of its devcontainer-feature.json, when it has one (what other features name it by). */
  metaId?: string;
  /** Feature ids it is installed after when they are in the configuration (soft: absent ones are ignored). */
  installsAfter: string[];
  /** Feature ids it needs installed first (hard: each must be a local feature of the configuration). */
  dependsOn: string[];
  /** Its devcontainer-feature.json's lifecycle commands (run before the configuration's own, in install order). */
  lifecycle: Partial<Record<LifecycleHook, LifecycleStep[]>>;
  /** Its devcontainer-feature.json's `version`. */
  version?: string;
  /** A published feature: where it came from and the manifest digest it is pinned by. */
  published?: { resource: string; digest: string };
}

/** The folder of a local feature, relative to the project; refused when it leaves the project. */
export function featureDir(cfg: Pick<DevcontainerEnvironment, 'configPath'>, id: string): string {
  const dir = path.posix.normalize(path.posix.join(path.posix.dirname(cfg.configPath), id));
  if (dir.startsWith('..') || path.posix.isAbsolute(dir)) throw invalid(cfg.configPath, `feature '${id}' points outside the project`);
  return dir;
}

/**
 * Reads each local feature (files, options, containerEnv) and puts them in install order
 * (`orderLocalFeatures`); a missing or malformed one is INVALID_INPUT naming it.
 */
export async function readLocalFeatures(projectDir: string, cfg: Pick<DevcontainerEnvironment, 'configPath' | 'features'>): Promise<LocalFeature[]> {
  const out: LocalFeature[] = [];
  for (const f of cfg.features.filter((x) => x.local)) out.push(await readFeature(projectDir, cfg, f));
  return orderLocalFeatures(out, cfg.configPath);
}

/**
 * The install order of local features (docs/architecture.md §16): each after the features its
 * `dependsOn` and `installsAfter` name, otherwise in the order written (a stable topological sort).
 * A reference matches a feature of the configuration by its key as written (`./node`), its folder
 * name (`node`) or the `id` in its devcontainer-feature.json. `installsAfter` naming a feature the
 * configuration does not have is ignored, as the spec says; `dependsOn` naming one is an error (a
 * published feature would be fetched, which Airlock does not do). A cycle is an error naming it.
 */
export function orderLocalFeatures(features: LocalFeature[], configPath: string): LocalFeature[] {
  const index = new Map<string, number>();
  features.forEach((f, i) => {
    for (const name of featureNames(f)) if (!index.has(name)) index.set(name, i);
  });
  const after: Array<Set<number>> = features.map(() => new Set<number>());
  features.forEach((f, i) => {
    for (const ref of f.dependsOn) {
      const j = index.get(normalizeRef(ref));
      if (j === undefined) {
        throw invalid(configPath, `feature '${f.id}' depends on '${ref}', which is not one of its local features; add it to "features" as a local feature ("./name")`);
      }
      if (j !== i) after[i]!.add(j);
    }
    for (const ref of f.installsAfter) {
      const j = index.get(normalizeRef(ref));
      if (j !== undefined && j !== i) after[i]!.add(j);
    }
  });
  const done = new Set<number>();
  const order: LocalFeature[] = [];
  while (order.length < features.length) {
    // The first feature as written whose predecessors are all installed.
    const next = features.findIndex((_, i) => !done.has(i) && [...after[i]!].every((j) => done.has(j)));
    if (next < 0) throw invalid(configPath, `features ${cycleOf(features, after, done)} name each other in installsAfter/dependsOn, so no order installs each after the other; remove one of these references`);
    done.add(next);
    order.push(features[next]!);
  }
  return order;
}

/** The names a feature can be referred to by (normalised as `normalizeRef` does). */
function featureNames(f: LocalFeature): string[] {
  const names = [normalizeRef(f.id), normalizeRef(path.posix.basename(f.dir))];
  if (f.metaId) names.push(normalizeRef(f.metaId));
  return names;
}

/** `./node/`, `node`, `NODE` → `node`; a published id loses its version or digest (`…/go:1` → `…/go`). */
function normalizeRef(ref: string): string {
  const r = ref.trim().toLowerCase().replace(/^\.\//, '').replace(/\/+$/, '');
  return r.includes('/') ? r.replace(/(@sha256:[0-9a-f]+|:[^/:]+)$/, '') : r;
}

/** One cycle among the features not yet ordered, as `'./a' → './b' → './a'`. */
function cycleOf(features: LocalFeature[], after: Array<Set<number>>, done: Set<number>): string {
  const start = features.findIndex((_, i) => !done.has(i));
  const seen: number[] = [];
  let at = start;
  // Every unordered feature waits on another unordered one, so this walk must come back to a feature it met.
  while (!seen.includes(at)) {
    seen.push(at);
    at = [...after[at]!].find((j) => !done.has(j)) ?? start;
  }
  const loop = seen.slice(seen.indexOf(at));
  return [...loop, at].map((i) => `'${features[i]!.id}'`).join(' → ');
}

async function readFeature(projectDir: string, cfg: Pick<DevcontainerEnvironment, 'configPath'>, f: DevcontainerFeature): Promise<LocalFeature> {
  const dir = featureDir(cfg, f.id);
  const abs = path.join(projectDir, dir);
  const files: Record<string, Buffer> = {};
  let total = 0;
  const walk = async (d: string, rel: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      // Symlinks could point anywhere on the host: a feature's files are its own.
      if ((await lstat(p)).isSymbolicLink()) throw invalid(cfg.configPath, `feature '${f.id}' has a symbolic link (${r}); features are copied as plain files`);
      if (e.isDirectory()) await walk(p, r);
      else if (e.isFile()) {
        const b = await readFile(p);
        total += b.length;
        if (total > MAX_FEATURE_BYTES) throw invalid(cfg.configPath, `feature '${f.id}' is larger than ${MAX_FEATURE_BYTES >> 20} MiB`);
        files[r] = b;
      }
    }
  };
  try {
    await walk(abs, '');
  } catch (err) {
    if (err instanceof AirlockError) throw err;
    throw new AirlockError('NOT_FOUND', `${cfg.configPath}: feature '${f.id}' is not a folder of the project (${dir}). Add it, or remove it from "features".`, { field: 'environment' });
  }
  return featureFromFiles(cfg.configPath, f, dir, files);
}

/**
 * A feature from its files (a local folder's, or a published feature's unpacked layer): options as
 * variables (the feature's defaults under the user's values), containerEnv, ordering hints, what it
 * asks that the sandbox does not grant, and its lifecycle commands (run before the config's own).
 */
export function featureFromFiles(configPath: string, f: Pick<DevcontainerFeature, 'id' | 'options'>, dir: string, files: Record<string, Buffer>): LocalFeature {
  const meta = files['devcontainer-feature.json'];
  if (!meta) throw invalid(configPath, `feature '${f.id}' has no devcontainer-feature.json`);
  if (!files['install.sh']) throw invalid(configPath, `feature '${f.id}' has no install.sh`);
  const json = parseJsonc(meta.toString('utf8'), `${dir}/devcontainer-feature.json`);
  const m = typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as Record<string, unknown>) : {};
  const env: Record<string, string> = {};
  const options = typeof m.options === 'object' && m.options !== null ? (m.options as Record<string, { default?: unknown }>) : {};
  for (const [name, o] of Object.entries(options)) if (o && o.default !== undefined) env[optionEnvName(name)] = String(o.default);
  for (const [name, v] of Object.entries(f.options)) {
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') env[optionEnvName(name)] = String(v);
  }
  const containerEnv: Record<string, string> = {};
  if (typeof m.containerEnv === 'object' && m.containerEnv !== null) {
    for (const [k, v] of Object.entries(m.containerEnv as Record<string, unknown>)) if (typeof v === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(k)) containerEnv[k] = v;
  }
  const metaId = typeof m.id === 'string' && m.id.trim() ? m.id.trim() : undefined;
  const installsAfter = Array.isArray(m.installsAfter) ? m.installsAfter.filter((x): x is string => typeof x === 'string') : [];
  const dependsOn = typeof m.dependsOn === 'object' && m.dependsOn !== null && !Array.isArray(m.dependsOn) ? Object.keys(m.dependsOn) : [];
  const refused: Record<string, string> = {};
  for (const [key, reason] of Object.entries(FEATURE_REFUSED)) {
    const v = m[key];
    if (v !== undefined && v !== false && !(Array.isArray(v) && v.length === 0)) refused[key] = reason;
  }
  const lifecycle: LocalFeature['lifecycle'] = {};
  for (const hook of LIFECYCLE_HOOKS) {
    const steps = lifecycleSteps(m[hook], `${dir}/devcontainer-feature.json`, hook);
    if (steps) lifecycle[hook] = steps;
  }
  const version = typeof m.version === 'string' ? m.version : undefined;
  return { id: f.id, dir, files, env, containerEnv, installsAfter, dependsOn, refused, lifecycle, ...(metaId ? { metaId } : {}), ...(version ? { version } : {}) };
}


/** The spec's option → variable name: `version` → `VERSION`, `install-tools` → `INSTALL_TOOLS`. */
export function optionEnvName(option: string): string {
  return option.replace(/[^\w_]/g, '_').replace(/^[\d_]+/g, '_').toUpperCase();
}

/** The bytes trust is given to: every file of every local feature. */
export function featuresDigest(features: LocalFeature[]): Buffer {
  const h = createHash('sha256');
  for (const f of features) {
    h.update(`${f.id}\0`);
    for (const name of Object.keys(f.files).sort()) h.update(`${name}\0`).update(f.files[name] as Buffer);
  }
  return h.digest();
}

/** The build step that installs the features on top of the base image (root, then the derive step sets uid 1000). */
export function featuresDockerfile(baseRef: string, features: LocalFeature[]): string {
  const lines = [`# local devcontainer features: docs/architecture.md §16`, `FROM ${baseRef}`, 'USER 0:0'];
  features.forEach((f, i) => {
    const dir = `/tmp/airlock-feature-${i}`;
    // Installed system-wide as root before uid 1000 exists in the image (the derive step adds it).
    const env = Object.entries({ ...f.env, _REMOTE_USER: 'root', _CONTAINER_USER: 'root', _REMOTE_USER_HOME: '/root', _CONTAINER_USER_HOME: '/root' })
      .map(([k, v]) => `${k}=${shellQuote(v)}`)
      .join(' ');
    lines.push(`COPY payload/f${i}/ ${dir}/`);
    lines.push(`RUN cd ${dir} && chmod +x install.sh && env ${env} ./install.sh && cd / && rm -rf ${dir}`);
    for (const [k, v] of Object.entries(f.containerEnv)) lines.push(`ENV ${k}=${JSON.stringify(v)}`);
  });
  return `${lines.join('\n')}\n`;
}

function shellQuote(v: string): string {
  return `'${v.replace(/'/g, `'\\''`)}'`;
}

/**
 * Builds the features on top of `baseRef` through the engine connection, cached by (base image id,
 * the features' files and options). A failing install.sh is IMAGE_BUILD_FAILED naming the feature
 * with its output's tail.
 */
export async function buildLocalFeatures(docker: Docker, cfg: DevcontainerEnvironment, baseRef: string, features: LocalFeature[], emit: (p: ImageProgress) => void): Promise<string> {
  const baseId = (await docker.getImage(baseRef).inspect()).Id;
  const dockerfile = featuresDockerfile(baseRef, features);
  const key = createHash('sha256').update(baseId).update(featuresDigest(features)).update(dockerfile).digest('hex').slice(0, 20);
  const ref = `${BASE_REPOSITORY}:features-${key}`;
  if (await imageId(docker, ref)) return ref;
  const files: Record<string, Buffer> = {};
  features.forEach((f, i) => {
    for (const [name, b] of Object.entries(f.files)) files[`f${i}/${name}`] = b;
  });
  emit({ phase: 'build', message: `installing features ${features.map((f) => f.id).join(', ')}`, variant: 'custom' });
  await engineBuild(
    docker,
    { tag: ref, context: await buildContextTar(Buffer.from(dockerfile), { files, hash: key }), labels: { 'airlock.devcontainer': cfg.configPath }, what: `the features of ${cfg.configPath}`, emit },
    (fail) => {
      const n = /airlock-feature-(\d+)/.exec(fail.where)?.[1];
      const which = n !== undefined ? features[Number(n)]?.id : undefined;
      return new AirlockError(
        'IMAGE_BUILD_FAILED',
        `Installing the devcontainer feature${which ? ` '${which}'` : 's'} of ${cfg.configPath} failed at ${fail.where}: ${fail.error}\n--- last output of that step ---\n${fail.tail}\n---\nFix its install.sh, remove it from "features", or choose --environment airlock.`,
        { field: 'environment' },
      );
    },
  );
  return ref;
}

function invalid(file: string, what: string): AirlockError {
  return new AirlockError('INVALID_INPUT', `${file}: ${what}. Fix it, or choose another environment (--environment airlock).`, { field: 'environment' });
}
