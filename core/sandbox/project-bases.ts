import path from 'node:path';
import { debugLog } from '../common/debug-log';
import type { Engine } from './docker/engine';
import { createProjectBase, engineSupportsBases, findProjectBase, listProjectBases, prepareBaseVolumes, pruneProjectBases, removeBase, type BaseListing, type PruneBasesResult } from './docker/project-base-volumes';
import { BaseStore, baseKey, type BaseRecord } from '../workspace/project-base';
import type { HostGit } from '../workspace/host-git';

export interface ProjectBasesOptions {
  /** `<AIRLOCK_HOME>`: records and host object stores live in `bases/` under it. */
  home: string;
  /** Host git: a base is the project as read with it, kept in a host object store. */
  git: HostGit;
  engine: () => Promise<Engine>;
  /** Airlock's own sandbox image (the writer's and the ownership step's; never a project's). */
  image: () => Promise<string>;
  installationId: () => Promise<string>;
  /**
   * Smaller projects get no base (default: fewer than 2,000 files and 16 MB): their whole copy takes
   * well under a second, and a base would hold an engine volume for nothing.
   */
  minFiles?: number;
  minBytes?: number;
}

/** A base a run starts from: its volumes are made; hydrate streams only the difference. */
export interface BaseClaim {
  record: BaseRecord;
  /** The host store the run's object store borrows the unchanged blobs from. */
  objectsDir: string;
}

/**
 * The app's project bases (docs/architecture.md §11, "A project's last copy"): a run on Airlock's
 * own image claims its project's base before its sandbox is made, and the base is written again
 * from the project once the run is over, off every run's path. One writer per project at a time.
 */
export class ProjectBases {
  readonly store: BaseStore;
  private readonly supported = new WeakMap<Engine, Promise<boolean>>();
  private readonly writing = new Map<string, Promise<void>>();

  constructor(private readonly opts: ProjectBasesOptions) {
    this.store = new BaseStore(path.join(opts.home, 'bases'));
  }

  private async usable(): Promise<Engine | undefined> {
    const engine = await this.opts.engine();
    let ok = this.supported.get(engine);
    if (!ok) this.supported.set(engine, (ok = engineSupportsBases(engine)));
    return (await ok) ? engine : undefined;
  }

  /** Makes `runId`'s volumes from the project's base, or says why not (the run then copies the project whole). */
  async claim(runId: string, projectDir: string): Promise<BaseClaim | { reason: string }> {
    const engine = await this.usable();
    if (!engine) return { reason: 'the engine has no overlay volumes (Podman, rootless or not Linux)' };
    const [found, installation, image] = await Promise.all([findProjectBase(engine, this.store, projectDir), this.opts.installationId(), this.opts.image()]);
    if (!found.ok) return { reason: found.reason };
    await prepareBaseVolumes(engine, { runId, record: found.record, image, installation });
    return { record: found.record, objectsDir: this.store.objectsDir(found.record.key, found.record.volume) };
  }

  /** Writes the project's base again in the background (after a run); a write already under way is enough. */
  refresh(projectDir: string, size: { files: number; bytes: number }): Promise<void> {
    if (size.files < (this.opts.minFiles ?? 2_000) && size.bytes < (this.opts.minBytes ?? 16 * 1024 * 1024)) return Promise.resolve();
    const key = baseKey(projectDir);
    const busy = this.writing.get(key);
    if (busy) return busy;
    const task = (async () => {
      const engine = await this.usable();
      if (!engine) return;
      await createProjectBase({ engine, git: this.opts.git, image: await this.opts.image(), store: this.store, projectDir, installation: await this.opts.installationId() });
    })()
      .catch(debugLog.swallow('workspace.base.refresh'))
      .finally(() => this.writing.delete(key));
    this.writing.set(key, task);
    return task;
  }

  /** Removes a base that failed its check at a run's start. */
  async discard(record: BaseRecord): Promise<void> {
    const engine = await this.opts.engine();
    await removeBase(engine, this.store, record);
  }

  async list(): Promise<BaseListing[]> {
    return listProjectBases(await this.opts.engine(), this.store);
  }

  /** Waits for base writes under way (the app's shutdown). */
  async settle(): Promise<void> {
    await Promise.allSettled(this.writing.values());
  }

  /** Bases whose project folder is gone, or all of them; never one a live run reads. */
  async prune(opts: { all?: boolean } = {}): Promise<PruneBasesResult> {
    await Promise.allSettled(this.writing.values());
    if (!opts.all && !(await this.store.list()).length) return { removed: [], kept: [], freedBytes: 0 };
    return pruneProjectBases(await this.opts.engine(), this.store, { ...opts, installation: await this.opts.installationId() });
  }
}
