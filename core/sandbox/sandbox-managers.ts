import type { Settings } from '../../contracts/settings';
import type { Isolation } from '../../contracts/runs';
import { AirlockError } from '../../contracts/errors';
import { Emitter, type Event } from '../common/disposable';
import { DockerDriver } from './docker/docker-driver';
import { connectEngine, type Engine } from './docker/engine';
import { engineSelectionOf, engineSettingsKey } from './docker/engine-settings';
import { DEFAULT_LIMITS, type ImageProgress, type SandboxSpec } from './driver';
import { debugLog } from '../common/debug-log';
import { ensureSandboxImage } from './image';
import { SandboxManager } from './sandbox';
import { containerHelloTimeoutMs, engineArch } from './sandbox-arch';
import { createVmManager } from './vm-manager';

export interface SandboxManagersOptions {
  env: NodeJS.ProcessEnv;
  home: string;
  /** The current settings (engine fields, `vmAccel`). */
  settings(): Promise<Settings>;
  /** This home's installation id (engine resources carry it). */
  installationId(): Promise<string>;
}

/**
 * The sandbox managers of each isolation level, on the engine the settings name, and the images they
 * start from. A settings change switches engines for the next sandbox; runs in progress keep the engine
 * (or VM driver) they started on, which is closed once their sandboxes are gone
 * (docs/architecture.md §13, "Changing engines").
 */
export class SandboxManagers {
  private readonly managers = new Map<Isolation, Promise<SandboxManager>>();
  private readonly buildProgress = new Emitter<ImageProgress & { variant: string }>();
  /** Image build progress of any build started here. */
  readonly onDidBuildProgress: Event<ImageProgress & { variant: string }> = this.buildProgress.event;
  private readonly images = new Map<string, Promise<string>>();
  private enginePromise: Promise<Engine> | undefined;
  /** The engine settings `enginePromise` was made from (`engineSettingsKey`). */
  private engineInUse: string | undefined;
  /** The `vmAccel` the current VM manager was made with. */
  private vmAccelInUse: string | undefined;
  /** Managers and engines replaced by a settings change, kept until their last sandbox is gone. */
  private readonly retiring = new Set<Promise<void>>();
  private readonly retiredParts = new Set<Promise<SandboxManager | Engine | undefined>>();
  /** `warm()` was asked for: a new engine gets its warm sandbox too. */
  private keepWarm = false;

  constructor(private readonly opts: SandboxManagersOptions) {}

  /**
   * The container engine every container sandbox, image build and the reaper use: the `engineHost`
   * setting (or `--engine-host`), else DOCKER_HOST, CONTAINER_HOST, the Docker context, the well-known
   * sockets, limited to Docker or Podman by the `engine` setting (or `--engine`).
   */
  engine(): Promise<Engine> {
    if (!this.enginePromise) {
      const made = this.opts.settings().then((s) => {
        if (this.enginePromise === made) this.engineInUse = engineSettingsKey(s);
        return connectEngine(this.opts.env, engineSelectionOf(this.opts.env, s));
      });
      this.enginePromise = made;
      made.catch(() => {
        if (this.enginePromise === made) this.enginePromise = undefined;
      });
    }
    return this.enginePromise;
  }

  /** A settings change: another engine or VM accelerator is used from the next sandbox on. */
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

  private retire(isolations: Isolation[], engine?: Promise<Engine>): void {
    const managers = isolations.flatMap((i) => {
      const m = this.managers.get(i);
      this.managers.delete(i);
      return m ? [m.catch(() => undefined)] : []; // a manager that failed to start has nothing to dispose
    });
    const parts = [...managers, ...(engine ? [engine.catch(() => undefined)] : [])]; // an engine that failed to connect has nothing to dispose
    for (const p of parts) this.retiredParts.add(p);
    const done = (async () => {
      for (const m of managers) await (await m)?.retire();
      (await engine?.catch(() => undefined))?.dispose(); // an engine that failed to connect has nothing to dispose
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
      const installation = await this.opts.installationId();
      const engine = await this.engine();
      // An emulated architecture (AIRLOCK_SANDBOX_ARCH) starts its helper far slower than a native one.
      const helloTimeoutMs = await containerHelloTimeoutMs(this.opts.env, () => engineArch(engine));
      return new SandboxManager(new DockerDriver({ env: this.opts.env, engine, installationId: installation, isolation }), { installationId: installation, ...(helloTimeoutMs ? { helloTimeoutMs } : {}) });
    }
    const { vmAccel } = await this.opts.settings();
    if (process.platform !== 'win32' && process.platform !== 'darwin') this.vmAccelInUse = vmAccel ?? 'auto';
    return createVmManager({ env: this.opts.env, vmAccel, image: (v) => this.image(v), engine: () => this.engine() });
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
        env: this.opts.env,
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
      const { ref } = await ensureSandboxImage({ env: this.opts.env, variant: 'base', allowBuild: false, engine: this.engine() });
      const manager = await this.sandboxes('container');
      await manager.warm({ image: ref, limits: DEFAULT_LIMITS, network: 'none' }, 1);
    } catch {
      // No engine or no image yet: nothing to warm.
    }
  }

  /**
   * After a run on a project environment's image (derived or prepared, by id): keeps one started
   * sandbox of it ready for the next run, where sandboxes are kept warm at all (the long-lived app,
   * `warm()`; the CLI never). Containers and gVisor only; failures are ignored (runs start cold).
   * See `SandboxManager.warmEnvironment` and docs/architecture.md §16, "The prepared path".
   */
  warmEnvironment(isolation: Isolation, spec: Omit<SandboxSpec, 'runId'>): void {
    if (!this.keepWarm || isolation === 'vm') return;
    void this.sandboxes(isolation)
      .then((m) => m.warmEnvironment(spec))
      .catch(debugLog.swallow('sandbox.pool.environment'));
  }

  /** Before images are removed (`airlock env prune`): drains every pool entry made from them, and waits until those sandboxes are gone. */
  async releaseImages(images: Iterable<string>): Promise<void> {
    const set = new Set(images);
    for (const [isolation, m] of this.managers) {
      if (isolation === 'vm') continue;
      await (await m.catch(() => undefined))?.releaseImages(set); // a manager that failed to start holds no pool
    }
  }

  private async limaImage(variant: 'base' | 'agents'): Promise<string> {
    if (variant !== 'base') throw new AirlockError('VM_UNAVAILABLE', 'Claude Code and Codex need the agents image, which the Lima VM does not build yet; use the built-in agent, or container isolation.');
    const { describeSandboxImage } = await import('./image');
    const { LimaDriver } = await import('./lima/lima-driver');
    const driver = (await this.sandboxes('vm')).driver;
    if (!(driver instanceof LimaDriver)) throw new AirlockError('VM_UNAVAILABLE', 'VM isolation on macOS needs the Lima driver.');
    // Built for the VM's own architecture (arm64 on Apple Silicon), with the tag naming it.
    const { ref, context, buildargs } = await describeSandboxImage({ env: this.opts.env, arch: await driver.vmArch() });
    await driver.ensureImage(ref, context, buildargs);
    return ref;
  }

  async dispose(): Promise<void> {
    // The warm pool and every sandbox still held are wiped, and checked gone, before the engine closes.
    for (const m of this.managers.values()) await (await m.catch(() => undefined))?.shutdown().catch(debugLog.swallow('sandbox.shutdown')); // a manager that failed to start has nothing to shut down
    // Replaced managers and engines: their runs were shut down before this.
    for (const p of this.retiredParts) (await p)?.dispose();
    (await this.enginePromise?.catch(() => undefined))?.dispose(); // an engine that failed to connect has nothing to dispose
    this.buildProgress.dispose();
  }
}
