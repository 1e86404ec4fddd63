import { mkdtemp, realpath, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { sha256Hex } from '../common/sha256';
import { applyToBranch } from './apply-branch';
import { entriesOf } from './apply-plan';
import { applyToWorkingTree } from './apply-working-tree';
import type { HostRepo } from './host-repo';
import { selectionPatch, type FileSelection } from './partial';
import { unsafePathReason } from './result-paths';
import type { StoredResult } from './collect';

export interface ApplyOptions {
  projectDir: string;
  /** The run's host object store (base and result blobs). */
  repo: HostRepo;
  /** The result as collected (host-derived). */
  result: StoredResult;
  /** The stored result patch (`result.patchSha256` is checked against it). */
  patch: Buffer;
  /** Apply only these paths (new or old name of a rename); default all. */
  files?: string[];
  /** Hunks and lines of some of those files (text files only); the rest of each stays as in the project. */
  selection?: FileSelection[];
  /**
   * SHA-256 of the patch the user reviewed: the selection's (`selectionPatch`), or the whole
   * result's when whole files are applied. Anything else is refused before the project is touched.
   */
  reviewedSha256: string;
  /** `working-tree`: write files into the project. `branch`: new branch + commit, working tree untouched. */
  mode: 'working-tree' | 'branch';
  /** Branch name for `branch` mode (default `airlock/result-<timestamp>`). */
  branch?: string;
  /** Commit message for `branch` mode (e.g. the run's task); a first line over 72 characters is wrapped into the body. */
  message?: string;
  /**
   * Write the files that merge cleanly even when others conflict. Off (the default), a change set
   * is applied whole or not at all, like a git client: one conflicting file and nothing is written.
   */
  skipConflicts?: boolean;
  /**
   * Files the user resolved in a merge view (path → SHA-256 of what was saved, from the apply log):
   * a project file still holding that resolution counts as applied, not as a conflict.
   */
  resolved?: ReadonlyMap<string, string>;
}

export interface ApplyConflict {
  path: string;
  reason: string;
}

export interface ApplyOutcome {
  /** Paths written (or, in branch mode, committed); a rename is listed by its new name. */
  applied: string[];
  /** Paths left untouched because the project changed them too; nothing of the user's was overwritten. */
  conflicts: ApplyConflict[];
  /** Files that would apply cleanly but were not written because others conflict (whole-or-nothing). */
  held: string[];
  /** Files the project already has as the result (applied before, or resolved by the user): nothing to write. */
  unchanged: string[];
  branch?: string;
  commit?: string;
  /** Author of the branch commit (`Name <email>`). */
  author?: string;
  /** True when git has no user identity for the project, so the commit is authored by Airlock. */
  authorFallback?: boolean;
  /** SHA-256 of the part of the result patch that was selected (what the apply log records). */
  patchSha256: string;
}

/**
 * Applies a run's result to the project, all or selected files, from the run's host object store
 * (never from a scratch tree or sandbox text). Refused before anything is written: a digest that
 * is not the reviewed patch's, a name outside the result. Each file is merged three-way
 * (baseline → run result, baseline → the project now): clean merges are written, files the user
 * changed in an overlapping way are refused and listed — a user's edit is never overwritten.
 * Names that fold together (letter case, Unicode form) with each other or with the project are
 * refused, and every folder written into is checked to resolve inside the project. `branch` mode
 * commits onto a new branch through a temporary index and never touches the working tree, the
 * index or the current branch.
 */
export async function applyResult(opts: ApplyOptions): Promise<ApplyOutcome> {
  const projectDir = await realpath(path.resolve(opts.projectDir)).catch(() => {
    throw new AirlockError('NOT_FOUND', `Project folder ${opts.projectDir} does not exist; choose the folder the run was made from (or apply to another folder).`);
  });
  if (opts.mode !== 'working-tree' && opts.mode !== 'branch') throw new AirlockError('INVALID_INPUT', `Unknown apply mode '${String(opts.mode)}'; use 'working-tree' or 'branch'.`);
  if (sha256Hex(opts.patch) !== opts.result.patchSha256) {
    throw new AirlockError('INTERNAL', "The run's stored patch no longer matches its collected result; the run folder was altered. Nothing was applied.");
  }
  const picked = await selectionPatch(opts.repo, opts.result, opts.patch, opts.files, opts.selection);
  const selected = picked.changes;
  const patchSha256 = picked.sha256;
  const wholeFiles = !opts.selection?.length;
  if (opts.reviewedSha256 !== patchSha256 && !(wholeFiles && opts.reviewedSha256 === opts.result.patchSha256)) {
    throw new AirlockError('CONFLICT', `This is not the ${wholeFiles ? 'result' : 'selection'} that was reviewed (reviewed ${opts.reviewedSha256.slice(0, 12)}…, ${wholeFiles ? 'result' : 'selection'} ${(wholeFiles ? opts.result.patchSha256 : patchSha256).slice(0, 12)}…); review it again, then apply. Nothing was applied.`);
  }
  for (const c of selected) {
    for (const p of [c.path, c.oldPath]) {
      const why = p === undefined ? undefined : unsafePathReason(p);
      if (why) throw new AirlockError('INVALID_INPUT', `The result names an unsafe path (${p}: ${why}); nothing was applied.`);
    }
  }
  const entries = await entriesOf(opts.repo, selected, picked.partial);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'airlock-apply-'));
  try {
    const outcome = opts.mode === 'branch' ? await applyToBranch(projectDir, entries, opts, scratch) : await applyToWorkingTree(projectDir, entries, opts, scratch);
    return { ...outcome, patchSha256 };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}
