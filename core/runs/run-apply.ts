import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ApplyResult } from '../../contracts/diffs';
import { AirlockError } from '../../contracts/errors';
import { openApplyLog } from '../audit/apply-log';
import { sha256Hex } from '../audit/audit-log';
import type { ApplyBaseline, FileChange } from '../workspace/changes';
import { applyResult } from '../workspace/apply';
import { classifyRiskyPaths } from '../workspace/risky-paths';
import { selectSections, splitPatch } from '../workspace/patch-sections';
import type { RunStore } from './run-store';
import type { StoredRun } from './run-record';

/** Per-file diff text of a stored patch, by path (either side of a rename). */
export function patchByFile(patch: Buffer): Map<string, string> {
  const byFile = new Map<string, string>();
  for (const s of splitPatch(patch)) {
    const text = s.text.toString('utf8');
    if (s.newPath) byFile.set(s.newPath, text);
    if (s.oldPath && !byFile.has(s.oldPath)) byFile.set(s.oldPath, text);
  }
  return byFile;
}

/** The part of a patch that touches `files` (all of it without a selection). */
export function patchForFiles(patch: Buffer, files?: string[]): Buffer {
  if (!files) return patch;
  return Buffer.concat(selectSections(splitPatch(patch), files).map((s) => s.text));
}

/** Review flags for changed files; the patch lets the classifier look inside package.json and kin. */
export function classifyRisky(changes: FileChange[], patch?: Buffer): Array<{ path: string; reason: string }> {
  const diffs = patch ? patchByFile(patch) : new Map<string, string>();
  const flags = classifyRiskyPaths(
    changes.map((c) => ({
      path: c.path,
      ...(c.oldPath ? { oldPath: c.oldPath } : {}),
      ...(diffs.has(c.path) ? { diff: diffs.get(c.path) } : {}),
      ...(c.oldMode ? { oldMode: c.oldMode } : {}),
      ...(c.newMode ? { newMode: c.newMode } : {}),
    })),
  );
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
export async function applyRunResult(opts: {
  store: RunStore;
  run: StoredRun;
  files?: string[];
  mode: 'working-tree' | 'branch';
  branch?: string;
  targetDir?: string;
}): Promise<ApplyResult> {
  const paths = opts.store.paths(opts.run.id);
  let patch: Buffer;
  let baseline: ApplyBaseline;
  try {
    patch = await readFile(paths.patch);
    baseline = JSON.parse(await readFile(path.join(paths.artifacts, 'baseline.json'), 'utf8')) as ApplyBaseline;
  } catch {
    throw new AirlockError('NOT_FOUND', `Run ${opts.run.id} has no collected result to apply (status ${opts.run.status}).`);
  }
  // Opened before the project is touched: no apply without a record to put it in.
  const log = await openApplyLog(paths.audit, paths.applyLog);
  try {
    const projectDir = opts.targetDir ? path.resolve(opts.targetDir) : opts.run.projectDir;
    const result = await applyResult({
      projectDir,
      patch,
      baseline,
      mode: opts.mode,
      ...(opts.files ? { files: opts.files } : {}),
      ...(opts.branch ? { branch: opts.branch } : {}),
    });
    await log.append('apply', {
      mode: opts.mode,
      target: projectDir,
      ...(result.branch ? { branch: result.branch } : {}),
      ...(result.commit ? { commit: result.commit } : {}),
      applied: result.applied,
      refused: result.conflicts.map((c) => ({ path: c.path, reason: c.reason })),
      patchSha256: sha256Hex(patchForFiles(patch, opts.files)),
    });
    await opts.store.update(opts.run.id, {
      applied: { at: new Date().toISOString(), target: opts.targetDir ?? opts.run.projectDir, ...(result.branch ? { branch: result.branch } : {}), files: result.applied },
      applyLog: { count: log.count, head: log.head },
    });
    return result;
  } finally {
    await log.close();
  }
}

/**
 * Writes a run's patch (or a selection of it) to `dest`, for the user to apply themselves, and
 * records that in the run's apply log. Refused like `applyRunResult`, before writing, when the
 * audit log is not sealed.
 */
export async function writeRecordedPatch(opts: { store: RunStore; runId: string; dest: string; patch: Buffer }): Promise<void> {
  const paths = opts.store.paths(opts.runId);
  const log = await openApplyLog(paths.audit, paths.applyLog);
  try {
    await mkdir(path.dirname(opts.dest), { recursive: true });
    await writeFile(opts.dest, opts.patch);
    const files = splitPatch(opts.patch).map((s) => s.newPath ?? s.oldPath).filter((p): p is string => p !== undefined);
    await log.append('apply', { mode: 'patch', target: opts.dest, applied: files, refused: [], patchSha256: sha256Hex(opts.patch) });
    await opts.store.update(opts.runId, { applyLog: { count: log.count, head: log.head } });
  } finally {
    await log.close();
  }
}
