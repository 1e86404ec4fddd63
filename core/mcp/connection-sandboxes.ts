import { AirlockError } from '../../contracts/errors';
import { SlotCap, type ClientRef } from '../runs/client-grants';
import type { StoredRun } from '../runs/run-record';
import type { McpLimits } from './mcp-limits';
import type { McpDeps } from './mcp-server';
import { debugLog } from '../common/debug-log';

/** Commands run per sandbox, in this process: numbers the output resources (a kept sandbox's go on across connections). */
const EXEC_COUNT = new Map<string, number>();

/** What a connection's sandboxes need of it. */
export interface ConnectionSandboxesDeps {
  /** The door's deps once the core has started, else undefined. */
  started(): McpDeps | undefined;
  /** The door's deps, or INTERNAL while Airlock is still starting. */
  deps(): McpDeps;
  client: ClientRef;
  clientName(): string;
  limits: McpLimits;
}

/** One entry of `sandbox_list`. */
export interface ListedSandbox {
  sandboxId: string;
  projectDir: string;
  createdAt: string;
  lastUsedAt: string;
  kept: boolean;
}

/**
 * The sandboxes of one MCP connection (docs/architecture.md §17): those it made, wiped when idle or when
 * it closes, and kept ones (§17 "Kept sandboxes") it made or re-attached to, which outlive it.
 */
export class ConnectionSandboxes {
  /** Sandboxes (MCP session run ids) this connection made and holds. */
  readonly made = new Set<string>();
  /** This connection's sandbox cap; taken synchronously, before any await, so concurrent calls cannot all pass the check. */
  readonly slots: SlotCap;
  private readonly lastUsed = new Map<string, number>();
  private readonly slotOf = new Map<string, () => void>();
  private readonly madeAt = new Map<string, { projectDir: string; createdAt: string }>();
  /** Kept sandboxes this connection made or re-attached to. */
  private readonly attached = new Set<string>();
  private readonly idleTimer: ReturnType<typeof setInterval>;
  private isClosed = false;

  constructor(private readonly d: ConnectionSandboxesDeps) {
    this.slots = new SlotCap(d.limits.sandboxesPerClient);
    this.idleTimer = setInterval(() => {
      const now = Date.now();
      for (const [id, at] of this.lastUsed) {
        // Best effort, like close: the sandbox is off this connection's books either way.
        if (now - at >= d.limits.idleMs) void this.end(id, `idle for ${Math.round((now - at) / 1000)} s`).catch(debugLog.swallow('mcp.idleEnd'));
      }
    }, Math.max(50, Math.min(30_000, d.limits.idleMs / 4)));
    this.idleTimer.unref();
  }

  /** The connection is closing: nothing new is made. */
  get closed(): boolean {
    return this.isClosed;
  }

  /**
   * A sandbox this connection may use: one it made, or a kept one (§17 "Kept sandboxes") — that only
   * when this client is granted the sandbox's folder (the same check as sandbox_create), audited.
   */
  async own(sandboxId: string): Promise<string> {
    if (this.made.has(sandboxId)) {
      this.lastUsed.set(sandboxId, Date.now());
      return sandboxId;
    }
    const kept = this.d.started()?.kept?.get(sandboxId);
    if (kept && !this.isClosed) {
      if (!this.attached.has(sandboxId)) {
        const { grants, core } = this.d.deps();
        const folder = await grants.folder(this.d.client, kept.projectDir, { purpose: 'sandbox' });
        if (folder.dir !== kept.projectDir) throw new AirlockError('FORBIDDEN', `Kept sandbox ${sandboxId} is a copy of ${kept.projectDir}, not of ${folder.dir}.`);
        await grants.note('granted', this.d.client, { what: 'reattach', sandboxId, dir: kept.projectDir, keptBy: kept.client });
        await core.runs.noteOn(sandboxId, `MCP client ${this.d.clientName()} re-attached to this kept sandbox`, { client: this.d.clientName() });
        this.attached.add(sandboxId);
      }
      this.d.started()?.kept?.touch(sandboxId);
      return sandboxId;
    }
    throw new AirlockError('NOT_FOUND', `No live sandbox ${sandboxId} for this MCP connection (destroyed, wiped after ${Math.round(this.d.limits.idleMs / 60000)} min idle, or made by another connection without keep: true); create one with sandbox_create.`);
  }

  /** The sandbox was used just now (its idle clock starts again). */
  touch(sandboxId: string): void {
    if (this.made.has(sandboxId)) this.lastUsed.set(sandboxId, Date.now());
    else this.d.started()?.kept?.touch(sandboxId);
  }

  /** Holds a sandbox this connection made (not kept): `release` frees its slot when it ends. */
  hold(record: StoredRun, release: () => void): void {
    this.made.add(record.id);
    this.slotOf.set(record.id, release);
    this.madeAt.set(record.id, { projectDir: record.projectDir, createdAt: record.createdAt });
    this.lastUsed.set(record.id, Date.now());
  }

  /** A kept sandbox this connection made: used here without asking again. */
  attach(sandboxId: string): void {
    this.attached.add(sandboxId);
  }

  /** Ends a sandbox (wiped); a kept one through the kept store. Resolves with its record. */
  async end(sandboxId: string, reason: string): Promise<StoredRun> {
    if (this.attached.has(sandboxId) || (this.d.started()?.kept?.get(sandboxId) && !this.made.has(sandboxId))) {
      this.attached.delete(sandboxId);
      EXEC_COUNT.delete(sandboxId);
      await this.d.deps().kept?.end(sandboxId, reason);
      return this.d.deps().core.store.get(sandboxId);
    }
    this.made.delete(sandboxId);
    EXEC_COUNT.delete(sandboxId);
    this.lastUsed.delete(sandboxId);
    try {
      return await this.d.deps().core.runs.endSession(sandboxId, reason);
    } finally {
      this.slotOf.get(sandboxId)?.();
      this.slotOf.delete(sandboxId);
      this.madeAt.delete(sandboxId);
    }
  }

  /** The number of the next command run in the sandbox (it names the command's kept output). */
  nextCommand(sandboxId: string): number {
    const n = (EXEC_COUNT.get(sandboxId) ?? 0) + 1;
    EXEC_COUNT.set(sandboxId, n);
    return n;
  }

  /** The sandboxes this client sees: those it made, the kept ones it uses, and kept ones of folders granted to it without asking. */
  async list(): Promise<ListedSandbox[]> {
    const list = [...this.made].map((id) => ({ sandboxId: id, projectDir: this.madeAt.get(id)?.projectDir ?? '', createdAt: this.madeAt.get(id)?.createdAt ?? '', lastUsedAt: new Date(this.lastUsed.get(id) ?? 0).toISOString(), kept: false }));
    for (const k of this.d.deps().kept?.list() ?? []) {
      if (this.attached.has(k.sandboxId) || (await this.d.deps().grants.grantedFolder(this.d.client, k.projectDir))) list.push({ sandboxId: k.sandboxId, projectDir: k.projectDir, createdAt: k.keptAt, lastUsedAt: k.lastUsedAt, kept: true });
    }
    return list;
  }

  /** Wipes every sandbox this connection made (disconnect); kept ones stay. */
  async close(reason: string): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    clearInterval(this.idleTimer);
    // Each end is independent: one that fails must not keep the others from being wiped.
    await Promise.all([...this.made].map((id) => this.end(id, reason).catch(debugLog.swallow('mcp.close.end'))));
  }
}
