import { useEffect, useMemo, useState } from 'react';
import type { ApplyResult, ChangeScope } from '../../../contracts';
import { api, errorMessage } from '../api';
import { defaultSelection, orderForReview } from '../lib/file-tree';
import { useAppStore } from '../stores/app-store';
import { useDiffStore, viewKey } from '../stores/diff-store';
import { useRunsStore } from '../stores/runs-store';
import { appliedText, ErrorBanner } from './common';
import { DiffViewer } from './diff-viewer';

/**
 * Review & apply: risky files (CI, hooks, lifecycle scripts, IDE tasks, agent config, rc files,
 * Makefiles) first with their reason and not pre-selected; apply to the working tree or a new
 * branch, or export a patch; conflicts are listed and left untouched.
 */
export function ReviewScreen({ runId }: { runId: string }) {
  const run = useRunsStore((s) => s.runs[runId]);
  // A follow-up turn: its own change, or the whole thread's up to it (docs/architecture.md §15).
  const [scope, setScope] = useState<ChangeScope>('turn');
  const files = useDiffStore((s) => s.files[viewKey(runId, scope)]);
  const reviewedSha256 = useDiffStore((s) => s.patchSha256[viewKey(runId, scope)]);
  const navigate = useAppStore((s) => s.navigate);
  const ordered = useMemo(() => orderForReview(files ?? []), [files]);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [focused, setFocused] = useState<string>();
  const [mode, setMode] = useState<'working-tree' | 'branch'>('working-tree');
  const [branch, setBranch] = useState(`airlock/${runId.slice(-8)}`);
  const [message, setMessage] = useState<string>();
  const [suggested, setSuggested] = useState<string>();
  const [result, setResult] = useState<ApplyResult>();
  const [patch, setPatch] = useState<string>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    if (!run) void useRunsStore.getState().open(runId).catch((err) => setError(errorMessage(err)));
    useDiffStore.getState().load(runId, scope).catch((err) => setError(errorMessage(err)));
  }, [runId, run, scope]);
  useEffect(() => {
    setSelected(defaultSelection(files ?? []));
  }, [files]);

  const toggle = (path: string) => setSelected((s) => {
    const next = new Set(s);
    if (next.has(path)) next.delete(path);
    else next.add(path);
    return next;
  });
  const risky = ordered.filter((f) => f.risky);

  const apply = async () => {
    setBusy(true);
    setError(undefined);
    setSuggested(undefined);
    // A new apply starts: the previous outcome no longer describes the project.
    setResult(undefined);
    try {
      // The digest of the result this list shows: the host refuses to apply anything else.
      if (!reviewedSha256) throw new Error('The result is not collected yet; apply once the run has ended.');
      const commitMessage = (message ?? run?.task ?? '').trim();
      const r = await api().call('diffs:apply', {
        runId, scope, files: [...selected], mode, reviewedSha256,
        ...(mode === 'branch' ? { branch, ...(commitMessage ? { message: commitMessage } : {}) } : {}),
      });
      setResult(r);
      // The run record now says where it was applied.
      void useRunsStore.getState().open(runId).catch(() => undefined);
      useAppStore.getState().notify(r.conflicts.length ? 'error' : 'success', `Applied ${r.applied.length} file(s)${r.conflicts.length ? `, ${r.conflicts.length} conflict(s) left untouched` : ''}`);
    } catch (err) {
      const text = errorMessage(err);
      setError(text);
      // The host names a free branch when the chosen one exists: offer it.
      const free = /already exists.*such as '([^']+)'/.exec(text)?.[1];
      if (free) setSuggested(free);
    } finally {
      setBusy(false);
    }
  };
  const exportPatch = async () => {
    try {
      const r = await api().call('diffs:exportPatch', { runId, scope, files: [...selected] });
      setPatch(r.path);
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  const row = (f: (typeof ordered)[number]) => (
    <div className={`file-row ${f.risky ? 'risky' : ''}`} key={f.path} data-path={f.path}>
      <input type="checkbox" aria-label={`apply ${f.path}`} checked={selected.has(f.path)} onChange={() => toggle(f.path)} />
      <button className="tree-file" style={{ width: 'auto', flex: 1 }} aria-selected={focused === f.path} onClick={() => setFocused(f.path)}>
        <span className={`st ${f.status}`}>{f.status[0]?.toUpperCase()}</span>
        <span className="mono">{f.oldPath ? `${f.oldPath} → ` : ''}{f.path}</span>
        {f.modeChange && <span className="badge">{f.modeChange}</span>}
        <span className="counts">{f.binary ? 'binary' : <><span className="add-n">+{f.additions}</span> <span className="del-n">-{f.deletions}</span></>}</span>
      </button>
      {f.risky && <span className="risk-reason">{f.risky}</span>}
    </div>
  );

  return (
    <>
      <div className="row spread">
        <h1>Review &amp; apply</h1>
        <button className="btn" onClick={() => navigate({ name: 'run', runId })}>Back to run</button>
      </div>
      {run && <div className="muted">{run.task} · <span className="mono">{run.projectDir}</span></div>}
      {run?.applied && <div className="muted" aria-label="Applied status">{appliedText(run.applied)}</div>}
      {run?.thread && (
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
      <section className="panel" aria-label="Files to apply">
        <div className="row spread" style={{ marginBottom: 6 }}>
          <h2 style={{ margin: 0 }}>{selected.size} of {ordered.length} files selected</h2>
          <div className="row">
            <button className="btn small" onClick={() => setSelected(new Set(ordered.map((f) => f.path)))}>Select all</button>
            <button className="btn small" onClick={() => setSelected(new Set())}>Select none</button>
          </div>
        </div>
        {ordered.length === 0 && <div className="empty">This run changed no files.</div>}
        {ordered.map(row)}
      </section>
      <section className="panel stack" aria-label="Apply">
        <div className="row" role="radiogroup" aria-label="Apply to">
          <label className="row"><input type="radio" name="mode" checked={mode === 'working-tree'} onChange={() => setMode('working-tree')} /> Working tree (uncommitted changes)</label>
          <label className="row"><input type="radio" name="mode" checked={mode === 'branch'} onChange={() => setMode('branch')} /> New branch with a commit</label>
          {mode === 'branch' && <input type="text" aria-label="Branch name" value={branch} onChange={(e) => setBranch(e.target.value)} />}
          {suggested && mode === 'branch' && <button className="btn small" onClick={() => { setBranch(suggested); setSuggested(undefined); setError(undefined); }}>Use {suggested}</button>}
        </div>
        {mode === 'branch' && (
          <label className="stack">
            <span className="muted">Commit message (first line is the subject)</span>
            <textarea aria-label="Commit message" rows={3} value={message ?? run?.task ?? ''} onChange={(e) => setMessage(e.target.value)} />
          </label>
        )}
        <div className="row">
          <button className="btn primary" onClick={() => void apply()} disabled={busy || selected.size === 0 || !reviewedSha256}>{busy ? 'Applying…' : `Apply ${selected.size} file(s)`}</button>
          <button className="btn" onClick={() => void exportPatch()} disabled={selected.size === 0}>Export patch</button>
          {patch && <span className="mono" role="status">Patch written to {patch}</span>}
        </div>
        {result && (
          <div className="stack" role="status" aria-label="Apply result">
            <div className="add-n">Applied {result.applied.length} file(s){result.branch ? ` on branch ${result.branch}` : ''}{result.commit ? ` (${result.commit.slice(0, 10)})` : ''}{result.author ? ` as ${result.author}` : ''}.</div>
            {result.authorFallback && <div className="banner" role="note">git has no user.name/user.email for this project, so the commit is authored by Airlock. Set them with <span className="mono">git config user.name</span> / <span className="mono">user.email</span> to author it yourself.</div>}
            {result.conflicts.length > 0 && (
              <div className="banner error">
                <b>{result.conflicts.length} file(s) not applied</b> because your project changed under them. Nothing of yours was overwritten; resolve them from the exported patch.
                <ul>{result.conflicts.map((c) => <li key={c.path}><span className="mono">{c.path}</span> — {c.reason}</li>)}</ul>
              </div>
            )}
          </div>
        )}
      </section>
      {focused && <section className="panel" style={{ minHeight: 300, display: 'flex' }}><DiffViewer runId={runId} path={focused} scope={scope} /></section>}
    </>
  );
}
