import { debugLog } from './common/debug-log';
import { sweepKeptRecords } from './mcp/kept-sandboxes';
import { ProjectBases } from './sandbox/project-bases';
import { AirlockError } from '../contracts/errors';
import type { Isolation } from '../contracts/runs';
import { getAgentAdapter } from './agents';
import { AppContext, type AppContextOptions } from './app-context';
import type { Event } from './common/disposable';
import { assertCredentialServes } from './keys/subscription-credentials';
import { applyRunNetwork, type EgressProxyForTests } from './network/run-network';
import { ModelProxy, vaultResolver } from './proxy/model-proxy';
import { priceTableFor } from './proxy/price-table';
import { prepareRunEnvironment } from './environment/run-environment';
import { RunService } from './runs/run-service';
import type { ImageProgress } from './sandbox/driver';
import type { Engine } from './sandbox/docker/engine';
import { SandboxManagers } from './sandbox/sandbox-managers';
import type { SandboxManager } from './sandbox/sandbox';

// Where they lived before the composition root moved them; import from `settings/settings-store` in new code.
export { DEFAULT_SETTINGS, SettingsStore } from './settings/settings-store';

export interface AirlockCoreOptions extends AppContextOptions {
  /**
   * The shared pieces to build on (the CLI passes the one its command uses); without it the core
   * makes its own from `env` and `home`, and closes it with itself.
   */
  app?: AppContext;
  /** Reap sandboxes of crashed runs and mark those runs interrupted at start (default true). */
  recover?: boolean;
  /**
   * Tests only: every run's egress proxy uses this resolver (and, with the symbol-keyed switch,
   * may dial loopback), so integration tests reach a fake registry on this machine. Code-only on
   * purpose: no setting, environment variable or CLI flag can reach it.
   */
  egressProxyForTests?: EgressProxyForTests;
  /** Tests only: how long a setup command may be silent before the run says it is still running (default a minute). */
  setupQuietMsForTests?: number;
}

/**
 * The engine, wired (docs/architecture.md §5): the shared pieces of `AppContext`, the model proxy,
 * the sandbox managers and the run service. Electron-free; `main/`, `airlock serve` and the CLI all
 * build on it.
 */
export class AirlockCore {
  readonly env: NodeJS.ProcessEnv;
  readonly home: string;
  readonly store: AppContext['store'];
  readonly catalog: AppContext['catalog'];
  readonly vault: AppContext['vault'];
  readonly settings: AppContext['settings'];
  /** Image build progress of any build this core starts. */
  readonly onDidBuildProgress: Event<ImageProgress & { variant: string }>;
  runs!: RunService;
  proxyPort = 0;
  /** Project bases on the engine (docs/architecture.md §11, "A project's last copy"). */
  readonly bases: ProjectBases;

  constructor(
    readonly app: AppContext,
    readonly proxy: ModelProxy,
    readonly sandboxManagers: SandboxManagers,
    private readonly ownsApp: boolean,
  ) {
    ({ env: this.env, home: this.home, store: this.store, catalog: this.catalog, vault: this.vault, settings: this.settings } = app);
    this.onDidBuildProgress = sandboxManagers.onDidBuildProgress;
    this.bases = new ProjectBases({ home: this.home, git: app.git, engine: () => this.engine(), image: () => this.image('base'), installationId: () => app.installationId() });
  }

  /** The container engine sandboxes, image builds and the reaper use (`SandboxManagers.engine`). */
  engine(): Promise<Engine> {
    return this.sandboxManagers.engine();
  }

  /** The sandbox manager of an isolation level. */
  sandboxes(isolation: Isolation): Promise<SandboxManager> {
    return this.sandboxManagers.sandboxes(isolation);
  }

  /** The sandbox image for a variant, built once per process when missing. */
  image(variant: 'base' | 'agents', onProgress?: (p: ImageProgress) => void, isolation: Isolation = 'container'): Promise<string> {
    return this.sandboxManagers.image(variant, onProgress, isolation);
  }

  /** Drains the warm pool's sandboxes of these images, before they are removed (`SandboxManagers.releaseImages`). */
  releaseImages(images: Iterable<string>): Promise<void> {
    return this.sandboxManagers.releaseImages(images);
  }

  /** Keeps one started sandbox ready for the next run with default settings. */
  warm(): Promise<void> {
    return this.sandboxManagers.warm();
  }

  async providerFormat(provider: string): Promise<'anthropic' | 'openai'> {
    const config = await this.catalog.get(provider);
    return config.kind === 'anthropic' ? 'anthropic' : 'openai';
  }

  async dispose(): Promise<void> {
    await this.runs.shutdown();
    await this.bases.settle();
    this.runs.dispose();
    await this.proxy.stop();
    await this.sandboxManagers.dispose();
    await this.store.close();
    if (this.ownsApp) await this.app.close();
  }
}

/** Builds the core: opens the stores, starts the proxy on loopback, recovers crashed runs. */
export async function createAirlockCore(opts: AirlockCoreOptions): Promise<AirlockCore> {
  const app = opts.app ?? new AppContext(opts);
  await app.ensureHome();
  const { catalog, vault, settings, store, home } = app;
  const initial = await settings.get();
  const proxy = new ModelProxy({ resolveUpstream: vaultResolver(catalog, vault), transcripts: initial.transcripts, prices: priceTableFor(initial.prices) });
  const managers = new SandboxManagers({ env: app.env, home, settings: () => settings.get(), installationId: () => app.installationId() });
  const core = new AirlockCore(app, proxy, managers, !opts.app);
  // A corrected price and the transcripts switch apply from the next call on, the engine and the VM
  // accelerator from the next sandbox; the store outlives these listeners.
  settings.onDidChange((s) => {
    proxy.setPrices(priceTableFor(s.prices));
    proxy.setTranscripts(s.transcripts);
    managers.onSettingsChanged(s);
  });
  core.proxyPort = (await proxy.start()).port;
  core.runs = new RunService({
    store,
    sandboxes: (isolation) => core.sandboxes(isolation),
    image: (variant, onProgress, isolation) => core.image(variant, onProgress, isolation),
    environment: (input, onProgress) => prepareRunEnvironment({ home, env: app.env, installationId: () => app.installationId(), engine: () => core.engine(), airlockImage: (p) => core.image('base', p) }, input, onProgress),
    proxy,
    proxyPort: core.proxyPort,
    providerFormat: (p) => core.providerFormat(p),
    checkProviderAccess: async (p, agent) => assertCredentialServes(await catalog.get(p), agent),
    agent: getAgentAdapter,
    warmEnvironment: (isolation, spec) => managers.warmEnvironment(isolation, spec),
    network: (sandbox, run) => applyRunNetwork(sandbox, run, { home, keychainService: app.keychainService, env: app.env }, opts.egressProxyForTests),
    // The user's MCP servers for a run (§20): credentials from the same keychain service as provider keys.
    // Loaded on first use: a run without --mcp (and every CLI start) never pays for the SDK's client.
    mcpGateway: async (run) => {
      const [{ McpServerRegistry }, { openRunMcpGateway }, { createMcpRunPolicy, reviewPins }] = await Promise.all([import('./network/mcp-gateway/mcp-server-registry'), import('./network/mcp-gateway/run-mcp-gateway'), import('./network/mcp-gateway/mcp-tool-policy')]);
      const servers = await new McpServerRegistry({ home, service: app.keychainService }).resolve(run.servers);
      // Per-tool rules and pins from the entries (§20); questions wait for the user unless the run says no one answers.
      const { policy, hide, approvals } = createMcpRunPolicy({ entries: servers.map((s) => s.entry), mode: run.approvals });
      const entries = servers.map((s) => s.entry);
      // Local (stdio) servers run in sidecars beside a container sandbox only: the run's wipe removes them (§20).
      const isolation = run.isolation ?? 'container';
      const stdio =
        isolation === 'container' || isolation === 'gvisor'
          ? async (server: (typeof servers)[number]) => {
              const [{ openStdioSidecar }, { engineIdentity }] = await Promise.all([import('./network/mcp-gateway/stdio-sidecar'), import('./sandbox/docker/engine')]);
              const engine = await core.engine();
              const sidecarHost = {
                docker: engine.docker,
                engine: (await engineIdentity(engine)).kind,
                airlockImage: () => core.image('base', undefined, isolation),
                ...(isolation === 'gvisor' ? { runtime: 'runsc' } : {}),
                installation: await app.installationId(),
                packageCache: `${home}/mcp-packages`,
              };
              return openStdioSidecar(sidecarHost, run.runId, server);
            }
          : undefined;
      const gateway = await openRunMcpGateway({ runId: run.runId, servers, policy, hide, questions: approvals, ...(stdio ? { stdio } : {}) });
      // The run's `open` record says which tools changed since pinned, were never pinned, or are denied (hidden).
      const review = reviewPins(entries, gateway.tools);
      for (const s of gateway.record.servers) {
        const r = review.get(s.name);
        if (r?.changed.length) s.changed = r.changed;
        if (r?.unpinned.length) s.unpinned = r.unpinned;
        if (r?.denied.length) s.denied = r.denied;
      }
      return gateway;
    },
    bases: core.bases,
    ...(opts.setupQuietMsForTests ? { setupQuietMs: opts.setupQuietMsForTests } : {}),
  });
  // Bases of project folders that are gone go at start (no engine call when there are none, §11).
  void core.bases.prune().catch(debugLog.swallow('workspace.base.prune-at-start'));
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
  // Records of kept MCP sandboxes whose process is gone (their sandboxes were reaped just above, §17).
  if (opts.recover !== false) await sweepKeptRecords(home).catch(debugLog.swallow('mcp.kept.sweep'));
  return core;
}
