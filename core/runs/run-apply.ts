import type { FileChange } from '../workspace/changes';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { defaultCommitMessage, type ApplyResult, type ChangeScope } from '../../contracts/diffs';
import { AirlockError } from '../../contracts/errors';
import { openApplyLog } from '../audit/apply-log';
import { applyResult } from '../workspace/apply';
import { sectionsOf, type ResultChange, type StoredResult } from '../workspace/collect';
import { ZERO_OID } from '../workspace/git-objects';
import { HostRepo } from '../workspace/host-repo';
import { mergeViewOf, writeResolution, type MergeViewData } from '../workspace/merge-view';
import { selectionPatch, type FileSelection, type SelectionPatch } from '../workspace/partial';
import { classifyRiskyPaths } from '../workspace/risky-paths';
import { checkStoredValue, parseStoredJson } from '../common/stored-json';
import { parseLogLines, StoredApplyData, StoredAuditRecord } from '../audit/audit-record-schema';
import { LegacyChanges } from './legacy-changes-schema';
import { StoredResultSchema } from '../workspace/stored-result';
import { checkpointOids, loadCheckpointResult } from './checkpoints';
import type { RunStore } from './run-store';
import type { StoredRun } from './run-record';
import { sha256Hex } from '../common/sha256';

/** Where a run's host-derived result lives: patch, listing and object store; `thread*` for a follow-up turn's total. */
export function resultPaths(store: RunStore, runId: string): { patch: string; result: string; objects: string; threadPatch: string; threadResult: string } {
  const p = store.paths(runId);
  return {
    patch: p.patch,
    result: path.join(p.artifacts, 'result.json'),
    objects: path.join(p.artifacts, 'objects.git'),
    threadPatch: path.join(p.artifacts, 'thread.patch'),
    threadResult: path.join(p.artifacts, 'thread-result.json'),
  };
}

/**
 * Saves a collected result beside the run: patch and listing (the object store is already there),
 * and for a follow-up turn the thread's total as well (docs/architecture.md §15).
 */
export async function storeRunResult(store: RunStore, runId: string, collected: { result: StoredResult; patch: Buffer }, thread?: { result: StoredResult; patch: Buffer }): Promise<void> {
  const rp = resultPaths(store, runId);
  await mkdir(path.dirname(rp.result), { recursive: true });
  await writeFile(rp.patch, collected.patch);
  await writeFile(rp.result, JSON.stringify(collected.result));
  if (thread) {
    await writeFile(rp.threadPatch, thread.patch);
    await writeFile(rp.threadResult, JSON.stringify(thread.result));
  }
  // Apply reads only these blobs (and the next turn its overlay and thread base); the rest of the baseline copy goes.
  const keep = [...collected.result.changes, ...(thread?.result.changes ?? [])].flatMap((c) => [c.oldOid, c.newOid]).filter((o) => o !== ZERO_OID);
  // And what the run's checkpoints need, to be applied on their own (docs/architecture.md §19).
  keep.push(...(await checkpointOids(store, runId)));
  await HostRepo.open(store.git, rp.objects).keepOnly(keep);
}

/** A finished run's collected result (host-derived), its patch and its object store. */
export interface LoadedResult {
  result: StoredResult;
  patch: Buffer;
  repo: HostRepo;
}

/**
 * Reads a run's collected result; NOT_FOUND when there is none, INVALID_INPUT for an older format.
 * `thread`: the thread's total up to this run; a run that continues nothing has its own result as total.
 */
export async function loadRunResult(store: RunStore, runId: string, scope: ChangeScope = 'turn', checkpoint?: number): Promise<LoadedResult> {
  if (checkpoint !== undefined) {
    // A checkpoint is this run's own change up to a turn (docs/architecture.md §19).
    if (scope === 'thread') throw new AirlockError('INVALID_INPUT', "A checkpoint is this turn's own change; review it without the thread scope (drop --thread).", { field: 'scope' });
    return loadCheckpointResult(store, runId, checkpoint, () => loadRunResult(store, runId, 'turn'));
  }
  const rp = resultPaths(store, runId);
  // Whether this run is a follow-up is the host's own record (run.json), never a guess from which files are there:
  // a follow-up's total is its thread-result, and a missing one is an error, not its own change passed off as the total.
  if (scope === 'thread' && (await store.get(runId)).thread) {
    let total: { result: StoredResult; patch: Buffer };
    try {
      total = await readResult(runId, rp.threadResult, rp.threadPatch);
    } catch (err) {
      if (isDamaged(err)) throw err;
      throw new AirlockError('NOT_FOUND', `Run ${runId} is a follow-up turn but its thread total (artifacts/thread-result.json) is missing or unreadable; review this turn's own change instead, or continue from the first turn again.`);
    }
    return { ...total, repo: HostRepo.open(store.git, rp.objects) };
  }
  let loaded: { result: StoredResult; patch: Buffer };
  try {
    loaded = await readResult(runId, rp.result, rp.patch);
  } catch (err) {
    if (isDamaged(err)) throw err;
    const legacy = await readFile(path.join(store.paths(runId).artifacts, 'baseline.json')).then(() => true, () => false);
    if (legacy) throw new AirlockError('INVALID_INPUT', `Run ${runId} was collected by an older Airlock whose result was not derived on the host; export its patch ('airlock patch ${runId} --out FILE'), read it, and apply it with git.`);
    throw new AirlockError('NOT_FOUND', `Run ${runId} has no collected result.`);
  }
  return { ...loaded, repo: HostRepo.open(store.git, rp.objects) };
}

/** A result file that is there but damaged (`parseStoredJson`): said as it is, not as "no result". */
function isDamaged(err: unknown): boolean {
  return err instanceof AirlockError && err.kind === 'INVALID_INPUT';
}

/** A result and its patch; a damaged result file is INVALID_INPUT naming the file and field. */
async function readResult(runId: string, resultFile: string, patchFile: string): Promise<{ result: StoredResult; patch: Buffer }> {
  const text = await readFile(resultFile, 'utf8');
  const version = (() => {
    try {
      return (JSON.parse(text) as { version?: unknown } | null)?.version;
    } catch {
      return undefined;
    }
  })();
  if (typeof version === 'number' && version !== 2) throw new AirlockError('INVALID_INPUT', `Run ${runId}'s result has an unknown format; export its patch instead.`);
  const result = parseStoredJson(StoredResultSchema, resultFile, text, `nothing can be applied from it; export the run's patch ('airlock patch ${runId} --out FILE') and apply it with git.`);
  return { result, patch: await readFile(patchFile) };
}

/**
 * A run collected by an Airlock from before results were derived on the host: its patch and
 * file list can be read and exported whole, never applied.
 */
export async function loadLegacyResult(store: RunStore, runId: string): Promise<{ patch: Buffer; files: FileChange[] } | undefined> {
  const p = store.paths(runId);
  const marker = await readFile(path.join(p.artifacts, 'baseline.json')).catch(() => undefined); // no marker: not a legacy result
  if (marker === undefined) return undefined;
  const file = path.join(p.artifacts, 'changes.json');
  const text = await readFile(file, 'utf8').catch(() => undefined); // a part missing: not a readable legacy result
  const patch = await readFile(p.patch).catch(() => undefined); // (as above)
  if (text === undefined || patch === undefined) return undefined;
  // Written by that Airlock's collect in the shape of its day; only the listing is checked, as it is shown for reading only.
  const files = parseStoredJson(LegacyChanges, file, text, `the run's list of changes cannot be shown; its whole patch is ${p.patch}, for git apply.`);
  // As before: the screens show what of `FileChange` it has (its day wrote a subset of today's fields).
  return { patch, files: files as unknown as FileChange[] };
}

/** One file's diff text in a stored result (by new or old path). */
export function diffOf(loaded: Pick<LoadedResult, 'result' | 'patch'>, file: string): string | undefined {
  const c = loaded.result.changes.find((x) => x.path === file) ?? loaded.result.changes.find((x) => x.oldPath === file);
  return c ? sectionsOf(loaded.patch, [c]).toString('utf8') : undefined;
}

/** What to take of a result: whole files (all when omitted) and hunks/lines of some of them. */
export interface Selection {
  /** A follow-up turn's own change (default) or the thread's total up to it (docs/architecture.md §15). */
  scope?: ChangeScope;
  /** One of the run's checkpoints instead of its result (docs/architecture.md §19). */
  checkpoint?: number;
  files?: string[];
  selection?: FileSelection[];
}

/** The host-rendered patch of a selection of a stored result (the whole patch without one). */
export function patchOfSelection(loaded: LoadedResult, sel: Selection): Promise<SelectionPatch> {
  return selectionPatch(loaded.repo, loaded.result, loaded.patch, sel.files, sel.selection);
}

/** The selection as the apply log records it (only partly taken files). */
function loggedSelection(sel: Selection): { selection?: FileSelection[]; scope?: 'thread'; checkpoint?: number } {
  return {
    ...(sel.scope === 'thread' ? { scope: 'thread' as const } : {}),
    ...(sel.checkpoint !== undefined ? { checkpoint: sel.checkpoint } : {}),
    ...(sel.selection?.length ? { selection: sel.selection.map((s) => ({ path: s.path, ...(s.hunks ? { hunks: s.hunks } : {}), ...(s.lines ? { lines: s.lines } : {}) })) } : {}),
  };
}

/**
 * Review flags for changed files: the path classifier (looking inside package.json and kin when
 * the diff is at hand), modes, plus what the host found at collect (name clashes, symlinks leaving
 * the project).
 */
export function classifyRisky(changes: Array<Omit<ResultChange, 'section'> & { section?: ResultChange['section'] }>, patch?: Buffer): Array<{ path: string; reason: string }> {
  const diffText = (c: (typeof changes)[number]) => (patch && c.section ? patch.subarray(c.section.offset, c.section.offset + c.section.length).toString('utf8') : undefined);
  const flags = classifyRiskyPaths(
    changes.map((c) => {
      const diff = diffText(c);
      return {
        path: c.path,
        ...(c.oldPath ? { oldPath: c.oldPath } : {}),
        ...(diff !== undefined ? { diff } : {}),
        ...(c.oldMode ? { oldMode: c.oldMode } : {}),
        ...(c.newMode ? { newMode: c.newMode } : {}),
      };
    }),
  );
  for (const c of changes) for (const w of c.warnings ?? []) flags.push({ path: c.path, reason: w });
  // One line per file: several reasons are joined.
  const byPath = new Map<string, string[]>();
  for (const f of flags) byPath.set(f.path, [...(byPath.get(f.path) ?? []), f.reason]);
  return [...byPath].map(([path, reasons]) => ({ path, reason: reasons.join('; ') }));
}

/**
 * Applies a finished run's result to its project (or `targetDir`): working tree or a new branch,
 * three-way where the project moved on, refusing (never overwriting) files that conflict. Each
 * apply is recorded in the run's apply log (chained on from the sealed audit log); a run whose
 * audit log is not intact and sealed is refused before anything is written (CONFLICT).
 */
export async function applyRunResult(opts: Selection & {
  store: RunStore;
  run: StoredRun;
  mode: 'working-tree' | 'branch';
  branch?: string;
  /** Commit message in branch mode; defaults to the agent's summary with the task in the body. */
  message?: string;
  targetDir?: string;
  /** SHA-256 of the patch the user reviewed (whole result or selection). */
  reviewedSha256: string;
  /** Who said yes when an MCP client asked (recorded in the apply log). */
  approval?: { via: 'mcp'; client: string; by: 'user' | 'server-flag'; requestId?: string };
  /** Write the files that do not conflict even when some do (default: whole or nothing). */
  skipConflicts?: boolean;
}): Promise<ApplyResult> {
  const paths = opts.store.paths(opts.run.id);
  const loaded = await loadRunResult(opts.store, opts.run.id, opts.scope, opts.checkpoint).catch((err: unknown) => {
    if (err instanceof AirlockError && err.kind === 'NOT_FOUND') throw new AirlockError('NOT_FOUND', `Run ${opts.run.id} has no collected result to apply (status ${opts.run.status}).`);
    throw err;
  });
  // Opened before the project is touched: no apply without a record to put it in.
  const log = await openApplyLog(paths.audit, paths.applyLog);
  try {
    const projectDir = opts.targetDir ? path.resolve(opts.targetDir) : opts.run.projectDir;
    const result = await applyResult({
      projectDir,
      repo: loaded.repo,
      result: loaded.result,
      patch: loaded.patch,
      reviewedSha256: opts.reviewedSha256,
      mode: opts.mode,
      ...(opts.files ? { files: opts.files } : {}),
      ...(opts.selection?.length ? { selection: opts.selection } : {}),
      ...(opts.branch ? { branch: opts.branch } : {}),
      message: opts.message?.trim() ? opts.message : defaultCommitMessage(opts.run.task, opts.run.summary),
      ...(opts.skipConflicts ? { skipConflicts: true } : {}),
      resolved: await resolutionsOf(paths.applyLog, projectDir, opts.scope ?? 'turn'),
    });
    await log.append('apply', {
      mode: opts.mode,
      target: projectDir,
      ...(result.branch ? { branch: result.branch } : {}),
      ...(result.commit ? { commit: result.commit } : {}),
      applied: result.applied,
      refused: result.conflicts.map((c) => ({ path: c.path, reason: c.reason })),
      ...(result.held.length ? { held: result.held } : {}),
      ...(result.unchanged.length ? { unchanged: result.unchanged } : {}),
      patchSha256: result.patchSha256,
      ...loggedSelection(opts),
      ...(opts.approval ? { approval: opts.approval } : {}),
    });
    // The record says where the result went only when something went there.
    await opts.store.update(opts.run.id, {
      ...(result.applied.length ? { applied: { at: new Date().toISOString(), target: opts.targetDir ?? opts.run.projectDir, ...(result.branch ? { branch: result.branch } : {}), files: result.applied } } : {}),
      applyLog: { count: log.count, head: log.head },
    });
    return result;
  } finally {
    await log.close();
  }
}

/**
 * What the user saved in merge views for this target and scope (path → SHA-256 written), from the
 * run's own apply log: a file still holding its resolution is not a conflict on the next apply.
 */
async function resolutionsOf(applyLog: string, target: string, scope: ChangeScope): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const text = await readFile(applyLog, 'utf8').catch(() => '');
  // The caller opened the apply log first, which verified its chain (a torn last line was cut off then).
  const fix = "nothing was applied; check the run with 'airlock audit verify'.";
  parseLogLines(StoredAuditRecord, applyLog, text, fix).forEach((r, i) => {
    if (r.type !== 'apply') return;
    const d = checkStoredValue(StoredApplyData, applyLog, r.data, fix, `line ${i + 1}, data`);
    if (d.mode === 'resolve' && d.target === target && (d.scope ?? 'turn') === scope && d.resolved) out.set(d.resolved.path, d.resolved.writtenSha256);
  });
  return out;
}

/**
 * Hands a run's patch (or a selection of it) to the user — written to `dest`, or given back for a
 * download or the clipboard (`dest` names where it went) — and records that in the run's apply
 * log. Refused like `applyRunResult`, before writing, when the audit log is not sealed.
 */
export async function writeRecordedPatch(opts: Selection & { store: RunStore; runId: string; dest: string; write?: boolean }): Promise<{ patch: Buffer; bytes: number; sha256: string }> {
  const partOf = opts.files || opts.selection?.length || opts.checkpoint !== undefined;
  const legacy = partOf || opts.scope === 'thread' ? undefined : await loadLegacyResult(opts.store, opts.runId);
  let patch: Buffer;
  let applied: string[];
  if (legacy) {
    [patch, applied] = [legacy.patch, legacy.files.map((c) => c.path)];
  } else {
    const sel = await patchOfSelection(await loadRunResult(opts.store, opts.runId, opts.scope, opts.checkpoint), opts);
    [patch, applied] = [sel.patch, sel.changes.map((c) => c.path)];
  }
  const paths = opts.store.paths(opts.runId);
  const log = await openApplyLog(paths.audit, paths.applyLog);
  try {
    if (opts.write !== false) {
      await mkdir(path.dirname(opts.dest), { recursive: true });
      await writeFile(opts.dest, patch);
    }
    await log.append('apply', { mode: 'patch', target: opts.dest, applied, refused: [], patchSha256: sha256Hex(patch), ...loggedSelection(opts) });
    await opts.store.update(opts.runId, { applyLog: { count: log.count, head: log.head } });
    return { patch, bytes: patch.length, sha256: sha256Hex(patch) };
  } finally {
    await log.close();
  }
}

/** A merge view as the host serves it: which change it merges (`scope`) and its three versions. */
export type RunMergeView = MergeViewData & { scope: ChangeScope };

/**
 * The merge view of a file apply refused, against the run's project (or `targetDir`). With scope
 * `thread` (a follow-up turn, docs/architecture.md §15) base and result are the thread's: the file
 * as the thread's first turn read it and the thread's total, both from this run's host object store.
 */
export async function mergeViewOfRun(opts: { store: RunStore; run: StoredRun; path: string; scope?: ChangeScope; targetDir?: string }): Promise<RunMergeView> {
  const scope = opts.scope ?? 'turn';
  const loaded = await loadRunResult(opts.store, opts.run.id, scope);
  return { ...(await mergeViewOf({ projectDir: opts.targetDir ? path.resolve(opts.targetDir) : opts.run.projectDir, repo: loaded.repo, result: loaded.result, path: opts.path })), scope };
}

/**
 * Writes the user's resolution of a conflicted file (only while the project's file is still the
 * one the merge view showed, and — when `theirsSha256` is given — the run's side is still the
 * one it showed, i.e. the same scope) and records it in the apply log with its scope.
 */
export async function resolveRunConflict(opts: { store: RunStore; run: StoredRun; path: string; content: string; oursSha256: string; theirsSha256?: string; scope?: ChangeScope; targetDir?: string }): Promise<{ path: string; sha256: string }> {
  const scope = opts.scope ?? 'turn';
  const loaded = await loadRunResult(opts.store, opts.run.id, scope);
  const paths = opts.store.paths(opts.run.id);
  const log = await openApplyLog(paths.audit, paths.applyLog);
  try {
    const projectDir = opts.targetDir ? path.resolve(opts.targetDir) : opts.run.projectDir;
    const done = await writeResolution({ projectDir, repo: loaded.repo, result: loaded.result, path: opts.path, content: opts.content, oursSha256: opts.oursSha256, ...(opts.theirsSha256 ? { theirsSha256: opts.theirsSha256 } : {}) });
    await log.append('apply', {
      mode: 'resolve',
      // Always named for a resolution: which base and result the user merged against.
      scope,
      target: projectDir,
      applied: [opts.path],
      refused: [],
      // The resolution is the user's text, not a part of the result patch: its own digest.
      patchSha256: done.writtenSha256,
      resolved: { path: opts.path, ...done },
    });
    await opts.store.update(opts.run.id, { applyLog: { count: log.count, head: log.head } });
    return { path: opts.path, sha256: done.writtenSha256 };
  } finally {
    await log.close();
  }
}
