import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { Checkpoint, CheckpointList } from '../../contracts/checkpoints';
import { AirlockError, toErrorInfo } from '../../contracts/errors';
import { LimitError } from '../common/limit-error';
import type { AgentSessionFiles } from '../agents';
import type { AuditLog } from '../audit';
import { StoredFile } from '../common/stored-file';
import { parseStoredJson } from '../common/stored-json';
import type { CollectedResult, StoredResult } from '../workspace/collect';
import { ZERO_OID } from '../workspace/git-objects';
import { HostRepo } from '../workspace/host-repo';
import { StoredResultSchema } from '../workspace/stored-result';
import { SCAN_JS } from '../workspace/helper-scripts';
import { SANDBOX_LAYOUT, nodeArgv, type WorkspaceShell } from '../workspace/workspace-shell';
import type { LoadedResult } from './run-apply';
import { captureSession, loadSession, saveSession, type CarriedSession } from './run-session';
import type { RunStore } from './run-store';
import { debugLog } from '../common/debug-log';

/**
 * Checkpoints inside a run (docs/architecture.md §19). After each agent turn that changed files,
 * the host records a checkpoint: the same host-derived collect as at the end of the run (hints in,
 * a hostile tar of exactly those paths out, the commit and patch written and diffed on the host
 * against the host's baseline), kept with the run. The turn boundary is the model proxy seeing the
 * run's next model request (the agent's tool calls of the turn are done); the call waits until the
 * checkpoint is taken, so it holds the turn's files and no later ones.
 */

/** At most this many checkpoints before the result, and this many patch bytes together (defaults). */
export const MAX_CHECKPOINTS = 50;
export const MAX_CHECKPOINT_BYTES = 256 * 1024 * 1024;
/** A model request waits at most this long for its checkpoint; the checkpoint then finishes on its own. */
const MAX_HOLD_MS = 30_000;
/** One checkpoint's collect reads at most this much (as a run's result, or less when the budget is lower). */
const MAX_COLLECT_BYTES = 512 * 1024 * 1024;

const StoredCheckpoint = Checkpoint.extend({ resultCommit: z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/) });
type StoredCheckpoint = z.infer<typeof StoredCheckpoint>;
/** `artifacts/checkpoints/index.json`: parsed before anything is read by it. */
const CheckpointIndex = z.looseObject({ version: z.literal(1), checkpoints: z.array(StoredCheckpoint), limited: CheckpointList.shape.limited });
type CheckpointIndex = z.infer<typeof CheckpointIndex>;

/** Where a run keeps its checkpoints: an index, and per checkpoint its listing, patch and (built-in agent) conversation. */
export function checkpointPaths(store: RunStore, runId: string): { dir: string; index: string; result(n: number): string; patch(n: number): string; session(n: number): string } {
  const dir = path.join(store.paths(runId).artifacts, 'checkpoints');
  return {
    dir,
    index: path.join(dir, 'index.json'),
    result: (n) => path.join(dir, `${n}.result.json`),
    patch: (n) => path.join(dir, `${n}.patch`),
    session: (n) => path.join(dir, `${n}.session.json`),
  };
}

/** A run's checkpoint index (undefined: no checkpoint was ever looked for). */
function indexFile(store: RunStore, runId: string): StoredFile<CheckpointIndex | undefined> {
  return new StoredFile(checkpointPaths(store, runId).index, {
    parse: (file, text) => parseStoredJson(CheckpointIndex, file, text, "the run's checkpoints cannot be read; review and apply its result instead."),
    empty: () => undefined,
  });
}

function readIndex(store: RunStore, runId: string): Promise<CheckpointIndex | undefined> {
  return indexFile(store, runId).read();
}

/** A run's checkpoints, oldest first (none for a run that recorded none). */
export async function listCheckpoints(store: RunStore, runId: string): Promise<CheckpointList> {
  await store.get(runId); // NOT_FOUND for an unknown run
  const index = await readIndex(store, runId);
  if (!index) return { checkpoints: [] };
  return { checkpoints: index.checkpoints.map(({ resultCommit: _commit, ...c }) => c), ...(index.limited ? { limited: index.limited } : {}) };
}

async function entryOf(store: RunStore, runId: string, n: number): Promise<StoredCheckpoint> {
  const index = await readIndex(store, runId);
  const entry = index?.checkpoints.find((c) => c.n === n);
  if (!entry) {
    const count = index?.checkpoints.length ?? 0;
    throw new AirlockError('NOT_FOUND', `Run ${runId} has no checkpoint ${n}${count ? ` (it has ${count}: 1–${count})` : ' (it recorded none)'}; list them with 'airlock checkpoints ${runId}'.`);
  }
  return entry;
}

/**
 * One checkpoint's stored result, as apply and review take it: the listing and patch the host
 * derived when it was taken, and the run's object store (the final one is the run's result).
 */
export async function loadCheckpointResult(store: RunStore, runId: string, n: number, loadResult: () => Promise<LoadedResult>): Promise<LoadedResult> {
  const entry = await entryOf(store, runId, n);
  if (entry.final) return loadResult();
  const p = checkpointPaths(store, runId);
  const file = p.result(n);
  const result = parseStoredJson(StoredResultSchema, file, await readFile(file, 'utf8'), `checkpoint ${n} cannot be applied; apply the run's result or another checkpoint.`);
  const patch = await readFile(p.patch(n));
  if (result.patchSha256 !== entry.patchSha256 || result.resultCommit !== entry.resultCommit) throw new AirlockError('INVALID_INPUT', `Checkpoint ${n} of run ${runId} does not match its index (the run folder was changed); apply the run's result instead.`);
  return { result, patch, repo: HostRepo.open(store.git, path.join(store.paths(runId).artifacts, 'objects.git')) };
}

/** The agent's conversation kept with a checkpoint (built-in agent), for Continue from here. */
export async function loadCheckpointSession(store: RunStore, runId: string, n: number): Promise<CarriedSession | undefined> {
  const entry = await entryOf(store, runId, n);
  if (!entry.conversation) return undefined;
  return loadSession(checkpointPaths(store, runId).session(n));
}

/** Whether a run has checkpoint `n` and if it is the final one (its result). */
export async function checkpointEntry(store: RunStore, runId: string, n: number): Promise<{ final: boolean }> {
  return { final: (await entryOf(store, runId, n)).final === true };
}

/** Blob ids every recorded checkpoint needs (kept when the run's object store is compacted). */
export async function checkpointOids(store: RunStore, runId: string): Promise<string[]> {
  const index = await readIndex(store, runId).catch(debugLog.swallow('checkpoints.oids.index'));
  if (!index) return [];
  const p = checkpointPaths(store, runId);
  const out: string[] = [];
  for (const c of index.checkpoints) {
    if (c.final) continue;
    const text = await readFile(p.result(c.n), 'utf8').catch(() => undefined); // a result not written (the run stopped): that checkpoint keeps no blobs
    if (text === undefined) continue;
    // A damaged listing loses only that checkpoint (loading it says so), never the run's result.
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      continue;
    }
    const r = StoredResultSchema.safeParse(raw);
    if (r.success) for (const ch of r.data.changes) out.push(ch.oldOid, ch.newOid);
  }
  return out.filter((o) => o !== ZERO_OID);
}

/** What the checkpointer needs of the run. */
export interface CheckpointerOptions {
  store: RunStore;
  runId: string;
  shell: WorkspaceShell;
  /** The run's collect, as at the end of the run, into its own ref and under a byte cap. */
  collect(opts: { ref: string; maxResultBytes: number }): Promise<CollectedResult>;
  baseCommit: Promise<string> | string;
  /** The baseline carried a dependency tree (the cheap scan then looks inside node_modules too). */
  tracksDeps: boolean;
  audit: Pick<AuditLog, 'append'>;
  /** The built-in agent's transcript: kept with each checkpoint, token removed. */
  session?: { spec: AgentSessionFiles; id: string; token?: Buffer };
  maxCheckpoints?: number;
  maxBytes?: number;
  /** A checkpoint was recorded (the UI's timeline refetches). */
  onRecorded?(c: Checkpoint): void;
}

/**
 * Takes a run's checkpoints while its agent works. `turnEnded` is called by the model proxy for
 * every model request of the run (before it goes upstream) and settles once the workspace was
 * looked at; `finish` records the run's result as the last checkpoint. One look at a time.
 */
export class Checkpointer {
  private requests = 0;
  private changed = false;
  private chain: Promise<void> = Promise.resolve();
  private readonly entries: StoredCheckpoint[] = [];
  private bytes = 0;
  private limited: CheckpointIndex['limited'];
  private lastCommit: string | undefined;
  /** Time spent looking and collecting (for the audit's closing note). */
  private spentMs = 0;
  private looks = 0;

  constructor(private readonly opts: CheckpointerOptions) {}

  /** The live change feed reported paths: the next look collects without scanning first. */
  markChanged(): void {
    this.changed = true;
  }

  /** A model request of the run, before it goes upstream: the previous turn's tool calls are done. */
  turnEnded(): Promise<void> {
    const request = ++this.requests;
    const look = (this.chain = this.chain.then(() => this.look(request)).catch(debugLog.swallow('checkpoints.look')));
    // The agent waits for its checkpoint, but never for long: past the bound it goes on.
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => (timer = setTimeout(resolve, MAX_HOLD_MS)));
    return Promise.race([look, bound]).finally(() => clearTimeout(timer));
  }

  /** Records the run's result as its last checkpoint (after any look still running); returns the list. */
  async finish(final: CollectedResult): Promise<void> {
    await this.chain;
    const commit = final.result.resultCommit;
    const last = this.entries.at(-1);
    if (last && last.resultCommit === commit) last.final = true;
    else if (last || final.result.changes.length) this.entries.push({ ...summaryOf(this.entries.length + 1, final, undefined), resultCommit: commit, final: true });
    if (!this.entries.length) return;
    await this.writeIndex();
    await this.opts.audit.append('note', { message: `checkpoints: ${this.entries.length} (the last is the result); ${this.looks} looks at the workspace took ${Math.round(this.spentMs)} ms${this.limited ? `; later turns were not checkpointed (${this.limited.reason} bound)` : ''}` });
  }

  /** Waits for a look in progress (before the final collect). */
  settle(): Promise<void> {
    return this.chain;
  }

  private async look(request: number): Promise<void> {
    const started = performance.now();
    try {
      // The first request starts the first turn: only the marker is placed.
      // The change feed already said so: only the marker moves (no walk of the tree).
      const fed = this.changed;
      this.changed = false;
      const changed = (await this.scan(request === 1, fed)) || fed;
      if (request === 1 || !changed || this.limited) return;
      this.looks++;
      const max = this.opts.maxCheckpoints ?? MAX_CHECKPOINTS;
      const budget = (this.opts.maxBytes ?? MAX_CHECKPOINT_BYTES) - this.bytes;
      if (this.entries.length >= max) return await this.limit('count', request);
      if (budget <= 0) return await this.limit('bytes', request);
      const n = this.entries.length + 1;
      let collected: CollectedResult;
      try {
        collected = await this.opts.collect({ ref: `refs/airlock/checkpoints/${n}`, maxResultBytes: Math.min(MAX_COLLECT_BYTES, budget) });
      } catch (err) {
        // Cut like a result: a turn over the cap is not checkpointed, and later ones are not either.
        if (err instanceof LimitError && err.limit === 'result-bytes') return await this.limit('bytes', request);
        const info = toErrorInfo(err);
        await this.opts.audit.append('note', { message: `checkpoint after model request ${request} not taken: ${info.message}` });
        return;
      }
      const commit = collected.result.resultCommit;
      // Nothing new since the last checkpoint (or back at the baseline before the first): no checkpoint.
      if (commit === (this.lastCommit ?? (await this.opts.baseCommit))) return;
      if (this.bytes + collected.patch.length > (this.opts.maxBytes ?? MAX_CHECKPOINT_BYTES)) return await this.limit('bytes', request);
      await this.record(n, request, collected);
    } finally {
      this.spentMs += performance.now() - started;
    }
  }

  private async record(n: number, request: number, collected: CollectedResult): Promise<void> {
    const p = checkpointPaths(this.opts.store, this.opts.runId);
    await mkdir(p.dir, { recursive: true });
    await writeFile(p.patch(n), collected.patch);
    await writeFile(p.result(n), JSON.stringify(collected.result));
    const conversation = await this.keepSession(n);
    const entry: StoredCheckpoint = { ...summaryOf(n, collected, request), resultCommit: collected.result.resultCommit, ...(conversation ? { conversation } : {}) };
    this.entries.push(entry);
    this.bytes += collected.patch.length;
    this.lastCommit = entry.resultCommit;
    await this.writeIndex();
    await this.opts.audit.append('note', { message: `checkpoint ${n} after model request ${request}: ${entry.files} changed file(s), patch ${entry.patchSha256}` });
    const { resultCommit: _commit, ...shown } = entry;
    this.opts.onRecorded?.(shown);
  }

  /** The built-in agent's transcript as of this turn (hostile bytes, capped, token removed); a failure only loses the conversation. */
  private async keepSession(n: number): Promise<boolean> {
    const s = this.opts.session;
    if (!s) return false;
    try {
      const session = await captureSession(this.opts.shell, s.spec, s.id, s.token);
      if (!session) return false;
      await saveSession(checkpointPaths(this.opts.store, this.opts.runId).session(n), session);
      return true;
    } catch (err) {
      await this.opts.audit.append('note', { message: `checkpoint ${n}: the conversation was not kept (${toErrorInfo(err).message})` });
      return false;
    }
  }

  private async limit(reason: 'count' | 'bytes', request: number): Promise<void> {
    this.limited = { reason, atRequest: request };
    await this.writeIndex();
    await this.opts.audit.append('note', { message: `checkpoints stopped at model request ${request}: the ${reason} bound was reached; the result is still collected whole` });
  }

  private async writeIndex(): Promise<void> {
    const index: CheckpointIndex = { version: 1, checkpoints: this.entries, ...(this.limited ? { limited: this.limited } : {}) };
    // This recorder is the index's only writer: the whole index replaces the stored one.
    await indexFile(this.opts.store, this.opts.runId).update(() => index);
  }

  /**
   * The cheap scan: did anything in the workspace change since the last look? One walk that
   * stops at the first entry whose status changed after the marker (writes, new and deleted names
   * through their folder, chmod). A hint like every other: the marker lives in the sandbox, and a
   * scan the agent fools only leaves a turn without its own checkpoint — the result is whole anyway.
   */
  private async scan(first: boolean, markOnly = false): Promise<boolean> {
    try {
      return await scanWorkspace(this.opts.shell, first || markOnly ? 'mark' : 'scan', this.opts.tracksDeps);
    } catch {
      return !first;
    }
  }
}

/**
 * `mark`: (re)writes the checkpoint marker and resolves false; `scan`: whether anything in the
 * workspace changed status since the marker, then moves the marker. As the helper: the marker lives in
 * /airlock, which the agent can neither write nor move; the walk is Airlock's Node, no shell or `find`
 * of the image (docs/architecture.md §2.3). The next marker is placed before the walk, so a write
 * during it is seen next time. Rejects when the sandbox cannot be asked.
 */
export async function scanWorkspace(shell: WorkspaceShell, mode: 'mark' | 'scan', tracksDeps: boolean): Promise<boolean> {
  const layout = SANDBOX_LAYOUT;
  const res = await shell.run({ argv: nodeArgv(layout, SCAN_JS, [layout.workDir, layout.stateDir, mode, tracksDeps ? '' : '1']), env: { ...layout.env, ...layout.helper?.env }, maxOutputBytes: 1024, timeoutMs: 60_000, as: 'helper' });
  if (mode === 'mark') return false;
  return res.exitCode !== 0 || res.stdout.toString('utf8').includes('changed');
}

function summaryOf(n: number, c: CollectedResult, request: number | undefined): Checkpoint {
  const r: StoredResult = c.result;
  return {
    n,
    at: new Date().toISOString(),
    ...(request ? { request } : {}),
    files: r.changes.length,
    additions: r.changes.reduce((a, x) => a + x.additions, 0),
    deletions: r.changes.reduce((a, x) => a + x.deletions, 0),
    patchSha256: r.patchSha256,
    patchBytes: c.patch.length,
  };
}
