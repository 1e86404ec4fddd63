import { useState } from 'react';
import type { ApplyMode, ApplyResult, SelectionPatch } from '../../../contracts';
import { api, errorInfo } from '../api';
import { countOf } from '../lib/format';
import { useAppStore } from '../stores/app-store';
import { scopeArgs, type ViewScope } from '../stores/diff-store';
import { useRunsStore } from '../stores/runs-store';
import type { Action } from './use-action';
import type { SelectionRequest } from './use-review-selection';

/** Apply's target, its outcome, and the conflicts being resolved. */
export interface ApplyFlow {
  mode: ApplyMode;
  setMode(mode: ApplyMode): void;
  branch: string;
  setBranch(branch: string): void;
  /** The commit message as typed; undefined: the default one (the run's summary and task). */
  message: string | undefined;
  setMessage(message: string): void;
  /** A free branch the host named when the chosen one exists (its typed error, never read from the message). */
  suggested: string | undefined;
  /** Takes the suggested branch and clears the error it came with. */
  takeSuggested(): void;
  /** The last apply's outcome; cleared when the change shown switches. */
  result: ApplyResult | undefined;
  clearResult(): void;
  /** The last apply of this very selection and mode changed nothing: the project already has it. */
  nothingToApply: boolean;
  /** Applies the reviewed selection; `skipConflicts` writes the clean files and leaves the conflicting ones. */
  apply(skipConflicts?: boolean): Promise<void>;
  /** The conflicted file open in the merge view. */
  resolving: string | undefined;
  resolve(path: string | undefined): void;
  /** Conflicted files resolved in the merge view since the last apply. */
  resolved: ReadonlySet<string>;
  markResolved(path: string): void;
}

/**
 * Apply to the working tree or a new branch (docs/architecture.md §11): whole or nothing, so a
 * conflict opens the merge view first (working tree, whole result only); an existing branch offers
 * the free one the host named. Busy and the error are the screen's `action` (useAction).
 */
export function useApplyFlow({ runId, attemptGroup, scope, checkpoint, request, requestKey, reviewed, defaultMessage, action }: {
  runId: string;
  /**
   * The attempt group the run belongs to: applying it goes through `attempts:apply`, which also wipes
   * the other attempts' sandboxes again and verifies them gone (docs/architecture.md §18).
   */
  attemptGroup?: string | undefined;
  scope: ViewScope;
  checkpoint: number | undefined;
  request: SelectionRequest;
  requestKey: string;
  /** The host-rendered patch of the current selection (use-selection-preview.ts); apply sends its digest. */
  reviewed: SelectionPatch | undefined;
  defaultMessage: string;
  action: Action;
}): ApplyFlow {
  const [mode, setMode] = useState<ApplyMode>('working-tree');
  const [branch, setBranch] = useState(`airlock/${runId.slice(-8)}`);
  const [message, setMessage] = useState<string>();
  const [suggested, setSuggested] = useState<string>();
  /** The last apply's outcome, with the selection and mode it was for (`key`). */
  const [result, setResult] = useState<ApplyResult & { key: string }>();
  const [resolving, setResolving] = useState<string>();
  const [resolved, setResolved] = useState<ReadonlySet<string>>(new Set());

  const apply = (skipConflicts = false) =>
    action.run(async () => {
      setSuggested(undefined);
      // A new apply starts: the previous outcome no longer describes the project.
      setResult(undefined);
      setResolving(undefined);
      setResolved(new Set());
      if (!reviewed) throw new Error('The result is not collected yet; apply once the run has ended.');
      const commitMessage = (message ?? defaultMessage).trim();
      const input = {
        runId, ...scopeArgs(scope), files: request.files, ...(request.selection.length ? { selection: request.selection } : {}), mode, reviewedSha256: reviewed.sha256,
        ...(mode === 'branch' ? { branch, ...(commitMessage ? { message: commitMessage } : {}) } : {}),
        ...(skipConflicts ? { skipConflicts: true } : {}),
      };
      let r: ApplyResult;
      if (attemptGroup && checkpoint === undefined) {
        const out = await api().call('attempts:apply', { groupId: attemptGroup, apply: input });
        r = out.result;
        const left = out.others.filter((o) => !o.verified);
        useAppStore.getState().notify(left.length ? 'error' : 'success', left.length ? `The other attempts' sandboxes are NOT verified gone: ${left.flatMap((o) => o.leftovers).join(', ')}` : `The other attempts' sandboxes: verified gone (${out.others.length})`);
      } else {
        r = await api().call('diffs:apply', input);
      }
      setResult({ ...r, key: `${mode}\0${requestKey}` });
      // The run record now says where it was applied.
      void useRunsStore.getState().open(runId).catch(() => undefined);
      // Whole or nothing: the conflicts open first, in the merge view (working tree only).
      if (r.conflicts.length && mode === 'working-tree' && checkpoint === undefined) setResolving(r.conflicts[0]?.path);
      notifyOutcome(r);
    }, (err) => {
      // The host names a free branch when the chosen one exists (typed, not read from the message): offer it.
      const info = errorInfo(err);
      if (info.field === 'branch' && info.suggestion) setSuggested(info.suggestion);
      return false;
    });

  return {
    mode,
    setMode,
    branch,
    setBranch,
    message,
    setMessage,
    suggested,
    takeSuggested: () => {
      if (suggested) setBranch(suggested);
      setSuggested(undefined);
      action.setError(undefined);
    },
    result,
    clearResult: () => setResult(undefined),
    nothingToApply: result?.key === `${mode}\0${requestKey}` && result.applied.length === 0 && result.conflicts.length === 0,
    apply,
    resolving,
    resolve: setResolving,
    resolved,
    markResolved: (path) => {
      setResolved((s) => new Set(s).add(path));
      setResolving(undefined);
      useAppStore.getState().notify('success', `Resolved ${path}`);
    },
  };
}

/** The apply's outcome as a notice: what was written, and what was left because the project changed it too. */
function notifyOutcome(r: ApplyResult): void {
  const notify = useAppStore.getState().notify;
  if (r.conflicts.length) notify('error', r.applied.length ? `Applied ${countOf(r.applied.length, 'file')}; ${countOf(r.conflicts.length, 'conflict')} left untouched` : `Nothing applied: ${countOf(r.conflicts.length, 'file')} ${r.conflicts.length === 1 ? 'conflicts' : 'conflict'} with your edits`);
  else notify('success', r.applied.length ? `Applied ${countOf(r.applied.length, 'file')}` : 'Nothing to apply: your project already has this change');
}
