import { z } from 'zod';
import { RunId } from './ids';
import { CheckpointList, CheckpointNumber } from './checkpoints';

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
  /**
   * Why this file's hunks and lines cannot be picked one by one (binary, rename, deletion, symlink,
   * too large, run still live); absent when they can.
   */
  wholeFileOnly: z.string().optional(),
});
export type FileDiff = z.infer<typeof FileDiff>;

/**
 * Which change of a run: `turn`, its own (against the result it started from), or `thread`, the
 * whole thread's up to this run (against the project as the thread's first run read it). The same
 * for a run that continues nothing. Absent means `turn`.
 */
export const ChangeScope = z.enum(['turn', 'thread']);
export type ChangeScope = z.infer<typeof ChangeScope>;

/**
 * Part of one changed text file to apply: hunks (0-based, in the order of its diff) and/or changed
 * lines, `-<old line no>` for a removed line and `+<new line no>` for an added one, as the diff
 * numbers them. Everything not named stays as it was. Binary files, renames, deletions and
 * symlinks are applied whole only.
 */
export const FileSelection = z.strictObject({
  path: z.string().min(1),
  hunks: z.array(z.number().int().nonnegative()).max(100_000).optional(),
  lines: z.array(z.string().regex(/^[+-][0-9]{1,9}$/, 'a line id: -<old line> or +<new line>')).max(1_000_000).optional(),
});
export type FileSelection = z.infer<typeof FileSelection>;

/** What to apply or export: whole files (all when omitted) and parts of some of them. */
const SelectionFields = {
  /** A follow-up turn's own change (default) or the whole thread's (docs/architecture.md §15). */
  scope: ChangeScope.optional(),
  /** One of the run's checkpoints instead of its result ("up to here", docs/architecture.md §19); turn scope only. */
  checkpoint: CheckpointNumber.optional(),
  /** Paths to take; all changed files when omitted. */
  files: z.array(z.string().min(1)).optional(),
  /** Hunks/lines of some of those files (each must be among `files`); the others are taken whole. */
  selection: z.array(FileSelection).max(100_000).optional(),
};

/** The host's rendering of a selection: its patch text (when small enough to show) and digest. */
export const SelectionPatch = z.object({
  /** The patch exactly as the host rendered it; absent above 4 MiB. */
  text: z.string().optional(),
  bytes: z.number().int().nonnegative(),
  /** SHA-256 of the patch bytes: pass it as `reviewedSha256`. */
  sha256: z.string(),
  files: z.array(z.string()),
});
export type SelectionPatch = z.infer<typeof SelectionPatch>;

/** Picture formats review draws (docs/architecture.md §11): decided from the host's bytes, never from the sandbox's word. */
export const ImageMime = z.enum(['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/svg+xml']);
export type ImageMime = z.infer<typeof ImageMime>;

/** Review draws a side of a picture only up to this many bytes (each side); larger ones are named, not sent. */
export const IMAGE_CAP_BYTES = 4 * 1024 * 1024;

/** The file names review asks pictures for (the host still checks the bytes). */
export const IMAGE_PATH = /\.(png|jpe?g|gif|webp|svg)$/i;

/** One side (before or after) of a changed picture. */
export const ImageSide = z.discriminatedUnion('state', [
  /** Decoded from the host's object store: `base64` of exactly those bytes, `mime` sniffed from them. */
  z.object({ state: z.literal('image'), mime: ImageMime, bytes: z.number().int().nonnegative(), base64: z.string() }),
  /** Over `IMAGE_CAP_BYTES`: not sent. */
  z.object({ state: z.literal('too-large'), bytes: z.number().int().nonnegative() }),
  /** The bytes are none of the formats (whatever the file name says). */
  z.object({ state: z.literal('not-an-image'), bytes: z.number().int().nonnegative() }),
  /** No such side: the file was added (before) or deleted (after). */
  z.object({ state: z.literal('absent') }),
]);
export type ImageSide = z.infer<typeof ImageSide>;

/** A changed picture's two sides, from the result the host collected. */
export const FileImages = z.object({ path: z.string(), before: ImageSide, after: ImageSide, capBytes: z.number().int().positive() });
export type FileImages = z.infer<typeof FileImages>;

/** One region of a three-way merge: agreed text, or a conflict with each side's lines. */
export const MergeRegion = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('clean'), text: z.string() }),
  z.object({ kind: z.literal('conflict'), ours: z.string(), base: z.string(), theirs: z.string() }),
]);
export type MergeRegion = z.infer<typeof MergeRegion>;

/** A file the project and the run both changed: the three versions and their merge. */
export const MergeView = z.object({
  path: z.string(),
  /** The file when the run started (host object store). */
  base: z.string(),
  /** The project's file now. */
  ours: z.string(),
  /** The run's result (host object store). */
  theirs: z.string(),
  /** SHA-256 of the project's file as read for this view: a resolution is written only if it still has it. */
  oursSha256: z.string(),
  /** SHA-256 of the base and of the run's side shown (host object store); `diffs:resolve` sends `theirsSha256` back. */
  baseSha256: z.string(),
  theirsSha256: z.string(),
  /** Which change is merged: a turn's own (base: where the turn started) or the whole thread's (base: where its first turn started). */
  scope: ChangeScope,
  /** `git merge-file` of the three, in regions; the conflicts are where both sides changed the same lines. */
  regions: z.array(MergeRegion),
  conflicts: z.number().int().nonnegative(),
});
export type MergeView = z.infer<typeof MergeView>;

export const ApplyMode = z.enum(['working-tree', 'branch']);
export type ApplyMode = z.infer<typeof ApplyMode>;

export const ApplyInput = z
  .strictObject({
    runId: RunId,
    ...SelectionFields,
    mode: ApplyMode.default('working-tree'),
    /** New branch name for mode `branch`. */
    branch: z.string().trim().min(1).max(200).optional(),
    /** Commit message for mode `branch` (default: the run's task); a subject over 72 characters continues in the body. */
    message: z.string().max(20_000).optional(),
    /** Apply into another directory than the run's project (CLI `--to`). */
    targetDir: z.string().min(1).optional(),
    /**
     * SHA-256 (hex) of the patch the user reviewed: `diffs:preview`'s `sha256` for the selection, or
     * `diffs:list`'s `patchSha256` when whole files are applied. Apply refuses anything else.
     */
    reviewedSha256: z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex'),
    /**
     * Write the files that merge cleanly even when others conflict. Without it an apply is whole or
     * nothing: one conflicting file and nothing is written (the conflicts come back to resolve).
     */
    skipConflicts: z.boolean().optional(),
  })
  .superRefine((v, ctx) => {
    if (v.mode === 'branch' && !v.branch) ctx.addIssue({ code: 'custom', path: ['branch'], message: 'name the new branch' });
  });

/** Download of a selection's patch from `airlock serve` (POST, JSON body; same token, Origin and Host checks as the API). */
export const PATCH_DOWNLOAD_PATH = '/api/patch';
export const PatchDownloadInput = z.strictObject({ runId: RunId, ...SelectionFields });
/** Response header of the download carrying the patch's SHA-256. */
export const PATCH_SHA256_HEADER = 'x-airlock-patch-sha256';
export type ApplyInput = z.input<typeof ApplyInput>;

export const Conflict = z.object({ path: z.string(), reason: z.string() });
export type Conflict = z.infer<typeof Conflict>;

export const ApplyResult = z.object({
  applied: z.array(z.string()),
  /** Files left untouched because the project changed under them; nothing was overwritten. */
  conflicts: z.array(Conflict),
  /** Files that would have applied cleanly but were not written because others conflict (whole or nothing). */
  held: z.array(z.string()).default([]),
  /** Files the project already has as the result (applied before, or resolved in a merge view). */
  unchanged: z.array(z.string()).default([]),
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

/**
 * A branch commit's default message: the agent's summary (its first line the subject), the task in
 * the body; the task alone when the agent left no summary.
 */
export function defaultCommitMessage(task: string, summary?: string): string {
  const said = summary?.trim();
  return said ? `${said}\n\nTask: ${task.trim()}` : task.trim();
}

export const diffsContracts = {
  'diffs:list': {
    input: z.strictObject({ runId: RunId, scope: ChangeScope.optional(), checkpoint: CheckpointNumber.optional() }),
    /** `patchSha256`: the collected result's patch digest (absent while the run is live); pass it to `diffs:apply`. */
    output: z.object({ files: z.array(ChangedFile), patchSha256: z.string().optional() }),
  },
  'diffs:file': {
    input: z.strictObject({ runId: RunId, scope: ChangeScope.optional(), checkpoint: CheckpointNumber.optional(), path: z.string().min(1), context: z.number().int().min(0).max(1000).default(3) }),
    output: FileDiff,
  },
  /**
   * A changed picture's before and after, read from the run's collected result (the host's object
   * store), never from the live sandbox: CONFLICT while the run is in progress.
   */
  'diffs:images': { input: z.strictObject({ runId: RunId, scope: ChangeScope.optional(), checkpoint: CheckpointNumber.optional(), path: z.string().min(1) }), output: FileImages },
  /** A run's checkpoints (docs/architecture.md §19), oldest first; the last is its result. */
  'diffs:checkpoints': { input: z.strictObject({ runId: RunId }), output: CheckpointList },
  /** The host-rendered patch of a selection (files, hunks, lines) and its digest: what the user reviews and apply checks. */
  'diffs:preview': { input: z.strictObject({ runId: RunId, ...SelectionFields }), output: SelectionPatch },
  'diffs:apply': { input: ApplyInput, output: ApplyResult },
  /**
   * Writes a patch file on the host and returns where; `text` is included when small enough to download.
   * `to`: where a patch handed to the user went (`clipboard`, a browser `download`), recorded in the apply log.
   */
  'diffs:exportPatch': {
    input: z.strictObject({ runId: RunId, ...SelectionFields, destPath: z.string().min(1).optional(), to: z.enum(['clipboard', 'download']).optional() }),
    output: z.object({ path: z.string(), bytes: z.number().int().nonnegative(), sha256: z.string().optional(), text: z.string().optional() }),
  },
  /**
   * Desktop app: asks where to save (a native save dialog) and writes the selection's patch there,
   * recorded in the apply log. `saved: false` when the user cancelled. Not served to browsers (they download).
   */
  'diffs:savePatch': {
    input: z.strictObject({ runId: RunId, ...SelectionFields }),
    output: z.object({ saved: z.boolean(), path: z.string().optional(), bytes: z.number().int().nonnegative().optional(), sha256: z.string().optional() }),
  },
  /** Base, the project's file and the run's result of a file apply refused, with their three-way merge. */
  'diffs:mergeView': { input: z.strictObject({ runId: RunId, scope: ChangeScope.optional(), path: z.string().min(1), targetDir: z.string().min(1).optional() }), output: MergeView },
  /**
   * Writes the user's resolution of a conflicted file into the project, only if the project's file
   * still has `oursSha256` (CONFLICT otherwise: it changed again; reload the view). Recorded in the
   * apply log with its scope.
   */
  'diffs:resolve': {
    input: z.strictObject({
      runId: RunId,
      scope: ChangeScope.optional(),
      path: z.string().min(1),
      content: z.string().max(50 * 1024 * 1024),
      oursSha256: z.string().regex(/^[0-9a-f]{64}$/),
      /** The view's `theirsSha256`: saving against another result than the one shown (another scope) is refused. */
      theirsSha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
      targetDir: z.string().min(1).optional(),
    }),
    output: z.object({ path: z.string(), sha256: z.string() }),
  },
} as const;

export const diffsEvents = {
  /** The changed files of a run changed: refetch `diffs:list` (and an open `diffs:file`). */
  'diffs:onDidChange': z.object({ runId: RunId }),
} as const;
