import { useCallback, useEffect, useState } from 'react';
import type { AttemptComparison, Comparison } from '../../../contracts';
import { api, errorMessage } from '../api';
import { countOf, formatElapsed, formatTokens, formatUsd } from '../lib/format';
import { useAction } from '../hooks/use-action';
import { useAppStore } from '../stores/app-store';
import { ErrorBanner, StatusBadge } from './common';

/** A report as a file download (a blob URL: nothing leaves the machine). */
function download(name: string, mimeType: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: mimeType }));
  try {
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
  } finally {
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  }
}

function CheckBadge({ check }: { check: AttemptComparison['check'] }) {
  if (!check) return <span className="muted">no check</span>;
  if (check.notRun) return <span className="badge fail" title={check.notRun}>check not run</span>;
  const words = check.passed ? 'check passed' : `check failed (exit ${check.exitCode ?? 'timeout'})`;
  return <span className={`badge ${check.passed ? 'ok' : 'fail'}`} aria-label={words} title={`measured by the host in ${formatElapsed(check.durationMs)}`}>{words}</span>;
}

/**
 * An attempt group side by side (docs/architecture.md §18): the host's check, changes, tokens, cost,
 * wall time, turns and risky files per attempt; each diff one click away; apply one (whole, with the
 * digest of the files shown), after which the others' sandboxes are wiped again and verified gone.
 */
export function CompareScreen({ groupId }: { groupId: string }) {
  const navigate = useAppStore((s) => s.navigate);
  const [c, setC] = useState<Comparison>();
  // Loading, apply and export share one error line.
  const { busy, error, setError, run } = useAction();
  /** The attempt being applied. */
  const [applying, setApplying] = useState<string>();
  const [outcome, setOutcome] = useState<string>();
  const [report, setReport] = useState<string>();
  const load = useCallback(() => {
    api().call('attempts:compare', { groupId }).then(setC, (err: unknown) => setError(errorMessage(err)));
  }, [groupId, setError]);
  useEffect(() => {
    load();
    return api().on('attempts:onDidChange', (e) => {
      if (e.groupId === groupId) load();
    });
  }, [groupId, load]);

  const apply = (runId: string) => run(async () => {
    setApplying(runId);
    try {
      // The digest of the result whose files this view shows: apply refuses anything else.
      const { patchSha256 } = await api().call('diffs:list', { runId });
      if (!patchSha256) throw new Error('This attempt has no result to apply.');
      const r = await api().call('attempts:apply', { groupId, apply: { runId, reviewedSha256: patchSha256 } });
      const gone = r.others.every((o) => o.verified);
      setOutcome(`Applied ${countOf(r.result.applied.length, 'file')}${r.result.conflicts.length ? `; ${countOf(r.result.conflicts.length, 'conflict')} — resolve them in Review` : ''}. Other sandboxes ${gone ? 'verified gone' : `NOT verified gone: ${r.others.flatMap((o) => o.leftovers).join(', ')}`}.`);
      load();
    } finally {
      setApplying(undefined);
    }
  });
  const exportAs = async (format: 'markdown' | 'json') => {
    try {
      const r = await api().call('attempts:export', { groupId, format });
      setReport(r.text);
      download(r.filename, r.mimeType, r.text);
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  if (!c) return error ? <ErrorBanner message={error} /> : <div className="empty" aria-busy="true">Loading…</div>;
  const ended = c.attempts.every((a) => ['done', 'failed', 'cancelled', 'interrupted'].includes(a.status));
  return (
    <>
      <h1>Compare attempts</h1>
      <p className="muted">{c.task.length > 200 ? `${c.task.slice(0, 200)}…` : c.task}<br /><span className="mono">{c.projectDir}</span>{c.check && <> · check <span className="mono">{c.check}</span>, run by the host after each agent's processes were gone</>}</p>
      {error && <ErrorBanner message={error} />}
      {outcome && <div className="banner" role="status" aria-label="Apply result">{outcome}</div>}
      <section className="compare-grid" aria-label="Attempts">
        {c.attempts.map((a) => (
          <article key={a.runId} className="panel compare-card" data-run={a.runId} aria-label={`Attempt ${a.index + 1}: ${a.agent}`}>
            <header className="row" style={{ justifyContent: 'space-between' }}>
              <strong>{a.index + 1}. {a.agent}</strong><StatusBadge status={a.status} />
            </header>
            <div className="mono muted">{a.provider}/{a.model}</div>
            <div style={{ margin: '8px 0' }}><CheckBadge check={a.check} /></div>
            <dl className="compare-facts">
              <dt>Files</dt><dd aria-label="files changed">{a.filesChanged}</dd>
              <dt>Lines</dt><dd>+{a.linesAdded} −{a.linesRemoved}</dd>
              <dt>Tokens</dt><dd>{formatTokens(a.tokens.total)}</dd>
              <dt>Cost</dt><dd>{formatUsd(a.costUsd ?? undefined)}</dd>
              <dt>Wall time</dt><dd>{a.wallMs === null ? '—' : formatElapsed(a.wallMs)}</dd>
              <dt>Turns</dt><dd>{a.turns}</dd>
              <dt>Risky files</dt><dd>{a.riskyFiles.length ? a.riskyFiles.map((r) => <div key={r.path} className="mono" title={r.reason}>{r.path}</div>) : 'none'}</dd>
              <dt>Sandbox</dt><dd>{a.wipeVerified ? 'verified gone' : '—'}</dd>
            </dl>
            {a.error && <div className="muted" title={a.error}>{a.error.slice(0, 160)}</div>}
            <div className="row" style={{ gap: 6 }}>
              <button className="btn small" onClick={() => navigate({ name: 'review', runId: a.runId })} disabled={!a.filesChanged}>Review diff</button>
              <button className="btn small primary" onClick={() => void apply(a.runId)} disabled={!ended || !a.filesChanged || busy || c.chosen !== undefined}>{a.applied ? 'Applied' : applying === a.runId ? 'Applying…' : 'Apply this attempt'}</button>
            </div>
          </article>
        ))}
      </section>
      <div className="row" style={{ gap: 6, marginTop: 12 }}>
        <button className="btn" onClick={() => void exportAs('markdown')}>Export Markdown</button>
        <button className="btn" onClick={() => void exportAs('json')}>Export JSON</button>
      </div>
      {report && <pre className="panel mono" aria-label="Exported report" style={{ whiteSpace: 'pre-wrap', maxHeight: 320, overflow: 'auto' }}>{report}</pre>}
    </>
  );
}
