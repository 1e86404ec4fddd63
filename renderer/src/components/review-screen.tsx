import { useEffect, useRef, useState } from 'react';
import { defaultCommitMessage, isFinalStatus, type ChangedFile } from '../../../contracts';
import { useAction } from '../hooks/use-action';
import { useApplyFlow } from '../hooks/use-apply-flow';
import { useReviewData } from '../hooks/use-review-data';
import { useReviewSelection } from '../hooks/use-review-selection';
import { useSelectionPreview } from '../hooks/use-selection-preview';
import { countOf } from '../lib/format';
import { anchorKey, type CommentAnchor } from '../lib/review-comments';
import { hunkIds } from '../lib/selection';
import { useAppStore } from '../stores/app-store';
import { appliedText, ErrorBanner } from './common';
import { ApplyOutcome } from './apply-outcome';
import { DiffViewer } from './diff-viewer';
import { MergeViewPanel } from './merge-view';
import { PatchExport } from './patch-export';
import { CommentEditor, ReviewCommentsPanel, SentCommentsNote, useDraftComments } from './review-comments-panel';

/**
 * Review & apply, like a git client: tick files, and hunks or single lines of a text file; the
 * host renders the patch of exactly that selection (shown below the diff) and apply sends back
 * its digest. Risky files (CI, hooks, lifecycle scripts, IDE tasks, agent config, rc files,
 * Makefiles) come first, are not pre-selected, and ticking one asks first. Apply to the working
 * tree or a new branch, or export the patch; a file refused because the project changed it too can
 * be resolved in a three-way merge view. The logic lives in hooks (docs/architecture.md §5,
 * "Screens and their hooks"): loading, selection rules, the patch preview and the apply flow.
 */
export function ReviewScreen({ runId, checkpoint }: { runId: string; checkpoint?: number }) {
  const navigate = useAppStore((s) => s.navigate);
  // One error line for the screen: loading, preview, apply and export all report here.
  const action = useAction();
  const { setError } = action;
  const data = useReviewData(runId, checkpoint, setError);
  const { run, scope, ordered, byPath, collected } = data;
  const sel = useReviewSelection({ files: ordered, hunksOf: data.hunksOf, resetKey: data.resultKey });
  const { selected, focused, pending, request } = sel;
  const reviewed = useSelectionPreview({ runId, scope, collected, request, requestKey: sel.requestKey, onError: setError });
  const defaultMessage = run ? defaultCommitMessage(run.task, data.summary) : '';
  const flow = useApplyFlow({ runId, attemptGroup: run?.attempt?.groupId, scope, checkpoint, request, requestKey: sel.requestKey, reviewed, defaultMessage, action });
  const { mode, result } = flow;
  const { busy, error } = action;

  // Comments to the agent (§11, "Comments to the agent"): on the run's own result, not on a checkpoint.
  const comments = useDraftComments(runId);
  const [editing, setEditing] = useState<{ path: string; anchor: CommentAnchor }>();
  const commenting = checkpoint === undefined && Boolean(collected);
  const canSend = Boolean(run && isFinalStatus(run.status) && run.status !== 'interrupted');
  // A rejected hunk is out of apply, once per result (a reload or a refetch resets the selection; the
  // user may tick it again afterwards).
  const unticked = useRef(new Set<string>());
  const { hunksOf, resultKey } = data;
  const { setLines } = sel;
  useEffect(() => {
    for (const c of comments) {
      if (!c.rejected || c.anchor.kind !== 'hunk') continue;
      const key = `${resultKey}\0${c.id}`;
      const hunk = hunksOf(c.path)?.[c.anchor.hunk - 1];
      if (!hunk || unticked.current.has(key)) continue;
      unticked.current.add(key);
      setLines(c.path, hunkIds(hunk), false);
    }
  }, [comments, hunksOf, resultKey, setLines]);

  const risky = ordered.filter((f) => f.risky);
  const partCount = request.selection.length;
  const focusedFile = focused ? byPath.get(focused) : undefined;
  const focusedIds = focused ? data.hunksOf(focused)?.flatMap(hunkIds) : undefined;

  const row = (f: ChangedFile) => {
    const part = sel.isPartial(f.path);
    return (
      <div className={`file-row ${f.risky ? 'risky' : ''}`} key={f.path} data-path={f.path}>
        <input type="checkbox" aria-label={`apply ${f.path}`} checked={selected.has(f.path) && !part} ref={(el) => { if (el) el.indeterminate = part; }} onChange={() => sel.toggle(f.path)} />
        <button className="tree-file" style={{ width: 'auto', flex: 1 }} aria-selected={focused === f.path} onClick={() => sel.focus(f.path)}>
          <span className={`st ${f.status}`}>{f.status[0]?.toUpperCase()}</span>
          <span className="mono">{f.oldPath ? `${f.oldPath} → ` : ''}{f.path}</span>
          {f.modeChange && <span className="badge">{f.modeChange}</span>}
          {part && <span className="badge">part</span>}
          <span className="counts">{f.binary ? 'binary' : <><span className="add-n">+{f.additions}</span> <span className="del-n">-{f.deletions}</span></>}</span>
        </button>
        {f.risky && <span className="risk-reason">{f.risky}</span>}
      </div>
    );
  };

  return (
    <>
      <div className="row spread">
        <h1>Review &amp; apply</h1>
        <button className="btn" onClick={() => navigate({ name: 'run', runId })}>Back to run</button>
      </div>
      {run && <div className="muted">{run.task} · <span className="mono">{run.projectDir}</span></div>}
      {run?.applied && <div className="muted" aria-label="Applied status">{appliedText(run.applied)}</div>}
      {checkpoint !== undefined && (
        <div className="banner" role="note" aria-label="Checkpoint">
          <b>Checkpoint {checkpoint}</b>: the run's change up to that turn, as the host collected it then. Applying it leaves the later turns out.
          <button className="btn small" onClick={() => navigate({ name: 'review', runId })}>Review the whole result</button>
        </div>
      )}
      {run?.thread && checkpoint === undefined && (
        <div className="row" role="radiogroup" aria-label="Which change">
          <label className="row"><input type="radio" name="scope" checked={scope === 'turn'} onChange={() => { data.setChangeScope('turn'); flow.clearResult(); }} /> This turn's change (turn {run.thread.turn})</label>
          <label className="row"><input type="radio" name="scope" checked={scope === 'thread'} onChange={() => { data.setChangeScope('thread'); flow.clearResult(); }} /> The whole thread (turns 1–{run.thread.turn})</label>
        </div>
      )}
      {run?.attempt && checkpoint === undefined && (
        <div className="banner info" role="note" aria-label="Attempt">
          Attempt {run.attempt.index + 1} of a group: applying it wipes the other attempts' sandboxes again and checks that they are gone.{' '}
          <button className="btn small" onClick={() => navigate({ name: 'compare', groupId: run.attempt?.groupId ?? '' })}>Compare attempts</button>
        </div>
      )}
      <ErrorBanner message={error} />
      <SentCommentsNote runId={runId} />
      {risky.length > 0 && (
        <div className="banner" role="note">
          <b>{risky.length} change(s) can alter what runs on your machine later.</b> They are listed first and not selected: read them before applying.
        </div>
      )}
      {pending && (
        <div className="banner confirm" role="alertdialog" aria-label="Include risky files?">
          <b>Include {pending.paths.length === 1 ? 'a risky file' : `${pending.paths.length} risky files`}?</b>
          <ul>{pending.paths.map((p) => <li key={p}><span className="mono">{p}</span> — {byPath.get(p)?.risky}</li>)}</ul>
          <div className="row">
            <button className="btn primary" onClick={sel.confirm}>Include</button>
            <button className="btn" onClick={sel.cancel}>Cancel</button>
          </div>
        </div>
      )}
      <section className="panel" aria-label="Files to apply">
        <div className="row spread" style={{ marginBottom: 6 }}>
          <h2 style={{ margin: 0 }}>{selected.size} of {ordered.length} files selected{partCount ? ` (${partCount} in part)` : ''}</h2>
          <div className="row">
            <button className="btn small" onClick={sel.selectAll}>Select all</button>
            <button className="btn small" onClick={sel.selectNone}>Select none</button>
          </div>
        </div>
        {ordered.length === 0 && <div className="empty">This run changed no files.</div>}
        {ordered.map(row)}
      </section>
      {focused && (
        <section className="panel stack diff-panel" aria-label="Diff">
          {focusedIds && focusedIds.length > 0 && collected && <div className="muted pick-hint">Tick hunks or lines to apply only those; unticked changes stay as they are in your project.</div>}
          {editing?.path === focused && (
            <CommentEditor
              key={anchorKey(editing.path, editing.anchor)}
              runId={runId}
              path={editing.path}
              anchor={editing.anchor}
              onClose={() => setEditing(undefined)}
            />
          )}
          <DiffViewer
            runId={runId}
            path={focused}
            scope={scope}
            {...(collected && focusedFile && !focusedFile.binary
              ? { pick: { picked: sel.pickedOf(focused), set: (ids: string[], on: boolean) => sel.setLines(focused, ids, on) } }
              : {})}
            {...(commenting && focusedFile && !focusedFile.binary
              ? { comments: { open: (anchor: CommentAnchor) => setEditing({ path: focused, anchor }), has: (anchor: CommentAnchor) => comments.some((c) => anchorKey(c.path, c.anchor) === anchorKey(focused, anchor)) } }
              : {})}
          />
        </section>
      )}
      {commenting && <ReviewCommentsPanel runId={runId} canSend={canSend} />}
      <section className="panel stack" aria-label="Apply">
        <details className="patch-preview">
          <summary>
            Patch to apply: {reviewed ? <><span className="mono">{countOf(reviewed.files.length, 'file')}, {reviewed.bytes} bytes</span> · sha256 <span className="mono" aria-label="Selection digest">{reviewed.sha256.slice(0, 16)}…</span></> : request.files.length ? 'rendering…' : 'nothing selected'}
          </summary>
          {reviewed?.text !== undefined ? <pre className="diff patch-text" aria-label="Patch to apply">{reviewed.text}</pre> : reviewed && <div className="empty">The patch is too large to show here; save it to read it.</div>}
        </details>
        <div className="row" role="radiogroup" aria-label="Apply to">
          <label className="row"><input type="radio" name="mode" checked={mode === 'working-tree'} onChange={() => flow.setMode('working-tree')} /> Working tree (uncommitted changes)</label>
          <label className="row"><input type="radio" name="mode" checked={mode === 'branch'} onChange={() => flow.setMode('branch')} /> New branch with a commit</label>
          {mode === 'branch' && <input type="text" aria-label="Branch name" value={flow.branch} onChange={(e) => flow.setBranch(e.target.value)} />}
          {flow.suggested && mode === 'branch' && <button className="btn small" onClick={flow.takeSuggested}>Use {flow.suggested}</button>}
        </div>
        {mode === 'branch' && (
          <label className="stack">
            <span className="muted">Commit message (first line is the subject)</span>
            <textarea aria-label="Commit message" rows={4} value={flow.message ?? defaultMessage} onChange={(e) => flow.setMessage(e.target.value)} />
          </label>
        )}
        <div className="row">
          <button className="btn primary" onClick={() => void flow.apply()} disabled={busy || !reviewed || !collected || flow.nothingToApply}>
            {busy ? 'Applying…' : flow.nothingToApply ? 'Nothing to apply' : `Apply ${countOf(request.files.length, 'file')}${partCount ? `, ${partCount} in part` : ''}`}
          </button>
          <PatchExport runId={runId} scope={scope} files={request.files} selection={request.selection} disabled={!reviewed} onError={setError} />
        </div>
        {result && <ApplyOutcome result={result} resolved={flow.resolved} busy={busy} onResolve={checkpoint === undefined ? flow.resolve : () => setError("The merge view resolves against the run's result. For a checkpoint, save its patch and resolve with git, or review the whole result.")} onApplyOthers={() => void flow.apply(true)} />}
      </section>
      {flow.resolving && checkpoint === undefined && (
        <MergeViewPanel
          runId={runId}
          scope={data.changeScope}
          path={flow.resolving}
          onClose={() => flow.resolve(undefined)}
          onResolved={flow.markResolved}
        />
      )}
    </>
  );
}
