import path from 'node:path';
import type { ComposeImageSource, ComposeService } from './compose-file';
import { autoCandidate, fallbackReason, isConfigurationError } from './auto-fallback';
import type { DevcontainerEnvironment, EnvironmentHost, NotApplied } from './devcontainer-config';
import { findDevcontainerConfigs } from './devcontainer-files';
import { formatEnvironmentChoice, parseEnvironmentChoice, resolveEnvironment } from './environment-choice';
import { featureRegistry } from './feature-registry';
import { pinFeatures } from './published-features';
import { EnvironmentTrust } from './environment-trust';
import { setupPlan } from './setup-plan';

/**
 * `airlock env plan` (docs/architecture.md §16, "The plan"): what a run on this project would use,
 * read on the host only — nothing is built, pulled or run (published features are fetched to pin their versions, never run). The image or build, the features, each
 * setup command in order with its user and folder, the variables, ports and sidecars, what is not
 * applied and why, whether the configuration is accepted, and whether a prepared environment exists.
 */
export interface EnvironmentPlan {
  project: string;
  /** The choice as given (`auto` when none). */
  choice: string;
  /** What a run would use now: `airlock`, `image:REF` or `devcontainer:PATH`. */
  uses: string;
  /** `auto` found a devcontainer it would not use: which, and why (the run's one line). */
  fallback?: { config: string; reason: string };
  /** The devcontainer read, even when `auto` would not use it (so accepting it can be judged). */
  devcontainer?: DevcontainerPlan;
  image?: string;
}

export interface DevcontainerPlan {
  config: string;
  name?: string;
  /** `trusted`: accepted with this content; `untrusted`: never accepted; `changed`: accepted, then changed. */
  accepted: 'trusted' | 'untrusted' | 'changed';
  /** Why it cannot be used as it is (published features…), when it cannot. */
  problem?: string;
  build: { kind: 'image'; image: string } | { kind: 'dockerfile'; dockerfile: string; context: string; args: Record<string, string>; target?: string } | { kind: 'compose'; files: string[]; service: string; workspace: PlannedSource };
  /** In install order once fetched; a published one with the version its devcontainer-feature.json gives and the manifest digest it is pinned by. */
  features: Array<{ id: string; local: boolean; options: Record<string, unknown>; applied: boolean; reason?: string; version?: string; digest?: string; dependencyOf?: boolean }>;
  /** The derive step: Airlock's runtime and hardening on top of the image (always). */
  runtime: string;
  setup: Array<{ hook: string; /** The feature whose devcontainer-feature.json gives the command. */ feature?: string; name?: string; command: string; argv: string[]; user: string; cwd: string; parallel: boolean }>;
  /** What setup may reach: the registries the manifests imply, plus `--setup-allow`. */
  setupNetwork: { presets: string[]; impliedBy: string[] };
  /** containerEnv and remoteEnv merged, as the sandbox gets them (`${containerEnv:NAME}` resolved in the run from the image's environment). */
  env: Record<string, string>;
  containerEnv: Record<string, string>;
  remoteEnv: Record<string, string>;
  /** The folder setup commands run in (workspaceFolder mapped into the sandbox). */
  workspaceFolder: string;
  ports: number[];
  sidecars: Array<{ service: string; source: PlannedSource; environment: string[]; user?: string }>;
  notApplied: NotApplied[];
  localEnvUsed: string[];
  contentHash: string;
}

type PlannedSource = { kind: 'image'; image: string } | { kind: 'build'; dockerfile: string; context: string };

/** The sandbox user every setup command and the agent run as. */
const SANDBOX_USER = 'uid 1000 (airlock), no capabilities';

export async function planEnvironment({ home, env }: EnvironmentHost, projectDir: string, choiceText: string | undefined, opts: { allowLocalEnv?: string[] } = {}): Promise<EnvironmentPlan> {
  const root = path.resolve(projectDir);
  const choice = parseEnvironmentChoice(choiceText);
  const base = { project: root, choice: formatEnvironmentChoice(choice) };
  let resolved;
  try {
    resolved = await resolveEnvironment(root, choice, { env, allowedLocalEnv: opts.allowLocalEnv ?? [] });
  } catch (err) {
    if (choice.kind !== 'auto' || !isConfigurationError(err)) throw err;
    return { ...base, uses: 'airlock', fallback: { config: autoCandidate(await findDevcontainerConfigs(root)), reason: fallbackReason(err.message) } };
  }
  if (resolved.kind === 'airlock') return { ...base, uses: 'airlock' };
  if (resolved.kind === 'image') return { ...base, uses: `image:${resolved.ref}`, image: resolved.ref };
  let cfg = resolved.config;
  let problem: string | undefined;
  try {
    // Published features are fetched (never run) to show and pin their versions: the accepted content includes their digests.
    cfg = await pinFeatures(root, cfg, featureRegistry(home));
  } catch (err) {
    problem = err instanceof Error ? err.message : String(err);
  }
  const accepted = await new EnvironmentTrust(root, home).state(cfg);
  const devcontainer = await devcontainerPlan(root, cfg, accepted === 'new' ? 'untrusted' : accepted, problem);
  const name = `devcontainer:${cfg.configPath}`;
  if (choice.kind === 'auto' && (problem || accepted !== 'trusted')) {
    const why = problem ?? (accepted === 'changed' ? 'it changed since you accepted it; accept it again (--trust-environment) to use it.' : 'it is not accepted yet; accept it (--trust-environment, or the New run form) to use it.');
    return { ...base, uses: 'airlock', fallback: { config: cfg.configPath, reason: fallbackReason(why) }, devcontainer };
  }
  return { ...base, uses: name, devcontainer };
}

async function devcontainerPlan(root: string, cfg: DevcontainerEnvironment, accepted: DevcontainerPlan['accepted'], problem: string | undefined): Promise<DevcontainerPlan> {
  const src = cfg.source;
  const build: DevcontainerPlan['build'] =
    src.kind === 'image'
      ? { kind: 'image', image: src.image }
      : src.kind === 'build'
        ? { kind: 'dockerfile', dockerfile: src.dockerfile, context: src.context || '.', args: src.args, ...(src.target ? { target: src.target } : {}) }
        : { kind: 'compose', files: src.files, service: src.service, workspace: planned(src.workspace.source) };
  const setup = await setupPlan(root, cfg);
  return {
    config: cfg.configPath,
    ...(cfg.name ? { name: cfg.name } : {}),
    accepted,
    ...(problem ? { problem } : {}),
    build,
    features: cfg.installed
      ? cfg.installed.map((f) => {
          const declared = cfg.features.find((d) => d.id === f.id);
          return { id: f.id, local: !f.published, options: declared?.options ?? {}, applied: true, ...(f.version ? { version: f.version } : {}), ...(f.published ? { digest: f.published.digest } : {}), ...(declared ? {} : { dependencyOf: true }) };
        })
      : cfg.features.map((f) => ({ id: f.id, local: f.local, options: f.options, applied: f.local, ...(f.local ? {} : { reason: 'not fetched: see the problem above' }) })),
    runtime: "Airlock's runtime (/opt/airlock: helper, its Node, git/tar/find) and the host's extra CAs are added as a derived image; the sandbox runs hardened (no capabilities, read-only root, no network but its channel)",
    setup: (setup?.hooks ?? []).flatMap(({ hook, feature, steps }) =>
      steps.map((s) => ({ hook, ...(feature ? { feature } : {}), ...(s.name ? { name: s.name } : {}), command: s.argv[0] === '/bin/sh' && s.argv[1] === '-c' ? (s.argv[2] ?? '') : s.argv.join(' '), argv: s.argv, user: SANDBOX_USER, cwd: cfg.workFolder, parallel: steps.length > 1 })),
    ),
    setupNetwork: { presets: setup?.presets ?? [], impliedBy: setup?.impliedBy ?? [] },
    env: { ...cfg.containerEnv, ...cfg.remoteEnv },
    containerEnv: cfg.containerEnv,
    remoteEnv: cfg.remoteEnv,
    workspaceFolder: cfg.workFolder,
    ports: cfg.forwardPorts,
    sidecars: src.kind === 'compose' ? src.sidecars.map((s) => sidecarPlan(s)) : [],
    notApplied: cfg.notApplied,
    localEnvUsed: cfg.localEnvUsed,
    contentHash: cfg.contentHash,
  };
}

function planned(s: ComposeImageSource): PlannedSource {
  return s.kind === 'image' ? { kind: 'image', image: s.image } : { kind: 'build', dockerfile: s.dockerfile, context: s.context || '.' };
}

function sidecarPlan(s: ComposeService): DevcontainerPlan['sidecars'][number] {
  return { service: s.name, source: planned(s.source), environment: Object.keys(s.environment), ...(s.user ? { user: s.user } : {}) };
}

/** The plan as `airlock env plan` prints it. */
/** Who reads the plan: the CLI names its flags; the app names its own controls. */
export type PlanAudience = 'cli' | 'app';

export function formatPlan(p: EnvironmentPlan, prepared: string | undefined, audience: PlanAudience = 'cli'): string {
  const cli = audience === 'cli';
  const out: string[] = [`project: ${p.project}`, `choice: ${p.choice} → uses ${p.uses === 'airlock' ? "Airlock's own image" : p.uses}`];
  if (p.fallback) out.push(`fallback: ${p.fallback.config} ${p.fallback.reason}`);
  if (p.image) out.push(`image: ${p.image} (pulled if the engine lacks it), with Airlock's runtime added`);
  const d = p.devcontainer;
  if (d) {
    out.push('', `devcontainer ${d.config}${d.name ? ` (${d.name})` : ''}: ${d.accepted === 'trusted' ? 'accepted' : d.accepted === 'changed' ? 'CHANGED since you accepted it (a run asks again)' : `not accepted yet (${cli ? 'a run asks first; --trust-environment' : 'tick the box to build and use it'})`}`);
    if (d.problem) out.push(`  cannot be used as it is: ${d.problem}`);
    const b = d.build;
    out.push(b.kind === 'image' ? `  image: ${b.image}` : b.kind === 'dockerfile' ? `  build: ${b.dockerfile} in context ${b.context}${Object.keys(b.args).length ? `, args ${Object.entries(b.args).map(([k, v]) => `${k}=${v}`).join(' ')}` : ''}${b.target ? `, target ${b.target}` : ''}` : `  compose: ${b.files.join(', ')}; the sandbox is service '${b.service}' (${b.workspace.kind === 'image' ? b.workspace.image : `built from ${b.workspace.dockerfile}`})`);
    for (const f of d.features) {
      const pinned = f.digest ? ` (version ${f.version ?? 'unstated'}, ${f.digest})` : f.version ? ` (version ${f.version})` : '';
      out.push(`  feature ${f.id}${pinned}${Object.keys(f.options).length ? ` ${JSON.stringify(f.options)}` : ''}: ${f.applied ? `installed in the build${f.dependencyOf ? ' (another feature depends on it)' : ''}` : `not applied: ${f.reason}`}`);
    }
    out.push(`  runtime: ${d.runtime}`);
    if (d.setup.length) {
      out.push(`  setup (before the agent, no run token; network: ${d.setupNetwork.presets.length ? `${d.setupNetwork.presets.map((x) => `preset:${x}`).join(', ')} implied by ${d.setupNetwork.impliedBy.join(', ')}` : 'none'}${cli ? ', plus --setup-allow' : ''}):`);
      d.setup.forEach((s, i) => out.push(`    ${i + 1}. ${s.hook}${s.feature ? ` (feature ${s.feature})` : ''}${s.name ? `.${s.name}` : ''}${s.parallel ? ' (parallel)' : ''}: ${s.command}   as ${s.user} in ${s.cwd}`));
    } else out.push('  setup: none');
    const env = Object.entries(d.env);
    if (env.length) out.push(`  env: ${env.map(([k, v]) => `${k}=${v}`).join(' ')}`);
    if (d.ports.length) out.push(`  ports: ${d.ports.join(', ')} (offered as preview ports, published only ${cli ? 'with --publish' : 'when you publish one'})`);
    for (const s of d.sidecars) out.push(`  sidecar ${s.service}: ${s.source.kind === 'image' ? s.source.image : `built from ${s.source.dockerfile}`}${s.environment.length ? `, env ${s.environment.join(', ')}` : ''} (hardened, on the run's internal network, no route out)`);
    for (const n of d.notApplied) out.push(`  not applied: ${n.field}: ${n.reason}`);
  }
  if (prepared) out.push('', `prepared: ${prepared}`);
  return `${out.join('\n')}\n`;
}
