import path from 'node:path';
import type { RunEnvironment } from '../../contracts/environments';
import { AirlockError } from '../../contracts/errors';
import type { Isolation } from '../../contracts/runs';
import type { ChannelClient } from '../channel/channel-client';
import { engineIdentity, type Engine } from '../sandbox/docker/engine';
import type { ImageProgress } from '../sandbox/driver';
import { autoCandidate, fallbackReason, isConfigurationError } from './auto-fallback';
import type { EnvironmentHost } from './devcontainer-config';
import { findDevcontainerConfigs } from './devcontainer-files';
import { parseEnvironmentChoice, resolveEnvironment, type ResolvedEnvironment } from './environment-choice';
import { prepareEnvironmentImage } from './environment-image';
import { featureRegistry } from './feature-registry';
import { pinFeatures } from './published-features';
import { EnvironmentTrust, untrustedError } from './environment-trust';
import { capturePrepared, lookupPrepared, PreparedUsage, preparedInputs } from './prepared-environments';
import { setupPlan, type SetupPlan } from './setup-plan';
import { BuildRecords } from './build-records';
import { createSidecarNetwork, removeSidecars, sidecarRuntime, startSidecars, type SidecarNetwork } from './compose-sidecars';
import { containerEnvironment } from './devcontainer-variables';

/** What a run asks of its environment. */
export interface RunEnvironmentRequest {
  projectDir: string;
  /** `auto` when absent. */
  environment?: string;
  allowLocalEnv?: string[];
  /** The user accepted the devcontainer's current content for this project (recorded). */
  trustEnvironment?: boolean;
  /** Hosts setup may reach beyond the implied registries (an input of a prepared environment). */
  setupAllowlist?: string[];
}

/** The environment a run's sandbox starts in. */
export interface PreparedRunEnvironment {
  /** The derived image, or undefined for Airlock's own image. */
  image?: string;
  /** The engine's id of `image` (the prepared image's when the run starts from one): sandboxes are made and pooled by it. */
  imageId?: string;
  /** The image's environment and the devcontainer's containerEnv/remoteEnv, for the agent and its commands. */
  env: Record<string, string>;
  record: RunEnvironment;
  /** The setup phase, when the devcontainer has lifecycle commands. */
  setup?: SetupPlan;
  /** A compose devcontainer's other services, started beside the sandbox. */
  sidecars?: RunSidecars;
  /** `forwardPorts`: offered as the run's preview ports. */
  forwardPorts?: number[];
  /** The setup's prepared environment: found (the sandbox starts from it) or to be kept after setup. */
  prepared?: PreparedState;
}

/** The sidecars of one run, on the engine that runs its sandbox (docs/architecture.md §16). */
export interface RunSidecars {
  services: string[];
  /**
   * Creates the run's internal network; the sandbox is created on it (`SandboxSpec.joinNetwork`)
   * with its `extraHosts` (on Podman, where that network has no name service).
   */
  createNetwork(runId: string): Promise<SidecarNetwork>;
  /** Starts every sidecar and waits until each is ready. */
  start(runId: string, signal?: AbortSignal): Promise<void>;
  /** Removes sidecars and network when no sandbox exists to carry the run's wipe. */
  remove(runId: string): Promise<void>;
}

/** A setup's prepared environment (docs/architecture.md §16, "Prepared environments"). */
export interface PreparedState {
  key: string;
  ref: string;
  /** The image exists: the run starts from it and setup is not run again. */
  reuse: boolean;
  /** With `reuse`: the image has workspace files to put back (false: setup left none, so nothing there to restore or collect). */
  restoresWorkspace: boolean;
  /**
   * Keeps the state setup left in the sandbox (before the agent), as this key's image: resolves once
   * the state has left the sandbox; `image` settles when the image is committed (capturePrepared).
   */
  capture(channel: ChannelClient, unchangedProjectFiles: Set<string>): Promise<{ image: Promise<{ id: string; size: number }> }>;
  /** Notes the use for `airlock env list` and `prune --older-than`. */
  markUsed(): Promise<void>;
}

export interface RunEnvironmentDeps {
  home: string;
  /** The root's environment (`${localEnv:…}` of the devcontainer). */
  env: NodeJS.ProcessEnv;
  /** This home's installation id: prepared environments are labelled and keyed with it, sidecars and their network labelled (the reaper's test on shared engines). */
  installationId(): Promise<string>;
  engine(): Promise<Engine>;
  /** Airlock's sandbox image (base variant), built on first use. */
  airlockImage(onProgress: (p: ImageProgress) => void): Promise<string>;
  /** The host's OS (default `process.platform`): which VM driver `--isolation vm` gets. */
  platform?: NodeJS.Platform;
}

/**
 * Resolves a run's environment and checks trust, before anything is built (a form's error, not a
 * failed run): a malformed config, a missing Dockerfile or an unaccepted devcontainer stops here.
 * With `trustEnvironment` the acceptance is recorded for this content.
 */
export async function checkRunEnvironment({ home, env }: EnvironmentHost, req: RunEnvironmentRequest & { agentVariant?: 'base' | 'agents' }): Promise<CheckedEnvironment> {
  const choice = parseEnvironmentChoice(req.environment);
  // `auto` found the devcontainer by itself: where it cannot be used, the run keeps Airlock's image and says why (auto-fallback.ts).
  const mayFallBack = choice.kind === 'auto' && !req.trustEnvironment;
  let resolved: ResolvedEnvironment;
  try {
    resolved = await resolveEnvironment(req.projectDir, choice, { env, allowedLocalEnv: req.allowLocalEnv ?? [] });
  } catch (err) {
    if (!mayFallBack || !isConfigurationError(err)) throw err;
    const found = await findDevcontainerConfigs(req.projectDir);
    return { kind: 'airlock', found, skipped: { field: autoCandidate(found), reason: fallbackReason(err.message) } };
  }
  if (resolved.kind !== 'devcontainer') return resolved;
  const read = resolved.config;
  const fallBack = (reason: string): CheckedEnvironment => ({ kind: 'airlock', found: resolved.found, skipped: { field: read.configPath, reason } });
  try {
    // Published features are fetched and pinned before trust is asked: the digests are part of what is accepted.
    resolved = { ...resolved, config: await pinFeatures(req.projectDir, read, featureRegistry(home)) };
  } catch (err) {
    // A configuration the user accepted and that no longer builds is their choice failing: say so. A registry
    // that cannot be reached or refuses is no reason for `auto` to fail either (auto-fallback.ts).
    const fetchFailed = err instanceof AirlockError && (err.kind === 'UPSTREAM_ERROR' || err.kind === 'UNAUTHORIZED');
    if (!mayFallBack || !(isConfigurationError(err) || fetchFailed) || (await new EnvironmentTrust(path.resolve(req.projectDir), home).state(read)) === 'trusted') throw err;
    return fallBack(fallbackReason(err.message));
  }
  if (req.agentVariant === 'agents') {
    if (choice.kind === 'auto') return fallBack(AGENTS_REASON);
    throw new AirlockError('INVALID_INPUT', `${AGENTS_REASON}; use the built-in or a custom agent there, or choose --environment airlock.`, { field: 'environment' });
  }
  const trust = new EnvironmentTrust(path.resolve(req.projectDir), home);
  if (req.trustEnvironment) {
    await trust.accept(resolved.config);
    return resolved;
  }
  const state = await trust.state(resolved.config);
  if (state === 'trusted') return resolved;
  const refusal = untrustedError(resolved.config, state === 'changed');
  if (choice.kind === 'auto') return fallBack(fallbackReason(refusal.message));
  throw refusal;
}

const AGENTS_REASON = "Claude Code and Codex run in Airlock's own image for now, not in a project environment";

/**
 * The environment of commands in Airlock's own image (commands never inherit the image's ENV,
 * docs/architecture.md §16 "Behind a TLS proxy"): its Node is the official build, which trusts only its
 * bundled roots, so it is pointed at the system store, where the image keeps the host's extra CAs
 * (resources/sandbox/Dockerfile sets the same for its own build). A run's egress gateway replaces it
 * with its own CA where it intercepts.
 */
export const AIRLOCK_IMAGE_ENV: Readonly<Record<string, string>> = { NODE_EXTRA_CA_CERTS: '/etc/ssl/certs/ca-certificates.crt' };

/** A resolved environment, and a devcontainer `auto` found but could not use (recorded as not applied). */
export type CheckedEnvironment = ResolvedEnvironment | (Extract<ResolvedEnvironment, { kind: 'airlock' }> & { skipped: { field: string; reason: string } });

/**
 * The image and environment of a run (docs/architecture.md §16): resolved again at prepare (the
 * content built is the content accepted: a change since start is refused), built through the
 * engine connection, derived with Airlock's runtime.
 */
export async function prepareRunEnvironment(
  deps: RunEnvironmentDeps,
  req: RunEnvironmentRequest & { agentVariant: 'base' | 'agents'; isolation: Isolation },
  onProgress: (p: ImageProgress) => void,
): Promise<PreparedRunEnvironment> {
  const resolved = await checkRunEnvironment(deps, { ...req, trustEnvironment: false });
  if (resolved.kind === 'airlock') return { env: { ...AIRLOCK_IMAGE_ENV }, record: { name: 'airlock', kind: 'airlock', notApplied: 'skipped' in resolved ? [resolved.skipped] : [], ...('skipped' in resolved ? { fallback: { config: resolved.skipped.field, reason: resolved.skipped.reason } } : {}) } };
  // Sidecars need a container engine beside the sandbox: refused for a VM before anything is built.
  const composed = resolved.kind === 'devcontainer' && resolved.config.source.kind === 'compose' && resolved.config.source.sidecars.length > 0;
  const runtime = composed ? sidecarRuntime(req.isolation) : undefined;
  assertVmCanRun(req.isolation, deps.platform ?? process.platform);
  const engine = await deps.engine();
  const airlockRef = await deps.airlockImage(onProgress);
  const prepared = await prepareEnvironmentImage(engine.docker, resolved, { projectDir: req.projectDir, airlockRef, emit: onProgress, records: new BuildRecords(deps.home) });
  if (!prepared) return { env: { ...AIRLOCK_IMAGE_ENV }, record: { name: 'airlock', kind: 'airlock', notApplied: [] } };
  const cfg = resolved.kind === 'devcontainer' ? resolved.config : undefined;
  // A compose dev service's own `environment` (the database it is given) is kept, under containerEnv as the reference orders them.
  const serviceEnv = cfg?.source.kind === 'compose' ? cfg.source.workspace.environment : {};
  // `${containerEnv:PATH}` in containerEnv/remoteEnv extends the image's own value (as the reference reads it).
  const env = containerEnvironment({ ...imageEnv(await engine.docker.getImage(prepared.derived.id).inspect().then((i) => i.Config?.Env ?? [])), ...serviceEnv }, cfg?.containerEnv ?? {}, cfg?.remoteEnv ?? {});
  // The sandbox's home is its own tmpfs whatever the image says.
  delete env.HOME;
  const setup = cfg ? await setupPlan(req.projectDir, cfg) : undefined;
  const forwardPorts = cfg?.forwardPorts.length ? cfg.forwardPorts : undefined;
  if (forwardPorts) prepared.record.forwardPorts = forwardPorts;
  let sidecars: RunSidecars | undefined;
  if (prepared.sidecars?.length) {
    const images = prepared.sidecars;
    const opts = { ...(runtime ? { runtime } : {}), installation: await deps.installationId(), engine: (await engineIdentity(engine)).kind };
    const docker = engine.docker;
    const services = images.map((i) => i.service.name);
    const networks = new Map<string, SidecarNetwork>();
    sidecars = {
      services,
      createNetwork: async (runId) => {
        const network = await createSidecarNetwork(docker, runId, services, opts);
        networks.set(runId, network);
        return network;
      },
      start: (runId, signal) => startSidecars(docker, runId, images, { ...opts, ...(signal ? { signal } : {}), ...(networks.has(runId) ? { network: networks.get(runId) } : {}) }),
      remove: (runId) => removeSidecars(docker, runId),
    };
  }
  const extras = { ...(sidecars ? { sidecars } : {}), ...(forwardPorts ? { forwardPorts } : {}) };
  // Prepared environments are engine images: for container sandboxes (runc, gVisor), not the VM's disk.
  if (!cfg || !setup || req.isolation === 'vm') return { image: prepared.derived.ref, imageId: prepared.derived.id, env, record: prepared.record, ...(setup ? { setup } : {}), ...extras };
  const inputs = await preparedInputs(req.projectDir, cfg, setup, { installation: await deps.installationId(), derivedImageId: prepared.derived.id, baseImageId: prepared.derived.baseId, ...(req.setupAllowlist ? { setupAllowlist: req.setupAllowlist } : {}) });
  const lookup = await lookupPrepared(engine.docker, inputs);
  const usage = new PreparedUsage(deps.home);
  const state: PreparedState = {
    key: lookup.key,
    ref: lookup.ref,
    reuse: lookup.existingId !== undefined,
    restoresWorkspace: lookup.restoresWorkspace !== false,
    capture: (channel, unchanged) => capturePrepared(engine.docker, channel, { ...lookup, derivedRef: prepared.derived.id }, unchanged),
    markUsed: () => usage.touch(lookup.key),
  };
  return { image: state.reuse ? lookup.ref : prepared.derived.ref, imageId: lookup.existingId ?? prepared.derived.id, env, record: prepared.record, setup, prepared: state, ...extras };
}

/**
 * A project environment in a VM boots a root disk made from its derived image: the QEMU driver
 * (Linux) makes one (docs/architecture.md §16). Lima and WSL start Airlock's own image only, so there
 * the run is refused before anything is built rather than run on an image the record does not name.
 */
export function assertVmCanRun(isolation: Isolation, platform: NodeJS.Platform): void {
  if (isolation !== 'vm' || platform === 'linux') return;
  throw new AirlockError('INVALID_INPUT', `A project environment runs in a VM only on Linux (QEMU) for now; on ${platform === 'darwin' ? 'macOS (Lima)' : platform === 'win32' ? 'Windows (WSL)' : platform} the VM runs Airlock's own image. Use --isolation container or gvisor for this environment, or --environment airlock in the VM.`, { field: 'isolation' });
}

function imageEnv(lines: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const l of lines) {
    const eq = l.indexOf('=');
    if (eq > 0) out[l.slice(0, eq)] = l.slice(eq + 1);
  }
  return out;
}
