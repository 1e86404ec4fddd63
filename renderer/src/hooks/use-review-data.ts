import { useEffect, useMemo, useState } from 'react';
import type { ChangeScope, ChangedFile, RunSummary } from '../../../contracts';
import { errorMessage } from '../api';
import { orderForReview } from '../lib/file-tree';
import { parseUnifiedDiff, type Hunk } from '../lib/unified-diff';
import { diffKey, useDiffStore, viewKey, type ViewScope } from '../stores/diff-store';
import { useRunsStore } from '../stores/runs-store';

/** What the review screen shows of a run's change, loaded and kept fresh by the stores. */
export interface ReviewData {
  run: RunSummary | undefined;
  /** The run's own summary line (for the default commit message). */
  summary: string | undefined;
  /** The change shown: a turn's own, the whole thread's, or a checkpoint's (`cp<N>`). */
  scope: ViewScope;
  /** A follow-up's choice between its own change and the thread's (ignored for a checkpoint). */
  changeScope: ChangeScope;
  setChangeScope(scope: ChangeScope): void;
  /** The changed files, risky first (lib/file-tree.ts). */
  ordered: ChangedFile[];
  byPath: ReadonlyMap<string, ChangedFile>;
  /** The digest of the collected result; undefined while the run is live (nothing to apply yet). */
  collected: string | undefined;
  /** The hunks of a file whose diff is loaded. */
  hunksOf(path: string): Hunk[] | undefined;
  /** Changes when a new result arrives (not on a refetch of the same one): the selection resets then. */
  resultKey: string;
}

/**
 * Loads a run and the change list of the scope shown; the diff store refetches on `diffs:onDidChange`
 * (docs/architecture.md §5, "Invalidate and refetch"). A load error goes to `onError` (a stable setter).
 */
export function useReviewData(runId: string, checkpoint: number | undefined, onError: (message: string) => void): ReviewData {
  const run = useRunsStore((s) => s.runs[runId]);
  const summary = useRunsStore((s) => s.live[runId]?.record?.summary);
  // A follow-up turn: its own change, or the whole thread's up to it (docs/architecture.md §15);
  // or one checkpoint of the run, "up to here" (§19).
  const [changeScope, setChangeScope] = useState<ChangeScope>('turn');
  const scope: ViewScope = checkpoint !== undefined ? `cp${checkpoint}` : changeScope;
  const files = useDiffStore((s) => s.files[viewKey(runId, scope)]);
  const diffs = useDiffStore((s) => s.diffs);
  const collected = useDiffStore((s) => s.patchSha256[viewKey(runId, scope)]);

  const haveRun = Boolean(run);
  useEffect(() => {
    if (!haveRun) void useRunsStore.getState().open(runId).catch((err) => onError(errorMessage(err)));
    useDiffStore.getState().load(runId, scope).catch((err) => onError(errorMessage(err)));
  }, [runId, haveRun, scope, onError]);

  const ordered = useMemo(() => orderForReview(files ?? []), [files]);
  const byPath = useMemo(() => new Map(ordered.map((f) => [f.path, f])), [ordered]);
  const hunksOf = useMemo(() => {
    const parsed = new Map<string, Hunk[] | undefined>();
    return (path: string): Hunk[] | undefined => {
      if (!parsed.has(path)) {
        const d = diffs[diffKey(runId, path, scope)];
        parsed.set(path, d && !('error' in d) ? parseUnifiedDiff(d.diff) : undefined);
      }
      return parsed.get(path);
    };
  }, [diffs, runId, scope]);
  const resultKey = `${scope}\0${collected ?? ''}\0${(files ?? []).map((f) => f.path).join('\0')}`;
  return { run, summary, scope, changeScope, setChangeScope, ordered, byPath, collected, hunksOf, resultKey };
}
