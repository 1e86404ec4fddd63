import { randomBytes } from 'node:crypto';
import { AirlockError, toErrorInfo, type ErrorInfo } from '../../contracts/errors';
import { ChannelClient } from '../channel/channel-client';
import type { Disposable } from '../common/disposable';
import { pingEngine, type Engine } from './docker/engine';
import type { ChannelStream, SandboxDriver, SandboxInfo, SandboxSpec, WipeProof } from './driver';
import { LABEL_POOL } from './labels';
import { ownerStatus } from '../common/process-alive';
import { debugLog } from '../common/debug-log';

/**
 * A started sandbox with its channel connected and the helper's hello checked. Destroying it wipes
 * everything labelled with its run and returns the proof.
 */
export class Sandbox implements Disposable {
  private destroying: Promise<WipeProof> | undefined;

  constructor(
    /** What the engine knows; `info.runId` is the label its resources carry (see `runId`). */
    readonly info: SandboxInfo,
    readonly channel: ChannelClient,
    /** @internal The byte stream under the channel (closed on destroy). */
    readonly stream: ChannelStream,
    private readonly driver: SandboxDriver,
    private readonly onDestroyed: (s: Sandbox, verified: boolean) => void,
    /** The run this sandbox serves. Differs from `info.runId` when it came from the warm pool. */
    readonly runId: string = info.runId,
  ) {}

  /** The helper's stderr tail, for diagnostics when something went wrong. */
  helperDiagnostics(): string {
    return this.stream.stderrTail?.() ?? '';
  }

  /** The host identity of each of the sandbox's processes, as the engine sees them (undefined when it cannot). */
  processOwners(): Promise<string[] | undefined> {
    return this.driver.processOwners?.(this.info.id) ?? Promise.resolve(undefined);
  }

  /** Closes the channel, removes the sandbox and its volumes, and verifies nothing is left. Idempotent. */
  destroy(): Promise<WipeProof> {
    this.destroying ??= (async () => {
      this.channel.dispose();
      this.stream.close();
      let verified = false;
      try {
        const proof = await this.driver.destroy(this.info.runId);
        verified = proof.leftovers.length === 0;
        return this.runId === this.info.runId ? proof : { ...proof, runId: this.runId, labelRunId: this.info.runId };
      } finally {
        this.onDestroyed(this, verified);
      }
    })();
    return this.destroying;
  }

  /** Fire-and-forget destroy (for DisposableStore); await `destroy()` to get the proof. */
  dispose(): void {
    this.destroy().catch(debugLog.swallow('sandbox.dispose'));
  }
}

export interface SandboxManagerOptions {
  /** How long the helper may take to say hello (default 15 s; first start after a build is slowest). */
  helloTimeoutMs?: number;
  /** This installation's id: on a shared engine the reaper takes only resources that carry it. */
  installationId?: string;
}

/** How long after a claim the pool starts replacing the sandbox taken (see refillLater). */
const REFILL_DELAY_MS = 1000;

function poolKey(spec: Omit<SandboxSpec, 'runId'>): string {
  // A sandbox on a run's sidecar network never matches a pooled one (pools are made without).
  return JSON.stringify([spec.image, spec.network, spec.joinNetwork ?? null, spec.limits.memoryBytes, spec.limits.cpus, spec.limits.pids]);
}

/**
 * One kind of pooled sandbox. `environment` entries (a project environment's derived or prepared
 * image) are not refilled at a claim but when the claiming run asks again at its end, and at most
 * MAX_ENVIRONMENT_POOLS of them are kept (see `warmEnvironment`).
 */
interface PoolEntry {
  spec: Omit<SandboxSpec, 'runId'>;
  size: number;
  ready: Sandbox[];
  filling: number;
  environment: boolean;
  /** When it was last asked for (`performance.now()`): the least recent environment entry goes first. */
  askedAt: number;
}

/** How many project environments' images keep a started sandbox ready at once (each an idle container and helper). */
export const MAX_ENVIRONMENT_POOLS = 2;

/** A label id for pooled sandboxes: shaped like a run id so every engine accepts it in names. */
function poolRunId(): string {
  return `w-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

/**
 * Creates sandboxes (create → start → channel → hello), keeps an optional warm pool of pre-started
 * ones, and reaps sandboxes left behind by runs that are no longer live.
 */
export class SandboxManager implements Disposable {
  private readonly live = new Set<Sandbox>();
  private readonly pool = new Map<string, PoolEntry>();
  private readonly refills = new Set<Promise<void>>();
  /** Delayed refills not started yet (refillLater): shutdown() starts them at once, to do nothing. */
  private readonly refillWaits = new Set<() => void>();
  /** Runs whose wipe could not be verified (the engine was unreachable): retried before the next create. */
  private readonly unverifiedWipes = new Set<string>();
  private disposed = false;
  /** Replaced (the engine setting changed): no refills; sandboxes in use keep running (see `retire`). */
  private retired = false;
  /** Creates in progress, so `retire` does not call a manager idle while one is being made. */
  private creating = 0;
  private readonly idleWaiters: Array<() => void> = [];

  constructor(
    readonly driver: SandboxDriver,
    private readonly opts: SandboxManagerOptions = {},
  ) {}

  /**
   * A ready sandbox for `spec`: from the warm pool when one matches (then `sandbox.runId` is
   * `spec.runId` and `info.runId` the pool label), else freshly created. Anything half-made is
   * wiped before the error is thrown.
   */
  async create(spec: SandboxSpec): Promise<Sandbox> {
    if (this.disposed) throw new AirlockError('CANCELLED', 'the sandbox manager is shut down');
    this.creating++;
    try {
      return await this.createNow(spec);
    } finally {
      this.creating--;
      this.wakeIfIdle();
    }
  }

  private async createNow(spec: SandboxSpec): Promise<Sandbox> {
    this.retryUnverifiedWipes();
    const entry = spec.volumesReady ? undefined : this.pool.get(poolKey(spec));
    const warm = entry?.ready.shift();
    if (entry && warm) {
      if (!entry.environment) this.refillLater(entry);
      if (!warm.channel.isClosed) {
        const claimed = new Sandbox(warm.info, warm.channel, warm.stream, this.driver, (s, verified) => this.onDestroyed(s, verified), spec.runId);
        this.live.add(claimed);
        return claimed;
      }
      await warm.destroy().catch(debugLog.swallow('sandbox.pool.stale-warm'));
    }
    const sandbox = await this.start(spec);
    this.live.add(sandbox);
    return sandbox;
  }

  private async start(spec: SandboxSpec, runId = spec.runId): Promise<Sandbox> {
    const info = await this.driver.create(spec);
    let stream: ChannelStream | undefined;
    try {
      stream = await this.driver.openChannel(info.id);
      const channel = await ChannelClient.connect(stream, { helloTimeoutMs: this.opts.helloTimeoutMs });
      // The helper itself may be root (with a few capabilities, out of the agent's reach, §2.3);
      // the agent's commands never are.
      if (channel.hello.agentUid === 0) {
        channel.dispose();
        throw new AirlockError('SANDBOX_FAILED', 'the sandbox helper would run commands as root; Airlock refuses to use it. Use an image whose user 1000 exists, or Airlock\'s own image.');
      }
      return new Sandbox(info, channel, stream, this.driver, (s, verified) => this.onDestroyed(s, verified), runId);
    } catch (err) {
      const diagnostics = stream?.stderrTail?.().trim();
      stream?.close();
      await this.driver.destroy(spec.runId).catch(debugLog.swallow('sandbox.create.cleanup'));
      if (err instanceof AirlockError && diagnostics) {
        throw new AirlockError(err.kind, `${err.message}\nhelper stderr: ${diagnostics.slice(-1000)}`, { cause: err });
      }
      throw err;
    }
  }

  private onDestroyed(s: Sandbox, verified: boolean): void {
    this.live.delete(s);
    if (verified) this.unverifiedWipes.delete(s.info.runId);
    else this.unverifiedWipes.add(s.info.runId);
    this.wakeIfIdle();
  }

  private wakeIfIdle(): void {
    if (this.live.size > 0 || this.creating > 0) return;
    for (const wake of this.idleWaiters.splice(0)) wake();
  }

  /**
   * Steps aside for a manager on another engine (the engine setting changed): the warm pool is
   * wiped now and never refilled; sandboxes in use keep their engine until their runs end. Resolves
   * once the last of them is destroyed, so the caller can close the old engine's connections.
   */
  async retire(): Promise<void> {
    this.retired = true;
    await this.whenPoolReady();
    const pooled: Sandbox[] = [];
    for (const e of this.pool.values()) pooled.push(...e.ready.splice(0));
    this.pool.clear();
    await Promise.allSettled(pooled.map((s) => s.destroy()));
    while (this.live.size > 0 || this.creating > 0) await new Promise<void>((wake) => this.idleWaiters.push(wake));
  }

  /** Wipes again, in the background, what an unreachable engine kept from being wiped and verified. */
  private retryUnverifiedWipes(): void {
    for (const runId of this.unverifiedWipes) {
      this.driver.destroy(runId).then(
        (proof) => {
          if (proof.leftovers.length === 0) this.unverifiedWipes.delete(runId);
        },
        () => undefined, // Still unreachable: the next create (or the reaper at the next start) tries again.
      );
    }
  }

  /** Runs whose sandbox could not be wiped and verified yet (retried before each create). */
  pendingWipes(): string[] {
    return [...this.unverifiedWipes];
  }

  /**
   * Keeps `size` pre-started sandboxes for specs like this one, so `create` answers at once. Costs
   * one idle container plus a Node process each. `size: 0` drains the pool.
   */
  async warm(spec: Omit<SandboxSpec, 'runId'>, size = 1): Promise<void> {
    await this.warmEntry(spec, size, false);
  }

  /**
   * Keeps one started sandbox of a project environment's image ready for the next run on it
   * (docs/architecture.md §16, "The prepared path"). `spec.image` must be the image's id, not a tag,
   * so a rebuilt or re-made image never gets an older sandbox. A pooled sandbox is made exactly as a
   * fresh one (same driver, same spec), is handed out once and wiped with its run: it carries nothing
   * but the image. Not refilled at the claim (the refill would compete with the claiming run's first
   * commands): the run asks again when it ends. At most MAX_ENVIRONMENT_POOLS images are kept; the
   * one asked for least recently is drained and verified gone first.
   */
  async warmEnvironment(spec: Omit<SandboxSpec, 'runId'>): Promise<void> {
    if (this.disposed || this.retired) return;
    const key = poolKey(spec);
    const others = [...this.pool.entries()].filter(([k, e]) => e.environment && k !== key).sort(([, a], [, b]) => b.askedAt - a.askedAt);
    for (const [k] of others.slice(MAX_ENVIRONMENT_POOLS - 1)) await this.drainEntry(k);
    await this.warmEntry(spec, 1, true);
  }

  /**
   * Drains and forgets the pool entries of these images (ids or tags, as the entries were made):
   * before an image is removed, so no pooled sandbox holds it. Resolves once their sandboxes,
   * including ones still starting, are gone; returns the wipe proofs of those that were ready.
   */
  async releaseImages(images: ReadonlySet<string>): Promise<WipeProof[]> {
    const keys = [...this.pool.entries()].filter(([, e]) => images.has(e.spec.image)).map(([k]) => k);
    const proofs = (await Promise.all(keys.map((k) => this.drainEntry(k)))).flat();
    await this.whenPoolReady();
    return proofs;
  }

  private async drainEntry(key: string): Promise<WipeProof[]> {
    const entry = this.pool.get(key);
    if (!entry) return [];
    this.pool.delete(key);
    // A sandbox still starting finds size 0 when it is ready and is wiped then (refill).
    entry.size = 0;
    return Promise.all(entry.ready.splice(0).map((s) => s.destroy()));
  }

  private async warmEntry(spec: Omit<SandboxSpec, 'runId'>, size: number, environment: boolean): Promise<void> {
    const key = poolKey(spec);
    let entry = this.pool.get(key);
    if (!entry) {
      entry = { spec, size, ready: [], filling: 0, environment, askedAt: performance.now() };
      this.pool.set(key, entry);
    }
    entry.askedAt = performance.now();
    entry.size = size;
    for (const extra of entry.ready.splice(size)) await extra.destroy().catch(debugLog.swallow('sandbox.pool.shrink'));
    this.refill(entry);
    await this.whenPoolReady();
  }

  /** Resolves when no refill is in progress. */
  async whenPoolReady(): Promise<void> {
    while (this.refills.size > 0) await Promise.allSettled([...this.refills]);
  }

  /**
   * Refills a slot the claiming run just took, REFILL_DELAY_MS later: starting the next sandbox (for
   * a VM, QEMU, the state load and its first command: about a core for a second under TCG) at the
   * moment of the claim competed with the claiming run's first command, the latency the pool is
   * for (a pooled VM's first command took 0.2–0.5 s instead of ~0.1 s). whenPoolReady() waits for
   * it; a run that comes sooner starts fresh, as with an empty pool.
   */
  private refillLater(entry: PoolEntry): void {
    const p: Promise<void> = new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        this.refillWaits.delete(early);
        resolve();
      }, REFILL_DELAY_MS);
      // shutdown() does not wait out the delay: refill() then does nothing.
      const early = () => {
        clearTimeout(timer);
        resolve();
      };
      this.refillWaits.add(early);
    })
      .then(() => this.refill(entry))
      .finally(() => this.refills.delete(p));
    this.refills.add(p);
  }

  private refill(entry: PoolEntry): void {
    while (!this.disposed && !this.retired && entry.ready.length + entry.filling < entry.size) {
      entry.filling++;
      const runId = poolRunId();
      const p = this.start({ ...entry.spec, runId, labels: { ...(entry.spec.labels ?? {}), [LABEL_POOL]: 'true' } })
        .then((s) => this.firstCommand(s))
        .then(
          async (s) => {
            // Wiped before this refill counts as done, so shutdown() never returns with it half-gone.
            if (this.disposed || this.retired || entry.ready.length >= entry.size) await s.destroy().catch(debugLog.swallow('sandbox.pool.refill-extra'));
            else entry.ready.push(s);
          },
          () => undefined, // A failed refill leaves the pool short; create() then starts fresh.
        )
        .finally(() => {
          entry.filling--;
          this.refills.delete(p);
        });
      this.refills.add(p);
    }
  }

  /**
   * Runs one command (`echo`: the helper's spawn and output paths) in a pooled sandbox before it
   * counts as ready, so what a sandbox's first command pays once is paid while the pool fills, not
   * by the run that claims it: a VM restored from a snapshot under TCG translates the guest's code
   * afresh (its first command took ~0.3–0.5 s, later ones ~0.09 s; docs/architecture.md §4). Best
   * effort: an image without `echo` still pools; a sandbox whose channel closed or that does not
   * answer in time is wiped (the pool stays short; create() then starts fresh).
   */
  private async firstCommand(s: Sandbox): Promise<Sandbox> {
    const timeoutMs = this.opts.helloTimeoutMs ?? 15_000;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    try {
      const r = await Promise.race([s.channel.run({ argv: ['echo', 'airlock-warm-up'] }).catch(() => 'failed' as const), timedOut]);
      if (r === 'timeout' || s.channel.isClosed) {
        throw new AirlockError('SANDBOX_FAILED', r === 'timeout' ? `a pooled sandbox did not run a first command within ${timeoutMs} ms` : 'a pooled sandbox closed its channel');
      }
      return s;
    } catch (err) {
      await s.destroy().catch(debugLog.swallow('sandbox.pool.drain'));
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Run ids (labels) of sandboxes this manager holds: live and pooled. */
  private ownLabels(): Set<string> {
    const ids = new Set<string>();
    for (const s of this.live) ids.add(s.info.runId);
    for (const e of this.pool.values()) for (const s of e.ready) ids.add(s.info.runId);
    return ids;
  }

  /**
   * Crash recovery: removes every sandbox (and orphaned volume/network) whose run is not live.
   * Left alone: sandboxes held by this manager, those of another Airlock process on this host that
   * is still running, and — on an engine that may be shared (reached over the network) — anything
   * not labelled with this installation's id, since another user's host name and pid mean nothing
   * here (docs/architecture.md §13). `othersOnly`: only those of processes that are gone (a process
   * that is already serving sandboxes recovers for others). Returns the run ids that were wiped.
   */
  async reapOrphans(isLive: (runId: string) => boolean, opts: { othersOnly?: boolean } = {}): Promise<string[]> {
    const own = this.ownLabels();
    const shared = (await this.driver.sharedEngine?.()) ?? false;
    const keep = (runId: string) => own.has(runId) || isLive(runId);
    const ours = (r: { owner?: string; installation?: string }): boolean => {
      const status = ownerStatus(r.owner);
      if (status === 'running') return false;
      // A process already serving (a joined MCP worker) may be making sandboxes of its own right now.
      if (opts.othersOnly && status !== 'gone') return false;
      if (r.installation !== undefined && r.installation === this.opts.installationId) return true;
      // Another installation (or none recorded): only a process of this very host that is gone, on an engine no one else uses.
      return !shared && (status === 'gone' || status === 'self');
    };
    const sandboxes = await this.driver.list();
    const candidates = new Set<string>();
    for (const info of sandboxes) {
      // A damaged record hides the owner, which reads as "gone": a running sandbox is left alone.
      if (info.recordProblem && info.state !== 'exited') continue;
      if (!keep(info.runId) && ours(info)) candidates.add(info.runId);
    }
    // Resources without a container: reap unless a container of the same run was kept above, or
    // their maker is not ours to judge (its container may be on its way).
    const keptRuns = new Set(sandboxes.map((i) => i.runId).filter((id) => !candidates.has(id)));
    for (const r of (await this.driver.listRunResources?.()) ?? []) {
      if (!keep(r.runId) && !keptRuns.has(r.runId) && ours(r)) candidates.add(r.runId);
    }
    const reaped: string[] = [];
    for (const runId of candidates) {
      const proof = await this.driver.destroy(runId);
      if (proof.leftovers.length === 0) {
        reaped.push(runId);
        this.unverifiedWipes.delete(runId);
      }
    }
    return reaped;
  }

  /** Destroys the pool and every sandbox still held. */
  async shutdown(): Promise<WipeProof[]> {
    this.disposed = true;
    for (const start of [...this.refillWaits]) start();
    this.refillWaits.clear();
    await this.whenPoolReady();
    const all = [...this.live];
    for (const e of this.pool.values()) all.push(...e.ready.splice(0));
    this.pool.clear();
    return Promise.all(all.map((s) => s.destroy()));
  }

  dispose(): void {
    this.shutdown().catch(debugLog.swallow('sandbox.shutdown'));
  }
}

/** Whether the engine the root chose answers; never throws. `env`: the root's environment the engine was resolved from. */
export async function checkEngine(env: NodeJS.ProcessEnv, engine: Engine): Promise<{ ok: boolean; version?: string; endpoint?: string; error?: ErrorInfo }> {
  try {
    const v = await pingEngine(engine, env);
    return { ok: true, version: v.version, endpoint: engine.endpoint.display };
  } catch (err) {
    return { ok: false, endpoint: engine.endpoint.display, error: toErrorInfo(err) };
  }
}
