import path from 'node:path';
import { AirlockError, toErrorInfo, type ErrorKind } from '../../contracts/errors';
import type { DoctorCheck, DoctorReport } from '../../contracts/sandboxes';
import { newRunId } from '../../contracts/ids';
import { missingResources, resourcePaths } from '../common/resources';
import type { KeyVault } from '../keys/key-vault';
import type { ProviderCatalog } from '../keys/provider-catalog';
import type { SettingsStore } from '../settings/settings-store';
import { DockerDriver } from '../sandbox/docker/docker-driver';
import { connectEngine, engineIdentity, pingEngine, type Engine, type EngineSelection } from '../sandbox/docker/engine';
import { describeEngine, type EngineDescription } from '../sandbox/docker/engine-endpoint';
import { assertLimitsEnforced } from '../sandbox/docker/engine-limits';
import { GVISOR_RUNTIME, gvisorFix } from '../sandbox/docker/gvisor';
import { DEFAULT_LIMITS, type ImageProgress } from '../sandbox/driver';
import { ensureSandboxImage, pruneSandboxImages } from '../sandbox/image';
import { SandboxManager } from '../sandbox/sandbox';
import { debugLog } from '../common/debug-log';

/**
 * Readiness checks, one implementation for `airlock doctor` and the UI's doctor screen
 * (`sandboxes:doctor`). Each check reports in the contract's shape (`DoctorCheck`).
 */

export interface DoctorOptions {
  /** Build the sandbox image when it is missing (the CLI does; the UI offers it as a fix). */
  build: boolean;
  /** Check the `agents` image variant (Claude Code, Codex CLI) instead of the base image. */
  agents: boolean;
  /** A user-named image instead of Airlock's. */
  image?: string;
  /** Remove older airlock-sandbox tags once the current image is ready. */
  prune?: boolean;
}

/**
 * The pieces of the app being checked (`AppContext` is one): the same data folder, settings, keychain
 * service and engine as the core's, so the check sees what a run would.
 */
export interface DoctorApp {
  readonly home: string;
  readonly settings: Pick<SettingsStore, 'get'>;
  readonly catalog: ProviderCatalog;
  readonly vault: KeyVault;
  installationId(): Promise<string>;
  /** A new connection to the engine the settings choose; the caller disposes it. */
  connectEngine(): Promise<Engine>;
}

/** What checks share: the app, options, environment, values earlier checks found (engine, image ref). */
export interface DoctorContext {
  app: DoctorApp;
  env: NodeJS.ProcessEnv;
  options: DoctorOptions;
  /** Values left by earlier checks for later ones (`engine`, `image`, `engineFound`). */
  state: Map<string, unknown>;
  /**
   * Check this engine instead of the configured one (the Settings screen's Check connection, on the
   * values entered but not saved yet).
   */
  engineSelection?: EngineSelection;
  /** Image build progress while the image check builds. */
  progress(p: ImageProgress): void;
  /** The build, if any, is over (a progress bar can be cleared). */
  progressDone(): void;
}

/** What a check found, in the contract's shape without its id and label. */
export type DoctorFinding = Omit<DoctorCheck, 'id' | 'label'>;

/** One readiness check. A check whose prerequisite failed returns `skipped`. */
export interface ReadinessCheck {
  id: string;
  label: string;
  run(ctx: DoctorContext): Promise<DoctorFinding>;
}

const FIXES: Partial<Record<ErrorKind, string>> = {
  DOCKER_NOT_INSTALLED: 'Install Docker (Docker Desktop, or docker.io / Docker Engine on Linux), Colima, OrbStack or Podman.',
  DOCKER_NOT_RUNNING: 'Start the engine (Docker Desktop, `sudo systemctl start docker`, `colima start`, `podman machine start`) or set DOCKER_HOST.',
  DOCKER_PERMISSION_DENIED: "Add your user to the 'docker' group (sudo usermod -aG docker $USER; log out and in) or use rootless Docker/Podman.",
  DOCKER_UNREACHABLE: 'Check the network to the remote engine and `ssh <host> docker version` (or its TLS files), or choose another engine (setting engineHost, --engine-host, DOCKER_HOST, `docker context use`).',
  IMAGE_BUILD_FAILED: 'Check access to the Debian mirror and the npm registry, then run `airlock doctor` again.',
  DISK_FULL: 'Free disk space for the engine (`docker system prune`), then run `airlock doctor` again.',
  IMAGE_INCOMPATIBLE: "Install the missing tools in your image, or drop --image to use Airlock's image.",
  NOT_FOUND: 'Run `airlock doctor` without --no-build to build the image, or pull the image you named.',
  ENGINE_LIMITS_UNSUPPORTED: 'Use rootful Podman or Docker (engine setting, --engine-host, CONTAINER_HOST/DOCKER_HOST), or move the host to cgroup v2 with memory, pids and cpu delegated to your user.',
};

/** A failed check, with the fix for its error kind. */
export function failedFinding(err: unknown): DoctorFinding {
  const info = toErrorInfo(err);
  const fix = FIXES[info.kind];
  return { status: 'fail', detail: `${info.message} [${info.kind}]`, ...(fix ? { fix } : {}) };
}

/** What the engine check found (state `engineFound`), for callers that show more than the line. */
export interface EngineFound {
  description: EngineDescription;
  display: string;
  version: string;
  apiVersion: string;
  os: string;
}

/** The container engine answers. Leaves `engine` (and `engineFound`) in the state. */
export const engineCheck: ReadinessCheck = {
  id: 'docker.engine',
  label: 'Container engine',
  async run(ctx) {
    const engine = ctx.engineSelection ? await connectEngine(ctx.env, ctx.engineSelection) : await ctx.app.connectEngine();
    const v = await pingEngine(engine, ctx.env).catch((err: unknown) => {
      engine.dispose();
      throw err;
    });
    // An engine that would drop the sandbox's limits fails here, with what to use instead.
    const identity = await engineIdentity(engine)
      .then((id) => (assertLimitsEnforced(id), id))
      .catch((err: unknown) => {
        engine.dispose();
        throw err;
      });
    ctx.state.set('engine', engine);
    const description = { ...engine.endpoint.description, kind: identity.kind, rootless: identity.rootless || engine.endpoint.description.rootless };
    ctx.state.set('engineFound', { description, display: engine.endpoint.display, version: v.version, apiVersion: v.apiVersion, os: v.os } satisfies EngineFound);
    const detail = `${describeEngine(description, v.version)} (API ${v.apiVersion}, ${v.os}; ${engine.endpoint.display}, from ${description.source})`;
    if (!description.remote) return { status: 'ok', detail };
    // Say plainly what a remote engine's operator can see (docs/architecture.md §13).
    return { status: 'ok', detail: `${detail}. Remote: the project copy and the run token go there; provider keys stay on this machine.` };
  },
};

/** The sandbox image exists (built now if missing and allowed, with progress). Leaves `image` in the state. */
export const imageCheck: ReadinessCheck = {
  id: 'image',
  label: 'Sandbox image',
  async run(ctx) {
    const engine = ctx.state.get('engine') as Engine | undefined;
    if (!engine) return { status: 'skipped', detail: 'needs the container engine' };
    const { options } = ctx;
    const started = Date.now();
    try {
      const r = await ensureSandboxImage({ env: ctx.env, engine, image: options.image, variant: options.agents ? 'agents' : 'base', allowBuild: options.build, onProgress: (p) => ctx.progress(p) });
      ctx.state.set('image', r.ref);
      const how = options.image ? 'has node, git and tar' : r.built ? `built in ${Math.round((Date.now() - started) / 1000)} s` : 'present';
      let pruned = '';
      if (options.prune && !options.image) {
        const keep = [r.ref];
        if (options.agents) keep.push((await ensureSandboxImage({ env: ctx.env, engine, variant: 'base', allowBuild: false })).ref);
        pruned = `; removed ${(await pruneSandboxImages({ engine, keep })).length} older tag(s)`;
      }
      return { status: 'ok', detail: `${r.ref} (${how})${pruned}` };
    } catch (err) {
      // Not built yet, and not asked to build: a run builds it on first use, or the UI offers to.
      if (!options.build && !options.image && toErrorInfo(err).kind === 'NOT_FOUND') {
        return { status: 'warn', detail: 'not built yet', fix: 'Build it now (a few minutes, once), or let the first run build it.', fixAction: 'build-image' };
      }
      throw err;
    } finally {
      ctx.progressDone();
    }
  },
};

/** The helper answers in a throwaway hardened sandbox, which is then wiped and verified gone. */
export const helperCheck: ReadinessCheck = {
  id: 'helper',
  label: 'Sandbox helper',
  async run(ctx) {
    const engine = ctx.state.get('engine') as Engine | undefined;
    const image = ctx.state.get('image') as string | undefined;
    if (!engine || !image) return { status: 'skipped', detail: 'needs the engine and the image' };
    // Labelled with this installation, so a reaper can take it on a shared engine if the check is cut short.
    const installation = await ctx.app.installationId();
    const manager = new SandboxManager(new DockerDriver({ engine, env: ctx.env, installationId: installation }), { installationId: installation });
    const runId = newRunId();
    const t0 = Date.now();
    try {
      const sandbox = await manager.create({ runId, image, limits: DEFAULT_LIMITS, network: 'none' });
      const ready = Date.now() - t0;
      const hello = sandbox.channel.hello;
      const r = await sandbox.channel.run({ argv: ['true'] });
      const proof = await sandbox.destroy();
      if (r.exitCode !== 0) return { status: 'fail', detail: `\`true\` exited ${r.exitCode} in the sandbox`, fix: 'Rebuild the image: docker rmi the airlock-sandbox tag and run `airlock doctor`.' };
      if (proof.leftovers.length > 0) {
        return { status: 'fail', detail: `wipe left ${proof.leftovers.join(', ')}`, fix: `Remove them with docker rm -f / docker volume rm (label airlock.run=${runId}).` };
      }
      const pty = hello.pty ? 'PTY available' : 'no PTY (node-pty missing)';
      const detail = `protocol ${hello.version}, node ${hello.node}, uid ${hello.uid}, ${pty}; ready in ${ready} ms, wiped in ${Math.round(proof.durationMs)} ms with nothing left`;
      return hello.pty ? { status: 'ok', detail } : { status: 'warn', detail, fix: "Terminals need node-pty in /opt/airlock; use Airlock's image." };
    } catch (err) {
      await manager.driver.destroy(runId).catch(debugLog.swallow('doctor.sandbox.destroy'));
      throw err;
    } finally {
      manager.dispose();
    }
  },
};

/** The OS keychain answers (a missing one is a warning: keys can be kept for the session only). */
export const keychainCheck: ReadinessCheck = {
  id: 'keychain',
  label: 'OS keychain',
  async run(ctx) {
    const status = await ctx.app.vault.status();
    return status.available
      ? { status: 'ok', detail: 'provider keys are stored in the OS keychain' }
      : { status: 'warn', detail: status.message ?? 'no keychain', fix: 'Start a Secret Service (GNOME Keyring, KWallet), or keep keys for this session only.' };
  },
};

/**
 * The provider a run will use can be called: the default provider (Settings), else the first with a
 * key, tested with the same minimal authenticated call as the Keys screen's Test connection — a key
 * that is stored but refused, or a base URL nothing answers on, is not "ready".
 */
export const providerKeysCheck: ReadinessCheck = {
  id: 'provider-keys',
  label: 'Provider',
  async run(ctx) {
    const { vault, catalog, settings } = ctx.app;
    return (async (): Promise<DoctorFinding> => {
      const providers = await catalog.list();
      const withKey = (await vault.list()).filter((k) => k.hasKey).map((k) => k.provider);
      const chosen = (await settings.get()).defaultProvider ?? withKey[0] ?? providers.find((p) => !p.requiresKey)?.id;
      const config = providers.find((p) => p.id === chosen);
      if (!chosen || !config || (config.requiresKey && !withKey.includes(chosen))) {
        const which = chosen && config ? `the default provider, ${chosen}, has no key` : 'no provider key is stored';
        return { status: 'warn', detail: `${which}, so a run cannot call a model`, fix: 'Add the API key of the provider you use (Keys, or `airlock keys set <provider>` in a terminal).', fixAction: 'add-key' };
      }
      const t = await vault.test(chosen);
      const where = `${chosen} at ${config.baseUrl}`;
      if (t.status === 'ok') return { status: 'ok', detail: `${where}: ${t.message}${t.latencyMs !== undefined ? ` (${t.latencyMs} ms)` : ''}` };
      if (t.status === 'rate-limited') return { status: 'warn', detail: `${where}: ${t.message}`, fix: 'Wait, or check your plan with the provider.' };
      if (t.status === 'bad-key') return { status: 'fail', detail: `${where}: ${t.message}`, fix: `Replace the key (Keys & providers, or \`airlock keys set ${chosen}\`).`, fixAction: 'replace-key' };
      return { status: 'fail', detail: `${where}: ${t.message}`, fix: `Open Keys & providers, check ${chosen}'s base URL (Change URL) and Test connection (\`airlock keys test ${chosen}\`).`, fixAction: 'open-keys' };
    })().catch((err: unknown): DoctorFinding => {
      // No keychain is the keychain check's finding; here it only means keys cannot be listed.
      if (err instanceof AirlockError && err.kind === 'KEYCHAIN_UNAVAILABLE') return { status: 'skipped', detail: 'the keychain is not available' };
      throw err;
    });
  },
};

/** Airlock's own files (sandbox Dockerfiles and payload, VM init, UI): a broken install shows here. */
export const resourcesCheck: ReadinessCheck = {
  id: 'resources',
  label: "Airlock's files",
  async run() {
    const resources = resourcePaths();
    const missing = await missingResources(resources);
    return missing.length === 0
      ? { status: 'ok', detail: `sandbox, VM and UI files found in ${resources.packaged ? path.dirname(resources.sandboxDir) : resources.appRoot}` }
      : { status: 'fail', detail: `missing: ${missing.join(', ')}`, fix: 'Reinstall Airlock (in a source checkout, run `npm run build`).' };
  },
};

/**
 * What each isolation level still shares with the host, said plainly wherever the levels are listed
 * (docs/architecture.md §2.3, "No way back to the host").
 */
export const ISOLATION_RISK =
  'What remains: container (runc) shares the host\'s kernel, so a kernel bug reachable through the allowed system calls is a way out; ' +
  'gvisor answers the agent\'s system calls in its own user-space kernel; vm runs its own kernel (QEMU; Lima\'s VM mounts your home folder; ' +
  'WSL2 shares one kernel with every distribution and your Windows drives). For repositories you do not trust, use --isolation gvisor or vm.';

/** Which isolation levels work here (containers, QEMU micro-VMs, Lima, WSL2), and why not, and what each still shares. */
export const isolationCheck: ReadinessCheck = {
  id: 'isolation',
  label: 'Isolation levels',
  async run(ctx) {
    const { probeIsolation } = await import('../sandbox/probe-isolation');
    const engineOk = ctx.state.has('engine');
    const { vmAccel } = await ctx.app.settings.get();
    const probes = await probeIsolation({ env: ctx.env, accelSetting: vmAccel, docker: async () => ({ ok: engineOk, reason: engineOk ? '' : 'no container engine' }) });
    const line = `${probes.map((p) => `${p.kind}: ${p.available ? 'yes' : 'no'}${p.accel ? ` (${p.accel})` : ''}${p.reason ? ` — ${p.reason}` : ''}`).join('; ')}. ${ISOLATION_RISK}`;
    // The driver `--isolation vm` uses on this platform (as RunService picks it); the New run form
    // offers "Virtual machine" only when it is available.
    const vmKind = process.platform === 'darwin' ? 'lima' : process.platform === 'win32' ? 'wsl' : 'qemu';
    const probe = probes.find((p) => p.kind === vmKind);
    const vm = { available: Boolean(probe?.available), reason: probe?.reason ?? `no VM driver for ${process.platform}` };
    return probe?.available
      ? { status: 'ok', detail: line, vm }
      : { status: 'warn', detail: line, fix: 'VM isolation is optional: on Linux run scripts/prepare-vm-assets.sh (QEMU); on macOS install Lima.', vm };
  },
};

/**
 * Whether `--isolation gvisor` can run: the engine lists gVisor's `runsc` among its runtimes (engine
 * info `Runtimes`). Optional, so a missing runtime is a warning with how to register it.
 */
export const gvisorCheck: ReadinessCheck = {
  id: 'gvisor',
  label: 'gVisor (runsc)',
  async run(ctx) {
    const engine = ctx.state.get('engine') as Engine | undefined;
    if (!engine) return { status: 'skipped', detail: 'needs the container engine' };
    const id = await engineIdentity(engine);
    const name = id.kind === 'podman' ? 'Podman' : 'Docker';
    if (id.runtimes.includes(GVISOR_RUNTIME)) return { status: 'ok', detail: `runsc is registered with the ${name} engine: --isolation gvisor is available (runtimes: ${id.runtimes.join(', ')})` };
    return { status: 'warn', detail: `the ${name} engine has no runsc runtime (runtimes: ${id.runtimes.join(', ') || 'none listed'}), so --isolation gvisor cannot run`, fix: gvisorFix(id.kind) };
  },
};

/** The checks both the CLI and the UI run, in order. */
export function defaultDoctorChecks(): ReadinessCheck[] {
  return [resourcesCheck, engineCheck, imageCheck, helperCheck, keychainCheck, providerKeysCheck, isolationCheck, gvisorCheck];
}

/**
 * Runs checks in order; a check that throws is a `fail` with the fix for its error kind. `onCheck`
 * sees each result as it is known (the CLI prints as it goes).
 */
export async function runDoctorChecks(
  checks: ReadinessCheck[],
  ctx: Omit<DoctorContext, 'state'>,
  onCheck?: (check: DoctorCheck) => void,
): Promise<DoctorReport> {
  const full: DoctorContext = { ...ctx, state: new Map() };
  const results: DoctorCheck[] = [];
  for (const check of checks) {
    let finding: DoctorFinding;
    try {
      finding = await check.run(full);
    } catch (err) {
      finding = failedFinding(err);
    }
    const result: DoctorCheck = { id: check.id, label: check.label, ...finding };
    results.push(result);
    onCheck?.(result);
  }
  (full.state.get('engine') as Engine | undefined)?.dispose();
  return { ready: results.every((r) => r.status !== 'fail'), checks: results, checkedAt: new Date().toISOString() };
}
