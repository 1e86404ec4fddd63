import { mkdir } from 'node:fs/promises';
import { airlockHome } from './common/paths';
import { installationId } from './common/installation-id';
import { KeyVault } from './keys/key-vault';
import { ProviderCatalog } from './keys/provider-catalog';
import { RunStore } from './runs/run-store';
import type { Engine } from './sandbox/docker/engine';
import type { EngineSelection } from './sandbox/docker/engine-endpoint';
import { SettingsStore } from './settings/settings-store';
import { HostGit } from './workspace/host-git';

/** The keychain service provider keys live under: `AIRLOCK_KEYCHAIN_SERVICE` (tests, side-by-side installs) or `airlock`. */
export function keychainServiceOf(env: NodeJS.ProcessEnv): string {
  return env.AIRLOCK_KEYCHAIN_SERVICE || 'airlock';
}

export interface AppContextOptions {
  /** The root's environment (CLI entry, Electron main, a test): nothing below the context reads `process.env`. */
  env: NodeJS.ProcessEnv;
  /** Airlock's data folder (default `airlockHome(env)`). */
  home?: string;
}

/**
 * What every front end shares, made once from one environment (docs/architecture.md §5, "One
 * composition root"): the data folder, settings, the provider catalog, the key vault (under the
 * keychain service the environment names), the run store, the installation id and the engine the
 * settings choose. The CLI's commands, the setup check, the desktop app and `airlock serve` all
 * read these, so none of them can open another keychain service or another data folder. Cheap to
 * make: nothing is read until asked.
 */
export class AppContext {
  readonly env: NodeJS.ProcessEnv;
  readonly home: string;
  readonly keychainService: string;
  readonly settings: SettingsStore;
  readonly catalog: ProviderCatalog;
  readonly vault: KeyVault;
  readonly store: RunStore;
  /** Host git, on this environment's `PATH` (every read of the project and of a run's object store). */
  readonly git: HostGit;
  private installation: Promise<string> | undefined;
  private closed: Promise<void> | undefined;

  constructor(opts: AppContextOptions) {
    this.env = opts.env;
    this.home = opts.home ?? airlockHome(this.env);
    this.keychainService = keychainServiceOf(this.env);
    this.settings = new SettingsStore(this.home);
    this.catalog = new ProviderCatalog({ home: this.home });
    this.vault = new KeyVault(this.catalog, { service: this.keychainService });
    this.git = new HostGit(this.env);
    this.store = new RunStore({ home: this.home, git: this.git });
  }

  /** Creates the data folder (owner only) if it is not there yet. */
  async ensureHome(): Promise<void> {
    await mkdir(this.home, { recursive: true, mode: 0o700 });
  }

  /** This home's installation id (made on first use; engine resources carry it). */
  installationId(): Promise<string> {
    this.installation ??= installationId(this.home);
    this.installation.catch(() => (this.installation = undefined));
    return this.installation;
  }

  /** The engine the settings choose; the environment's `AIRLOCK_ENGINE*` (from `--engine-host`, `--engine`) still wins. */
  async engineSelection(): Promise<EngineSelection> {
    // Loaded when asked: commands that never reach an engine do not load its client.
    const { engineSelectionOf } = await import('./sandbox/docker/engine-settings');
    return engineSelectionOf(this.env, await this.settings.get());
  }

  /** A new connection to the chosen engine (docs/architecture.md §13); the caller disposes it. */
  async connectEngine(): Promise<Engine> {
    const { connectEngine } = await import('./sandbox/docker/engine');
    return connectEngine(this.env, await this.engineSelection());
  }

  /** Flushes the run store and forgets session-only keys. Safe to call more than once. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      await this.store.close();
      this.vault.dispose();
    })();
    return this.closed;
  }
}

/** The shared pieces for one environment (see `AppContext`). */
export function createAppContext(opts: AppContextOptions): AppContext {
  return new AppContext(opts);
}
