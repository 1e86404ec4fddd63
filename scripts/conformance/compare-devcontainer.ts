import path from 'node:path';
import { parseDocument } from 'yaml';

/**
 * How `airlock env plan --json` reads a devcontainer configuration, held against what the reference
 * (`devcontainer read-configuration`, @devcontainers/cli) printed for it (docs/architecture.md §16,
 * "Conformance"). Both sides are brought to one shape — paths project-relative, the project's folder
 * in the container mapped to Airlock's, lifecycle commands as argv — and compared field by field. A
 * field that differs is either named by the plan as not applied (a hardening refusal, with its
 * reason) or a defect.
 */
export type Verdict = { kind: 'identical' | 'refused' | 'defect'; refused: string[]; defects: string[]; notes: string[] };

/** Where the project is inside Airlock's sandbox. */
const AIRLOCK_WORKSPACE = '/workspace';

/** Fields that, when present, a hardened sandbox does not apply: the plan must name each. */
const HARDENING_FIELDS = ['initializeCommand', 'runArgs', 'mounts', 'workspaceMount', 'privileged', 'capAdd', 'securityOpt', 'init', 'appPort', 'remoteUser', 'containerUser'] as const;
const HOOKS = ['onCreateCommand', 'updateContentCommand', 'postCreateCommand', 'postStartCommand', 'postAttachCommand'] as const;

type Json = Record<string, unknown>;

export interface ReferenceOutput {
  configuration: Json;
  workspace?: { workspaceFolder?: string; workspaceMount?: string };
}

/** The plan's devcontainer part, as far as it is compared. */
export interface PlanDevcontainer {
  build: { kind: 'image'; image: string } | { kind: 'dockerfile'; dockerfile: string; context: string; args: Record<string, string>; target?: string } | { kind: 'compose'; files: string[]; service: string };
  features: Array<{ id: string; options: Record<string, unknown>; applied: boolean; reason?: string; dependencyOf?: boolean }>;
  setup: Array<{ hook: string; name?: string; argv: string[]; cwd: string }>;
  containerEnv?: Record<string, string>;
  remoteEnv?: Record<string, string>;
  env: Record<string, string>;
  ports: number[];
  notApplied: Array<{ field: string; reason: string }>;
  workspaceFolder?: string;
}

export interface CompareInput {
  /** The project folder on the host. */
  root: string;
  /** The configuration, project-relative. */
  config: string;
  reference: ReferenceOutput;
  plan: PlanDevcontainer;
  /** Compose files' text by project-relative path (to find where the project is mounted). */
  composeText?: (rel: string) => string | undefined;
}

const isRecord = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const rel = (root: string, abs: string): string => path.relative(root, abs).split(path.sep).join('/') || '.';

/** Where the reference puts the project's folder inside the container. */
export function referenceProjectFolder(input: CompareInput): string | undefined {
  const cfg = input.reference.configuration;
  const configDir = path.dirname(path.resolve(input.root, input.config));
  if (cfg.dockerComposeFile !== undefined) {
    const files = (Array.isArray(cfg.dockerComposeFile) ? cfg.dockerComposeFile : [cfg.dockerComposeFile]).filter((f): f is string => typeof f === 'string');
    for (const f of files) {
      const abs = path.resolve(configDir, f);
      const text = input.composeText?.(rel(input.root, abs));
      if (!text) continue;
      const doc = parseDocument(text, { merge: true }).toJS() as unknown;
      const svc = isRecord(doc) && isRecord(doc.services) ? doc.services[String(cfg.service)] : undefined;
      const volumes = isRecord(svc) && Array.isArray(svc.volumes) ? svc.volumes : [];
      for (const v of volumes) {
        const [src, target] = typeof v === 'string' ? v.split(':') : isRecord(v) ? [String(v.source ?? ''), String(v.target ?? '')] : [];
        if (!src || !target || !(src.startsWith('.') || src.startsWith('/') || src.startsWith('$'))) continue;
        const host = path.resolve(path.dirname(abs), src.replace(/\$\{localWorkspaceFolder\}/g, input.root));
        const inside = path.relative(host, input.root);
        if (inside.startsWith('..') || path.isAbsolute(inside)) continue;
        return path.posix.join(target, inside.split(path.sep).join('/'));
      }
    }
    return typeof cfg.workspaceFolder === 'string' ? cfg.workspaceFolder : undefined;
  }
  const mount = input.reference.workspace?.workspaceMount ?? '';
  const target = /(?:^|,)(?:target|dst|destination)=([^,]+)/.exec(mount)?.[1];
  const source = /(?:^|,)(?:source|src)=([^,]+)/.exec(mount)?.[1];
  // The reference may mount a folder above the project (its git root): the project is below the target.
  const below = source ? path.relative(source, input.root) : '';
  if (target && !below.startsWith('..') && !path.isAbsolute(below)) return path.posix.join(target, below.split(path.sep).join('/'));
  return target ?? input.reference.workspace?.workspaceFolder;
}

/** Replaces the reference's project folder with Airlock's in every string. */
function mapper(projectFolder: string | undefined): (s: string) => string {
  if (!projectFolder || projectFolder === '/') return (s) => s;
  const re = new RegExp(`(?<![\\w./-])${projectFolder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?=$|[/\\s"':;])`, 'g');
  return (s) => s.replace(re, AIRLOCK_WORKSPACE);
}

function deepMap<T>(v: T, f: (s: string) => string): T {
  if (typeof v === 'string') return f(v) as T;
  if (Array.isArray(v)) return v.map((x) => deepMap(x, f)) as T;
  if (isRecord(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deepMap(x, f)])) as T;
  return v;
}

function steps(v: unknown): Array<{ name?: string; argv: string[] }> {
  if (typeof v === 'string') return v.trim() ? [{ argv: ['/bin/sh', '-c', v] }] : [];
  if (Array.isArray(v)) return v.length ? [{ argv: v.map(String) }] : [];
  if (isRecord(v)) return Object.entries(v).flatMap(([name, x]) => steps(x).map((s) => ({ name, argv: s.argv })));
  return [];
}

function featureOptions(v: unknown): Record<string, unknown> {
  if (typeof v === 'string') return { version: v };
  if (v === true) return {};
  return isRecord(v) ? v : {};
}

function sorted(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sorted);
  if (isRecord(v)) return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted(v[k])]));
  return v;
}
const same = (a: unknown, b: unknown): boolean => JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
const show = (v: unknown): string => {
  const s = JSON.stringify(v);
  return s.length > 160 ? `${s.slice(0, 157)}...` : s;
};

/** Compares one configuration's reading. */
export function compareReading(input: CompareInput): Verdict {
  const { root, plan } = input;
  const projectFolder = referenceProjectFolder(input);
  const cfg = deepMap(input.reference.configuration, mapper(projectFolder));
  const configDir = path.dirname(path.resolve(root, input.config));
  const refused: string[] = [];
  const defects: string[] = [];
  const notes: string[] = [];
  const named = (field: string): { field: string; reason: string } | undefined => plan.notApplied.find((n) => n.field === field || n.field.startsWith(`${field} `) || n.field.startsWith(`${field}.`) || n.field.startsWith(`${field}[`));
  const differs = (field: string, ref: unknown, ours: unknown) => {
    if (same(ref, ours)) return;
    const n = named(field);
    if (n) refused.push(`${field}: ${n.reason}`);
    else defects.push(`${field}: reference ${show(ref)}, Airlock ${show(ours)}`);
  };

  // What is built.
  const build = isRecord(cfg.build) ? cfg.build : {};
  const dockerfile = build.dockerfile ?? build.dockerFile ?? cfg.dockerFile;
  if (cfg.dockerComposeFile !== undefined) {
    const files = (Array.isArray(cfg.dockerComposeFile) ? cfg.dockerComposeFile : [cfg.dockerComposeFile]).map((f) => rel(root, path.resolve(configDir, String(f))));
    differs('dockerComposeFile', { files, service: cfg.service }, plan.build.kind === 'compose' ? { files: plan.build.files, service: plan.build.service } : plan.build);
  } else if (typeof dockerfile === 'string') {
    const df = path.resolve(configDir, dockerfile);
    const context = build.context ?? cfg.context;
    const ref = { dockerfile: rel(root, df), context: typeof context === 'string' ? rel(root, path.resolve(configDir, context)) : rel(root, path.dirname(df)), args: isRecord(build.args) ? build.args : {}, ...(typeof build.target === 'string' ? { target: build.target } : {}) };
    const b = plan.build;
    differs('build', ref, b.kind === 'dockerfile' ? { dockerfile: b.dockerfile, context: b.context, args: b.args, ...(b.target ? { target: b.target } : {}) } : b);
  } else {
    differs('image', cfg.image, plan.build.kind === 'image' ? plan.build.image : plan.build);
  }

  // Features: the same ids with the same options (a feature fetched only because another depends on it is the install's part, not the reading's).
  const refFeatures = isRecord(cfg.features) ? Object.fromEntries(Object.entries(cfg.features).map(([id, o]) => [id, featureOptions(o)])) : {};
  const ourFeatures = Object.fromEntries(plan.features.filter((f) => !f.dependencyOf).map((f) => [f.id, f.options]));
  differs('features', refFeatures, ourFeatures);
  for (const f of plan.features) if (!f.applied) notes.push(`feature ${f.id} not fetched: ${f.reason ?? 'no reason given'}`);

  // Variables. ${containerEnv:…} stays as written on both sides (resolved in the container).
  const ourContainerEnv = plan.containerEnv ?? plan.env;
  differs('containerEnv', isRecord(cfg.containerEnv) ? cfg.containerEnv : {}, ourContainerEnv);
  if (plan.remoteEnv) differs('remoteEnv', isRecord(cfg.remoteEnv) ? cfg.remoteEnv : {}, plan.remoteEnv);

  // Lifecycle commands, in order, per hook; and the folder they run in.
  for (const hook of HOOKS) {
    const ours = plan.setup.filter((s) => s.hook === hook).map((s) => ({ ...(s.name ? { name: s.name } : {}), argv: s.argv }));
    differs(hook, steps(cfg[hook]), ours);
  }
  const refFolder = typeof cfg.workspaceFolder === 'string' ? cfg.workspaceFolder : mapper(projectFolder)(input.reference.workspace?.workspaceFolder ?? AIRLOCK_WORKSPACE);
  if (plan.setup.length) differs('workspaceFolder', refFolder, plan.setup[0]?.cwd);
  else if (plan.workspaceFolder) differs('workspaceFolder', refFolder, plan.workspaceFolder);

  // Ports offered.
  const refPorts = Array.isArray(cfg.forwardPorts) ? cfg.forwardPorts.filter((p): p is number => typeof p === 'number') : [];
  differs('forwardPorts', refPorts, plan.ports);

  // What a hardened sandbox does not apply: present in the reference, so the plan must name it.
  for (const field of HARDENING_FIELDS) {
    const v = cfg[field];
    if (v === undefined || v === false || (Array.isArray(v) && v.length === 0)) continue;
    const n = named(field);
    if (n) refused.push(`${field}: ${n.reason}`);
    else defects.push(`${field} ${show(v)} is neither applied nor named as not applied`);
  }
  if (cfg.overrideCommand === false) {
    const n = named('overrideCommand');
    if (n) refused.push(`overrideCommand: ${n.reason}`);
    else defects.push('overrideCommand false is neither applied nor named as not applied');
  }
  const kind = defects.length ? 'defect' : refused.length ? 'refused' : 'identical';
  return { kind, refused, defects, notes };
}
