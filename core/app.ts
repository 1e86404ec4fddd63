import { access, mkdir, readFile, writeFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../contracts/errors';
import type { Settings } from '../contracts/settings';
import { getAgentAdapter } from './agents';
import { Emitter, type Event } from './common/disposable';
import { airlockHome } from './common/paths';
import { KeyVault } from './keys/key-vault';
import { ProviderCatalog } from './keys/provider-catalog';
import { assertCredentialServes } from './keys/subscription-credentials';
import { ModelProxy, vaultResolver } from './proxy/model-proxy';
import { priceTableFor } from './proxy/price-table';
import { RunService } from './runs/run-service';
import { RunStore } from './runs/run-store';
import { DEFAULT_LIMITS, type ImageProgress } from './sandbox/driver';
import { installationId } from './common/installation-id';
import { DockerDriver } from './sandbox/docker/docker-driver';
import { connectEngine, type Engine, type EngineSelection } from './sandbox/docker/engine';
import { engineChoiceFrom } from './sandbox/docker/engine-endpoint';
import type { Isolation } from '../contracts/runs';
import { ensureSandboxImage } from './sandbox/image';
import { SandboxManager, type Sandbox } from './sandbox/sandbox';
import type { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, EgressProxyOptions } from './network/egress-proxy';
import { applyNetworkPolicy } from './network/network-policy';
import { PRESET_NAMES } from './network/presets';

export interface AirlockCoreOptions {
  env?: NodeJS.ProcessEnv;
  /** Airlock's data directory (default `airlockHome(env)`). */
  home?: string;
  /** Reap sandboxes of crashed runs and mark those runs interrupted at start (default true). */
  recover?: boolean;
  /**
   * Tests only: every run's egress proxy uses this resolver (and, with the symbol-keyed switch,
   * may dial loopback), so integration tests reach a fake registry on this machine. Code-only on
   * purpose: no setting, environment variable or CLI flag can reach it.
   */
  egressProxyForTests?: Pick<EgressProxyOptions, 'resolve' | typeof ALLOW_LOOPBACK_TARGETS_FOR_TESTS>;
}

export const DEFAULT_SETTINGS: Settings = {
  theme: 'system',
  notifications: true,
  transcripts: false,
  defaultAgent: 'builtin',
  defaultApproval: 'auto',
  defaultIsolation: 'container',
  defaultNetwork: 'none',
  defaultTimeoutSec: 1800,
  defaultAllowlist: [],
};

/** Settings in `<home>/settings.json` (no secrets); written atomically. */
export class SettingsStore {
  private readonly file: string;
  private readonly changed = new Emitter<Settings>();
  readonly onDidChange: Event<Settings> = this.changed.event;

  constructor(home: string) {
    this.file = path.join(home, 'settings.json');
  }

  async get(): Promise<Settings> {
    try {
      return { ...DEFAULT_SETTINGS, ...(JSON.parse(await readFile(this.file, 'utf8')) as Partial<Settings>) };
    } catch {
      return { ...DEFAULT_SETTINGS };
    }
  }

  async update(patch: Partial<Settings>): Promise<Settings> {
    const next = { ...(await this.get()), ...patch };
    await mkdir(path.dirname(this.file), { recursive: true });
    const tmp = `${this.file}.${process.pid}.tmp`;
    await writeFile(tmp, JSON.stringify(next, null, 2));
    await rename(tmp, this.file);
    this.changed.fire(next);
    return next;
  }
}

/**
 * The engine, wired: key vault + provider catalog, the model proxy, the sandbox managers, the run
 * store and the run service. Electron-free; `main/`, `airlock serve` and the CLI all build on it.
 */
export class AirlockCore {
  private readonly managers = new Map<Isolation, Promise<SandboxManager>>();
  private readonly buildProgress = new Emitter<ImageProgress & { variant: string }>();
  /** Image build progress of any build this core starts. */
  readonly onDidBuildProgress: Event<ImageProgress & { variant: string }> = this.buildProgress.event;
  private readonly images = new Map<string, Promise<string>>();
  private enginePromise: Promise<Engine> | undefined;
  /** The engine settings `enginePromise` was made from (`engineSettingsKey`). */
  private engineInUse: string | undefined;
  /** Managers and engines replaced by a settings change, kept until their last sandbox is gone. */
  private readonly retiring = new Set<Promise<void>>();
  private readonly retiredParts = new Set<Promise<SandboxManager | Engine | undefined>>();
  /** `warm()` was asked for: a new engine gets its warm sandbox too. */
  private keepWarm = false;
  runs!: RunService;
  proxyPort = 0;

  constructor(
    readonly env: NodeJS.ProcessEnv,
    readonly home: string,
    readonly store: RunStore,
    readonly catalog: ProviderCatalog,
    readonly vault: KeyVault,
    readonly proxy: ModelProxy,
    readonly settings: SettingsStore,
  ) {}

  /**
   * The container engine every container sandbox, image build and the reaper use: the `engineHost`
   * setting (or `--engine-host`), else DOCKER_HOST, CONTAINER_HOST, the Docker context, the well-known
   * sockets, limited to Docker or Podman by the `engine` setting (or `--engine`).
   */
  engine(): Promise<Engine> {
    if (!this.enginePromise) {
      const made = this.settings.get().then((s) => {
        if (this.enginePromise === made) this.engineInUse = engineSettingsKey(s);
        return connectEngine(this.env, engineSelectionOf(this.env, s));
      });
      this.enginePromise = made;
      made.catch(() => {
        if (this.enginePromise === made) this.enginePromise = undefined;
      });
    }
    return this.enginePromise;
  }

  /**
   * A settings change: a different engine (`engine`, `engineHost`, `engineAllowInsecure`) is used from
   * the next sandbox on, and a different `vmAccel` from the next VM. Runs in progress keep the engine
   * (or VM driver) they started on; the old one is closed once their sandboxes are gone
   * (docs/architecture.md §13, "Changing engines").
   */
  onSettingsChanged(s: Settings): void {
    if (this.enginePromise && this.engineInUse !== engineSettingsKey(s)) {
      const old = this.enginePromise;
      this.enginePromise = undefined;
      this.engineInUse = undefined;
      // Images were checked or built on the old engine; the new one is asked again.
      this.images.clear();
      this.retire([...this.managers.keys()].filter((i) => i !== 'vm'), old);
      if (this.keepWarm) void this.warm();
    }
    if (this.vmAccelInUse !== undefined && this.vmAccelInUse !== (s.vmAccel ?? 'auto')) {
      this.vmAccelInUse = undefined;
      this.retire(['vm']);
    }
  }

  /** The `vmAccel` the current VM manager was made with. */
  private vmAccelInUse: string | undefined;

  private retire(isolations: Isolation[], engine?: Promise<Engine>): void {
    const managers = isolations.flatMap((i) => {
      const m = this.managers.get(i);
      this.managers.delete(i);
      return m ? [m.catch(() => undefined)] : [];
    });
    const parts = [...managers, ...(engine ? [engine.catch(() => undefined)] : [])];
    for (const p of parts) this.retiredParts.add(p);
    const done = (async () => {
      for (const m of managers) await (await m)?.retire();
      (await engine?.catch(() => undefined))?.dispose();
      for (const p of parts) this.retiredParts.delete(p);
    })();
    this.retiring.add(done);
    void done.finally(() => this.retiring.delete(done));
  }

  /**
   * The sandbox manager of an isolation level: containers (runc) and gVisor (runsc) on the container
   * engine; VMs need QEMU (Linux), Lima (macOS) or WSL2.
   */
  sandboxes(isolation: Isolation): Promise<SandboxManager> {
    let manager = this.managers.get(isolation);
    if (!manager) {
      manager = this.createManager(isolation);
      this.managers.set(isolation, manager);
      manager.catch(() => this.managers.delete(isolation));
    }
    return manager;
  }

  private async createManager(isolation: Isolation): Promise<SandboxManager> {
    if (isolation !== 'vm') {
      const installation = await installationId(this.home);
      return new SandboxManager(new DockerDriver({ env: this.env, engine: await this.engine(), installationId: installation, isolation }), { installationId: installation });
    }
    if (process.platform === 'win32') {
      // One WSL2 distribution per run, imported from the sandbox image's file system (exported once
      // per image version through Docker Desktop). Unverified on real Windows: resources/vm/README.md.
      const ref = await this.image('base');
      const rootfsTar = path.join(this.home, 'wsl', `rootfs-${ref.split(':').pop() ?? 'base'}.tar`);
      if (!(await exists(rootfsTar))) {
        const { exportWslRootfs } = await import('./sandbox/wsl/wsl-rootfs');
        await mkdir(path.dirname(rootfsTar), { recursive: true });
        await exportWslRootfs(ref, `${rootfsTar}.partial`);
        await rename(`${rootfsTar}.partial`, rootfsTar);
      }
      const { WslDriver } = await import('./sandbox/wsl/wsl-driver');
      return new SandboxManager(new WslDriver({ rootfsTar }), { helloTimeoutMs: 180_000 });
    }
    if (process.platform === 'darwin') {
      const { LimaDriver } = await import('./sandbox/lima/lima-driver');
      return new SandboxManager(new LimaDriver({}), { helloTimeoutMs: 180_000 });
    }
    const { QemuDriver } = await import('./sandbox/qemu/qemu-driver');
    const { vmAccel } = await this.settings.get();
    this.vmAccelInUse = vmAccel ?? 'auto';
    const driver = new QemuDriver({ env: this.env, accelSetting: vmAccel });
    await driver.checkAvailable();
    return new SandboxManager(driver, { helloTimeoutMs: 180_000 });
  }

  /**
   * The sandbox image for a variant, built once per process when missing (progress is pushed). For
   * VM isolation on macOS it is built inside the Lima VM (no Docker engine needed on the Mac).
   */
  image(variant: 'base' | 'agents', onProgress?: (p: ImageProgress) => void, isolation: Isolation = 'container'): Promise<string> {
    if (isolation === 'vm' && process.platform === 'darwin') return this.limaImage(variant);
    let ref = this.images.get(variant);
    if (!ref) {
      ref = ensureSandboxImage({
        variant,
        engine: this.engine(),
        onProgress: (p) => {
          this.buildProgress.fire({ ...p, variant });
          onProgress?.(p);
        },
      }).then((r) => r.ref);
      this.images.set(variant, ref);
      ref.catch(() => this.images.delete(variant));
    }
    return ref;
  }

  /**
   * Keeps one started sandbox ready for the next run with default settings (the long-lived app does
   * this; `sandbox.ready.warm` in the bench). Only when the image is already built: warming never
   * starts a multi-minute build behind the user's back. Failures are ignored — runs start cold.
   */
  async warm(): Promise<void> {
    this.keepWarm = true;
    try {
      const { ref } = await ensureSandboxImage({ variant: 'base', allowBuild: false, engine: this.engine() });
      const manager = await this.sandboxes('container');
      await manager.warm({ image: ref, limits: DEFAULT_LIMITS, network: 'none' }, 1);
    } catch {
      // No engine or no image yet: nothing to warm.
    }
  }

  private async limaImage(variant: 'base' | 'agents'): Promise<string> {
    if (variant !== 'base') throw new AirlockError('VM_UNAVAILABLE', 'Claude Code and Codex need the agents image, which the Lima VM does not build yet; use the built-in agent, or container isolation.');
    const { describeSandboxImage } = await import('./sandbox/image');
    const { LimaDriver } = await import('./sandbox/lima/lima-driver');
    const driver = (await this.sandboxes('vm')).driver;
    if (!(driver instanceof LimaDriver)) throw new AirlockError('VM_UNAVAILABLE', 'VM isolation on macOS needs the Lima driver.');
    // Built for the VM's own architecture (arm64 on Apple Silicon), with the tag naming it.
    const { ref, context, buildargs } = await describeSandboxImage({ arch: await driver.vmArch() });
    await driver.ensureImage(ref, context, buildargs);
    return ref;
  }

  async providerFormat(provider: string): Promise<'anthropic' | 'openai'> {
    const config = await this.catalog.get(provider);
    return config.kind === 'anthropic' ? 'anthropic' : 'openai';
  }

  async dispose(): Promise<void> {
    await this.runs.shutdown();
    this.runs.dispose();
    await this.proxy.stop();
    for (const m of this.managers.values()) (await m.catch(() => undefined))?.dispose();
    // Replaced managers and engines: their runs were just shut down.
    for (const p of this.retiredParts) (await p)?.dispose();
    (await this.enginePromise?.catch(() => undefined))?.dispose();
    await this.store.close();
  }
}

/**
 * The engine the user chose for this home: `--engine-host` (AIRLOCK_ENGINE_HOST) or the `engineHost`
 * setting, else DOCKER_HOST, CONTAINER_HOST, the Docker context, the local sockets
 * (docs/architecture.md §13), limited to Docker or Podman by `--engine`/the `engine` setting.
 */
export async function connectConfiguredEngine(env: NodeJS.ProcessEnv, home = airlockHome(env)): Promise<Engine> {
  return connectEngine(env, engineSelectionOf(env, await new SettingsStore(home).get()));
}

/** The engine the settings name (the environment's `AIRLOCK_ENGINE*` still wins in `connectEngine`). */
function engineSelectionOf(env: NodeJS.ProcessEnv, s: Settings): EngineSelection {
  return { host: s.engineHost, allowInsecure: s.engineAllowInsecure, choice: engineChoiceFrom(env, s.engine ?? 'auto') };
}

/** What an engine connection is made from, to tell whether a settings change needs another one. */
function engineSettingsKey(s: Settings): string {
  return JSON.stringify([s.engine ?? 'auto', s.engineHost?.trim() ?? '', s.engineAllowInsecure === true]);
}

/** Builds the core: opens the stores, starts the proxy on loopback, recovers crashed runs. */
export async function createAirlockCore(opts: AirlockCoreOptions = {}): Promise<AirlockCore> {
  const env = opts.env ?? process.env;
  const home = opts.home ?? airlockHome(env);
  await mkdir(home, { recursive: true, mode: 0o700 });
  const catalog = new ProviderCatalog({ home });
  // A separate keychain service lets tests and side-by-side installs keep their own entries.
  const vault = new KeyVault(catalog, { service: env.AIRLOCK_KEYCHAIN_SERVICE ?? 'airlock' });
  const settings = new SettingsStore(home);
  const initial = await settings.get();
  const proxy = new ModelProxy({ resolveUpstream: vaultResolver(catalog, vault), transcripts: initial.transcripts, prices: priceTableFor(initial.prices) });
  const store = new RunStore({ home });
  const core = new AirlockCore(env, home, store, catalog, vault, proxy, settings);
  // A corrected price and the transcripts switch apply from the next call on, the engine and the VM
  // accelerator from the next sandbox; the store outlives these listeners.
  settings.onDidChange((s) => {
    proxy.setPrices(priceTableFor(s.prices));
    proxy.setTranscripts(s.transcripts);
    core.onSettingsChanged(s);
  });
  core.proxyPort = (await proxy.start()).port;
  core.runs = new RunService({
    store,
    sandboxes: (isolation) => core.sandboxes(isolation),
    image: (variant, onProgress, isolation) => core.image(variant, onProgress, isolation),
    proxy,
    proxyPort: core.proxyPort,
    providerFormat: (p) => core.providerFormat(p),
    checkProviderAccess: async (p, agent) => assertCredentialServes(await catalog.get(p), agent),
    agent: getAgentAdapter,
    network: (sandbox, run) => applyRunNetwork(sandbox, run, home, opts.egressProxyForTests),
  });
  if (opts.recover !== false) {
    // Recovery needs the engine; without one (not running, unreachable, or an address refused as
    // configured) there is nothing to reap, and runs are still marked. Runs and the doctor then say why.
    await core
      .sandboxes('container')
      .then((manager) => core.runs.recover([manager]))
      .catch(async (err: unknown) => {
        if (err instanceof AirlockError && (err.kind.startsWith('DOCKER_') || err.kind === 'INVALID_INPUT')) return core.runs.recover([]);
        throw err;
      });
  }
  return core;
}

/**
 * A run's wider network policy. Allow-list entries named `preset:npm` (pip, cargo, go, apt) take the
 * registries from the host's own configuration of that tool.
 */
async function applyRunNetwork(
  sandbox: Sandbox,
  run: { runId: string; policy: 'allowlist' | 'open'; allowlist: string[]; projectDir: string },
  home: string,
  proxyOptions?: AirlockCoreOptions['egressProxyForTests'],
) {
  const presets = run.allowlist.filter((a) => a.startsWith('preset:')).map((a) => a.slice('preset:'.length));
  const unknown = presets.filter((p) => !(PRESET_NAMES as readonly string[]).includes(p));
  if (unknown.length) throw new AirlockError('INVALID_INPUT', `Unknown network preset ${unknown.join(', ')}; presets are ${PRESET_NAMES.map((p) => `preset:${p}`).join(', ')}.`);
  const policy =
    run.policy === 'open'
      ? ({ mode: 'open' } as const)
      : { mode: 'allowlist' as const, presets: presets as Array<(typeof PRESET_NAMES)[number]>, allow: run.allowlist.filter((a) => !a.startsWith('preset:')) };
  const applied = await applyNetworkPolicy(sandbox, policy, {
    sandboxNetwork: run.policy === 'open' ? 'open' : 'none',
    projectPath: run.projectDir,
    home,
    ...(proxyOptions ? { proxyOptions } : {}),
  });
  return {
    env: applied.env,
    record: applied.record,
    onDidConnect: applied.onDidConnect,
    async allow(host: string, port: number | undefined, scope: 'once' | 'run' | 'project') {
      const proxy = applied.proxy;
      if (!proxy) throw new AirlockError('CONFLICT', `This run's network policy is ${run.policy}; hosts are allowed only under the allow-list policy.`);
      const entry = port ? `${host}:${port}` : host;
      if (scope === 'once') proxy.allowOnce(host, port);
      else if (scope === 'run') proxy.allowForRun(entry);
      else await proxy.allowForProject(entry);
    },
    dispose: () => applied.dispose(),
  };
}

function exists(p: string): Promise<boolean> {
  return access(p).then(
    () => true,
    () => false,
  );
}
