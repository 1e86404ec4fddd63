import { readdir, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ownerStatus, PROCESS_OWNER } from '../common/process-alive';
import { debugLog } from '../common/debug-log';
import { Emitter, type Event } from '../common/disposable';
import { SlotCap } from '../runs/client-grants';
import { writeDurably } from '../common/stored-file';

/**
 * Kept sandboxes (docs/architecture.md §17, "Kept sandboxes"): made with `sandbox_create {keep: true}`,
 * they outlive the connection that made them. The MCP worker process that holds one keeps running
 * and later `airlock mcp` connections join it; a connection re-attaches by `sandboxId` only when its
 * client is granted the sandbox's folder. Each is recorded under `<home>/mcp/kept/<sandboxId>.json`
 * with its owner process, the client that made it and its folder; a record whose process is gone is
 * swept at the next start (crash recovery has reaped its sandbox by then).
 */

const KeptRecord = z.object({
  sandboxId: z.string(),
  /** The process holding the sandbox (`host:pid`). */
  owner: z.string(),
  /** The client that made it, as it named itself (a claim, for the log). */
  client: z.string(),
  /** The granted folder it is a copy of, resolved. */
  projectDir: z.string(),
  keptAt: z.string(),
  lastUsedAt: z.string(),
});
export type KeptRecord = z.infer<typeof KeptRecord>;

function keptDir(home: string): string {
  return path.join(home, 'mcp', 'kept');
}

/** Records of kept sandboxes whose holding process is gone are removed (their sandboxes were reaped with the process's runs). */
export async function sweepKeptRecords(home: string): Promise<string[]> {
  const dir = keptDir(home);
  const swept: string[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (!name.endsWith('.json')) continue;
    const file = path.join(dir, name);
    const parsed = KeptRecord.safeParse(await readFile(file, 'utf8').then((t) => JSON.parse(t) as unknown, () => undefined));
    if (parsed.success && ownerStatus(parsed.data.owner) !== 'gone') continue;
    await rm(file, { force: true });
    swept.push(name.slice(0, -'.json'.length));
  }
  return swept;
}

/** Every kept-sandbox record in this home (for tests and the app's view). */
export async function listKeptRecords(home: string): Promise<KeptRecord[]> {
  const dir = keptDir(home);
  const out: KeptRecord[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const parsed = KeptRecord.safeParse(await readFile(path.join(dir, name), 'utf8').then((t) => JSON.parse(t) as unknown, () => undefined));
    if (parsed.success) out.push(parsed.data);
  }
  return out;
}

export interface KeptSandboxesDeps {
  home: string;
  /** Ends a sandbox (collect, wipe, verify) — the run service's `endSession`. */
  end(sandboxId: string, reason: string): Promise<unknown>;
  /** How many may be kept at once in this process. */
  cap: number;
  /** A kept sandbox nobody used for this long is ended. */
  idleMs: number;
}

/** The kept sandboxes of one process: capped, recorded in the home, ended when idle. */
export class KeptSandboxes {
  private readonly kept = new Map<string, { record: KeptRecord; release: () => void; lastUsed: number }>();
  private readonly slots: SlotCap;
  private readonly timer: NodeJS.Timeout;
  private readonly changed = new Emitter<void>();
  /** A sandbox was kept or ended. */
  readonly onDidChange: Event<void> = this.changed.event;

  constructor(private readonly deps: KeptSandboxesDeps) {
    this.slots = new SlotCap(deps.cap);
    this.timer = setInterval(() => this.sweepIdle(), Math.max(50, Math.min(30_000, deps.idleMs / 4)));
    this.timer.unref();
  }

  get size(): number {
    return this.kept.size;
  }

  get cap(): number {
    return this.slots.cap;
  }

  /** A slot for a sandbox about to be made (taken before any await), or undefined at the cap. */
  reserve(): (() => void) | undefined {
    return this.slots.take();
  }

  /** Records a made sandbox as kept, with the slot `reserve` gave. */
  async keep(sandboxId: string, client: string, projectDir: string, release: () => void): Promise<void> {
    const now = new Date().toISOString();
    const record: KeptRecord = { sandboxId, owner: PROCESS_OWNER, client, projectDir, keptAt: now, lastUsedAt: now };
    this.kept.set(sandboxId, { record, release, lastUsed: Date.now() });
    await this.write(record);
    this.changed.fire();
  }

  get(sandboxId: string): KeptRecord | undefined {
    return this.kept.get(sandboxId)?.record;
  }

  list(): KeptRecord[] {
    return [...this.kept.values()].map((k) => ({ ...k.record, lastUsedAt: new Date(k.lastUsed).toISOString() }));
  }

  /** The sandbox was used: its idle clock restarts. */
  touch(sandboxId: string): void {
    const k = this.kept.get(sandboxId);
    if (k) k.lastUsed = Date.now();
  }

  /** Ends a kept sandbox (destroy, idle, stop); resolves with what `end` gave. */
  async end(sandboxId: string, reason: string): Promise<unknown> {
    const k = this.kept.get(sandboxId);
    this.kept.delete(sandboxId);
    try {
      return await this.deps.end(sandboxId, reason);
    } finally {
      k?.release();
      await rm(this.file(sandboxId), { force: true }).catch(debugLog.swallow('mcp.kept.rm'));
      if (k) this.changed.fire();
    }
  }

  /** Ends every kept sandbox (the process stops). */
  async dispose(reason: string): Promise<void> {
    clearInterval(this.timer);
    await Promise.all([...this.kept.keys()].map((id) => this.end(id, reason).catch(debugLog.swallow('keptSandboxes.dispose'))));
    this.changed.dispose();
  }

  private sweepIdle(): void {
    const now = Date.now();
    for (const [id, k] of this.kept) if (now - k.lastUsed >= this.deps.idleMs) void this.end(id, `kept sandbox idle for ${Math.round((now - k.lastUsed) / 1000)} s`).catch(debugLog.swallow('mcp.kept.idle'));
  }

  private file(sandboxId: string): string {
    return path.join(keptDir(this.deps.home), `${sandboxId}.json`);
  }

  private async write(record: KeptRecord): Promise<void> {
    await writeDurably(this.file(record.sandboxId), `${JSON.stringify(record, null, 2)}\n`);
  }
}
