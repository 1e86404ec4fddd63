import { useEffect, useMemo, useState } from 'react';
import { defaultCommitMessage, type ApplyResult, type ChangeScope, type ChangedFile, type FileSelection, type SelectionPatch } from '../../../contracts';
import { api, errorInfo, errorMessage } from '../api';
import { countOf } from '../lib/format';
import { defaultSelection, orderForReview } from '../lib/file-tree';
import { fileSelectionOf, hunkIds } from '../lib/selection';
import { parseUnifiedDiff } from '../lib/unified-diff';
import { useAppStore } from '../stores/app-store';
import { diffKey, scopeArgs, useDiffStore, viewKey, type ViewScope } from '../stores/diff-store';
import { useRunsStore } from '../stores/runs-store';
import { appliedText, ErrorBanner } from './common';
import { ApplyOutcome } from './apply-outcome';
import { DiffViewer } from './diff-viewer';
import { MergeViewPanel } from './merge-view';
import { PatchExport } from './patch-export';

interface Pending {
  paths: string[];
  then(): void;
}

/**
 * Review & apply, like a git client: tick files, and hunks or single lines of a text file; the
 * host renders the patch of exactly that selection (shown below the diff) and apply sends back
 * its digest. Risky files (CI, hooks, lifecycle scripts, IDE tasks, agent config, rc files,
 * Makefiles) come first, are not pre-selected, and ticking one asks first. Apply to the working
 * tree or a new branch, or export the patch; a file refused because the project changed it too can
 * be resolved in a three-way merge view.
 */
export function ReviewScreen({ runId, checkpoint }: { runId: string; checkpoint?: number }) {
  const run = useRunsStore((s) => s.runs[runId]);
  const summary = useRunsStore((s) => s.live[runId]?.record?.summary);
  // A follow-up turn: its own change, or the whole thread's up to it (docs/architecture.md §15);
  // or one checkpoint of the run, "up to here" (§19).
  const [changeScope, setScope] = useState<ChangeScope>('turn');
  const scope: ViewScope = checkpoint !== undefined ? `cp${checkpoint}` : changeScope;
  const files = useDiffStore((s) => s.files[viewKey(runId, scope)]);
  const diffs = useDiffStore((s) => s.diffs);
  const collected = useDiffStore((s) => s.patchSha256[viewKey(runId, scope)]);
  const navigate = useAppStore((s) => s.navigate);
  const ordered = useMemo(() => orderForReview(files ?? []), [files]);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  /** Partly picked files: the change ids picked; a file not here is taken whole. */
  const [picks, setPicks] = useState<Record<string, Set<string>>>({});
  const [pending, setPending] = useState<Pending>();
  const [focused, setFocused] = useState<string>();
  const [mode, setMode] = useState<'working-tree' | 'branch'>('working-tree');
  const [branch, setBranch] = useState(`airlock/${runId.slice(-8)}`);
  const [message, setMessage] = useState<string>();
  const [suggested, setSuggested] = useState<string>();
  /** The last apply's outcome, with the selection and mode it was for (`key`). */
  const [result, setResult] = useState<ApplyResult & { key: string }>();
  const [preview, setPreview] = useState<SelectionPatch & { key: string }>();
  const [resolving, setResolving] = useState<string>();
  const [resolved, setResolved] = useState<Set<string>>(new Set());
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  const haveRun = Boolean(run);
  useEffect(() => {
    if (!haveRun) void useRunsStore.getState().open(runId).catch((err) => setError(errorMessage(err)));
    useDiffStore.getState().load(runId, scope).catch((err) => setError(errorMessage(err)));
  }, [runId, haveRun, scope]);
  // A new result (not a refetch of the same one, e.g. after an apply) resets the selection.
  const resultKey = `${scope}\0${collected ?? ''}\0${(files ?? []).map((f) => f.path).join('\0')}`;
  useEffect(() => {
    setSelected(defaultSelection(files ?? []));
    setPicks({});
    setFocused((f) => f ?? orderForReview(files ?? [])[0]?.path);
  }, [resultKey]);

  const byPath = useMemo(() => new Map(ordered.map((f) => [f.path, f])), [ordered]);
  /** The change ids of a file whose diff is loaded. */
  const idsOf = (path: string): string[] | undefined => {
    const d = diffs[diffKey(runId, path, scope)];
    return d && !('error' in d) ? parseUnifiedDiff(d.diff).flatMap(hunkIds) : undefined;
  };

  /** Runs `then` now, or after the user confirms ticking the risky files among `paths`. */
  const confirmRisky = (paths: string[], then: () => void) => {
    const risky = paths.filter((p) => byPath.get(p)?.risky && !selected.has(p));
    if (risky.length) setPending({ paths: risky, then });
    else then();
  };
  const setFile = (path: string, on: boolean) => {
    setPicks(({ [path]: _, ...rest }) => rest);
    setSelected((s) => {
      const next = new Set(s);
      if (on) next.add(path);
      else next.delete(path);
      return next;
    });
  };
  const toggle = (path: string) => (selected.has(path) ? setFile(path, false) : confirmRisky([path], () => setFile(path, true)));
  const selectAll = () => confirmRisky(ordered.map((f) => f.path), () => {
    setPicks({});
    setSelected(new Set(ordered.map((f) => f.path)));
  });
  /** Ticks or unticks changes of the focused file (a file with nothing picked is left out). */
  const setLines = (path: string, ids: string[], on: boolean) => {
    const all = idsOf(path) ?? [];
    const now = new Set(selected.has(path) ? (picks[path] ?? all) : []);
    for (const id of ids) {
      if (on) now.add(id);
      else now.delete(id);
    }
    const commit = () => {
      if (now.size === 0) return setFile(path, false);
      setSelected((s) => new Set(s).add(path));
      setPicks(({ [path]: _, ...rest }) => (now.size === all.length ? rest : { ...rest, [path]: now }));
    };
    if (on) confirmRisky([path], commit);
    else commit();
  };

  // What is sent to the host: files, and hunks/lines of the partly picked ones.
  const request = useMemo(() => {
    const selection: FileSelection[] = [];
    for (const [path, ids] of Object.entries(picks)) {
      const d = diffs[diffKey(runId, path, scope)];
      if (!selected.has(path) || !d || 'error' in d) continue;
      const sel = fileSelectionOf(path, parseUnifiedDiff(d.diff), ids);
      if (typeof sel === 'object') selection.push(sel);
    }
    return { files: ordered.filter((f) => selected.has(f.path)).map((f) => f.path), selection };
  }, [picks, selected, diffs, ordered, runId, scope]);
  const key = JSON.stringify(request);
  // The host renders the selection's patch; its digest is what apply sends back.
  useEffect(() => {
    if (!collected || request.files.length === 0) return setPreview(undefined);
    let stale = false;
    const t = setTimeout(() => {
      api().call('diffs:preview', { runId, ...scopeArgs(scope), files: request.files, ...(request.selection.length ? { selection: request.selection } : {}) })
        .then((p) => { if (!stale) setPreview({ ...p, key }); })
        .catch((err) => { if (!stale) setError(errorMessage(err)); });
    }, 120);
    return () => {
      stale = true;
      clearTimeout(t);
    };
  }, [key, collected, runId, scope, request]);
  const reviewed = preview?.key === key ? preview : undefined;

  const apply = async (skipConflicts = false) => {
    setBusy(true);
    setError(undefined);
    setSuggested(undefined);
    // A new apply starts: the previous outcome no longer describes the project.
    setResult(undefined);
    setResolving(undefined);
    setResolved(new Set());
    try {
      if (!reviewed) throw new Error('The result is not collected yet; apply once the run has ended.');
      const commitMessage = (message ?? defaultMessage).trim();
      const r = await api().call('diffs:apply', {
        runId, ...scopeArgs(scope), files: request.files, ...(request.selection.length ? { selection: request.selection } : {}), mode, reviewedSha256: reviewed.sha256,
        ...(mode === 'branch' ? { branch, ...(commitMessage ? { message: commitMessage } : {}) } : {}),
        ...(skipConflicts ? { skipConflicts: true } : {}),
      });
      setResult({ ...r, key: `${mode}\0${key}` });
      // The run record now says where it was applied.
      void useRunsStore.getState().open(runId).catch(() => undefined);
      // Whole or nothing: the conflicts open first, in the merge view (working tree only).
      if (r.conflicts.length && mode === 'working-tree' && checkpoint === undefined) setResolving(r.conflicts[0]?.path);
      const notify = useAppStore.getState().notify;
      if (r.conflicts.length) notify('error', r.applied.length ? `Applied ${countOf(r.applied.length, 'file')}; ${countOf(r.conflicts.length, 'conflict')} left untouched` : `Nothing applied: ${countOf(r.conflicts.length, 'file')} ${r.conflicts.length === 1 ? 'conflicts' : 'conflict'} with your edits`);
      else notify('success', r.applied.length ? `Applied ${countOf(r.applied.length, 'file')}` : 'Nothing to apply: your project already has this change');
    } catch (err) {
      setError(errorMessage(err));
      // The host names a free branch when the chosen one exists (typed, not read from the message): offer it.
      const info = errorInfo(err);
      if (info.field === 'branch' && info.suggestion) setSuggested(info.suggestion);
    } finally {
      setBusy(false);
    }
  };

  const risky = ordered.filter((f) => f.risky);
  const defaultMessage = run ? defaultCommitMessage(run.task, summary) : '';
  // Re-applying what the project already has: the button says so until the selection or mode changes.
  const nothingToApply = result?.key === `${mode}\0${key}` && result.applied.length === 0 && result.conflicts.length === 0;
  const partCount = request.selection.length;
  const focusedFile = focused ? byPath.get(focused) : undefined;
  const focusedIds = focused ? idsOf(focused) : undefined;

  const row = (f: ChangedFile) => {
    const part = picks[f.path] !== undefined && selected.has(f.path);
    return (
      <div className={`file-row ${f.risky ? 'risky' : ''}`} key={f.path} data-path={f.path}>
        <input type="checkbox" aria-label={`apply ${f.path}`} checked={selected.has(f.path) && !part} ref={(el) => { if (el) el.indeterminate = part; }} onChange={() => toggle(f.path)} />
        <button className="tree-file" style={{ width: 'auto', flex: 1 }} aria-selected={focused === f.path} onClick={() => setFocused(f.path)}>
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
          <label className="row"><input type="radio" name="scope" checked={scope === 'turn'} onChange={() => { setScope('turn'); setResult(undefined); }} /> This turn's change (turn {run.thread.turn})</label>
          <label className="row"><input type="radio" name="scope" checked={scope === 'thread'} onChange={() => { setScope('thread'); setResult(undefined); }} /> The whole thread (turns 1–{run.thread.turn})</label>
        </div>
      )}
      <ErrorBanner message={error} />
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
            <button className="btn primary" onClick={() => { pending.then(); setPending(undefined); }}>Include</button>
            <button className="btn" onClick={() => setPending(undefined)}>Cancel</button>
          </div>
        </div>
      )}
      <section className="panel" aria-label="Files to apply">
        <div className="row spread" style={{ marginBottom: 6 }}>
          <h2 style={{ margin: 0 }}>{selected.size} of {ordered.length} files selected{partCount ? ` (${partCount} in part)` : ''}</h2>
          <div className="row">
            <button className="btn small" onClick={selectAll}>Select all</button>
            <button className="btn small" onClick={() => { setPicks({}); setSelected(new Set()); }}>Select none</button>
          </div>
        </div>
        {ordered.length === 0 && <div className="empty">This run changed no files.</div>}
        {ordered.map(row)}
      </section>
      {focused && (
        <section className="panel stack diff-panel" aria-label="Diff">
          {focusedIds && focusedIds.length > 0 && collected && <div className="muted pick-hint">Tick hunks or lines to apply only those; unticked changes stay as they are in your project.</div>}
          <DiffViewer
            runId={runId}
            path={focused}
            scope={scope}
            {...(collected && focusedFile && !focusedFile.binary
              ? { pick: { picked: selected.has(focused) ? picks[focused] : new Set<string>(), set: (ids: string[], on: boolean) => setLines(focused, ids, on) } }
              : {})}
          />
        </section>
      )}
      <section className="panel stack" aria-label="Apply">
        <details className="patch-preview">
          <summary>
            Patch to apply: {reviewed ? <><span className="mono">{countOf(reviewed.files.length, 'file')}, {reviewed.bytes} bytes</span> · sha256 <span className="mono" aria-label="Selection digest">{reviewed.sha256.slice(0, 16)}…</span></> : request.files.length ? 'rendering…' : 'nothing selected'}
          </summary>
          {reviewed?.text !== undefined ? <pre className="diff patch-text" aria-label="Patch to apply">{reviewed.text}</pre> : reviewed && <div className="empty">The patch is too large to show here; save it to read it.</div>}
        </details>
        <div className="row" role="radiogroup" aria-label="Apply to">
          <label className="row"><input type="radio" name="mode" checked={mode === 'working-tree'} onChange={() => setMode('working-tree')} /> Working tree (uncommitted changes)</label>
          <label className="row"><input type="radio" name="mode" checked={mode === 'branch'} onChange={() => setMode('branch')} /> New branch with a commit</label>
          {mode === 'branch' && <input type="text" aria-label="Branch name" value={branch} onChange={(e) => setBranch(e.target.value)} />}
          {suggested && mode === 'branch' && <button className="btn small" onClick={() => { setBranch(suggested); setSuggested(undefined); setError(undefined); }}>Use {suggested}</button>}
        </div>
        {mode === 'branch' && (
          <label className="stack">
            <span className="muted">Commit message (first line is the subject)</span>
            <textarea aria-label="Commit message" rows={4} value={message ?? defaultMessage} onChange={(e) => setMessage(e.target.value)} />
          </label>
        )}
        <div className="row">
          <button className="btn primary" onClick={() => void apply()} disabled={busy || !reviewed || !collected || nothingToApply}>
            {busy ? 'Applying…' : nothingToApply ? 'Nothing to apply' : `Apply ${countOf(request.files.length, 'file')}${partCount ? `, ${partCount} in part` : ''}`}
          </button>
          <PatchExport runId={runId} scope={scope} files={request.files} selection={request.selection} disabled={!reviewed} onError={setError} />
        </div>
        {result && <ApplyOutcome result={result} resolved={resolved} busy={busy} onResolve={checkpoint === undefined ? setResolving : () => setError("The merge view resolves against the run's result. For a checkpoint, save its patch and resolve with git, or review the whole result.")} onApplyOthers={() => void apply(true)} />}
      </section>
      {resolving && checkpoint === undefined && (
        <MergeViewPanel
          runId={runId}
          scope={changeScope}
          path={resolving}
          onClose={() => setResolving(undefined)}
          onResolved={(p) => {
            setResolved((s) => new Set(s).add(p));
            setResolving(undefined);
            useAppStore.getState().notify('success', `Resolved ${p}`);
          }}
        />
      )}
    </>
  );
}
