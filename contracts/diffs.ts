import { z } from 'zod';
import { RunId } from './ids';

/**
 * A run's changes: the changed-file list (pushed as invalidations, refetched), per-file diffs,
 * apply-back to the project and patch export.
 */

export const FileChangeStatus = z.enum(['added', 'modified', 'deleted', 'renamed', 'type-changed']);
export type FileChangeStatus = z.infer<typeof FileChangeStatus>;

export const ChangedFile = z.object({
  path: z.string(),
  /** Previous path of a rename. */
  oldPath: z.string().optional(),
  status: FileChangeStatus,
  binary: z.boolean(),
  additions: z.number().int().nonnegative(),
  deletions: z.number().int().nonnegative(),
  /** Mode change such as `100644 → 100755`. */
  modeChange: z.string().optional(),
  /**
   * Why this change can alter what runs on the user's machine later (CI workflow, git hook,
   * lifecycle script, IDE task, agent/MCP config, shell rc, Makefile…). Risky files are shown first
   * and are not pre-selected for apply.
   */
  risky: z.string().optional(),
});
export type ChangedFile = z.infer<typeof ChangedFile>;

export const FileDiff = z.object({
  path: z.string(),
  oldPath: z.string().optional(),
  status: FileChangeStatus,
  binary: z.boolean(),
  /** True when the diff was not produced because the file is too large to show. */
  tooLarge: z.boolean(),
  /** Unified diff (git format, with hunk headers); empty for binaries and too-large files. */
  diff: z.string(),
  /** Sizes in bytes before and after, when known. */
  oldSize: z.number().int().nonnegative().optional(),
  newSize: z.number().int().nonnegative().optional(),
});
export type FileDiff = z.infer<typeof FileDiff>;

/**
 * Which change of a run: `turn`, its own (against the result it started from), or `thread`, the
 * whole thread's up to this run (against the project as the thread's first run read it). The same
 * for a run that continues nothing. Absent means `turn`.
 */
export const ChangeScope = z.enum(['turn', 'thread']);
export type ChangeScope = z.infer<typeof ChangeScope>;

export const ApplyMode = z.enum(['working-tree', 'branch']);
export type ApplyMode = z.infer<typeof ApplyMode>;

export const ApplyInput = z
  .strictObject({
    runId: RunId,
    scope: ChangeScope.optional(),
    /** Paths to apply; all changed files when omitted. */
    files: z.array(z.string().min(1)).optional(),
    mode: ApplyMode.default('working-tree'),
    /** New branch name for mode `branch`. */
    branch: z.string().trim().min(1).max(200).optional(),
    /** Commit message for mode `branch` (default: the run's task); a subject over 72 characters continues in the body. */
    message: z.string().max(20_000).optional(),
    /** Apply into another directory than the run's project (CLI `--to`). */
    targetDir: z.string().min(1).optional(),
    /**
     * SHA-256 (hex) of the patch the user reviewed: `diffs:list`'s `patchSha256` (the whole result)
     * or that of the selected files' part. Apply refuses anything else.
     */
    reviewedSha256: z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex'),
  })
  .superRefine((v, ctx) => {
    if (v.mode === 'branch' && !v.branch) ctx.addIssue({ code: 'custom', path: ['branch'], message: 'name the new branch' });
  });
export type ApplyInput = z.input<typeof ApplyInput>;

export const Conflict = z.object({ path: z.string(), reason: z.string() });
export type Conflict = z.infer<typeof Conflict>;

export const ApplyResult = z.object({
  applied: z.array(z.string()),
  /** Files left untouched because the project changed under them; nothing was overwritten. */
  conflicts: z.array(Conflict),
  branch: z.string().optional(),
  commit: z.string().optional(),
  /** Author of the branch commit, `Name <email>`. */
  author: z.string().optional(),
  /** True when git has no user.name/user.email for the project, so Airlock authored the commit. */
  authorFallback: z.boolean().optional(),
  /** SHA-256 of the part of the result patch that was selected (as recorded in the apply log). */
  patchSha256: z.string().optional(),
});
export type ApplyResult = z.infer<typeof ApplyResult>;

export const diffsContracts = {
  'diffs:list': {
    input: z.strictObject({ runId: RunId, scope: ChangeScope.optional() }),
    /** `patchSha256`: the collected result's patch digest (absent while the run is live); pass it to `diffs:apply`. */
    output: z.object({ files: z.array(ChangedFile), patchSha256: z.string().optional() }),
  },
  'diffs:file': {
    input: z.strictObject({ runId: RunId, scope: ChangeScope.optional(), path: z.string().min(1), context: z.number().int().min(0).max(1000).default(3) }),
    output: FileDiff,
  },
  'diffs:apply': { input: ApplyInput, output: ApplyResult },
  /** Writes a patch file on the host and returns where; `text` is included when small enough to download. */
  'diffs:exportPatch': {
    input: z.strictObject({ runId: RunId, scope: ChangeScope.optional(), files: z.array(z.string().min(1)).optional(), destPath: z.string().min(1).optional() }),
    output: z.object({ path: z.string(), bytes: z.number().int().nonnegative(), sha256: z.string().optional(), text: z.string().optional() }),
  },
} as const;

export const diffsEvents = {
  /** The changed files of a run changed: refetch `diffs:list` (and an open `diffs:file`). */
  'diffs:onDidChange': z.object({ runId: RunId }),
} as const;
