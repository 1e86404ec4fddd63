import { useEffect, useState } from 'react';
import { checkUnproven, type AttemptComparison } from '../../../contracts';
import { errorMessage } from '../api';
import { formatElapsed, formatTokens, formatUsd } from '../lib/format';
import { useAction } from '../hooks/use-action';
import { useRemote } from '../hooks/use-remote';
import { useAppStore } from '../stores/app-store';
import { useRecordsStore } from '../stores/records-store';
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

function CheckBadge({ attempt }: { attempt: AttemptComparison }) {
  const { check } = attempt;
  if (!check) return <span className="muted">no check</span>;
  if (check.notRun) return <span className="badge fail" title={check.notRun}>check not run</span>;
  if (checkUnproven(attempt)) return <span className="badge warn" aria-label="check passed, unproven" title="The attempt changed files the check reads, so its pass proves nothing">check passed — unproven</span>;
  const words = check.passed ? 'check passed' : `check failed (exit ${check.exitCode ?? 'timeout'})`;
  return <span className={`badge ${check.passed ? 'ok' : 'fail'}`} aria-label={words} title={`measured by the host in ${formatElapsed(check.durationMs)}`}>{words}</span>;
}

/** The attempt's changed files; those the check reads are marked with why. */
function AttemptFiles({ attempt }: { attempt: AttemptComparison }) {
  const why = new Map(attempt.checkFiles.map((f) => [f.path, f.reason]));
  if (attempt.files.length === 0) return <span className="muted">none</span>;
  return (
    <ul className="compare-files" aria-label="Changed files">
      {attempt.files.map((f) => (
        <li key={f.path} className="mono" data-check-file={why.has(f.path) ? '' : undefined}>
          {f.path} <span className="muted">+{f.additions} −{f.deletions}</span>
          {why.has(f.path) && <span className="badge warn" title="The check reads this file">check's own: {why.get(f.path)}</span>}
        </li>
      ))}
      {attempt.filesChanged > attempt.files.length && <li className="muted">…and {attempt.filesChanged - attempt.files.length} more (Review lists them all)</li>}
    </ul>
  );
}

/**
 * An attempt group side by side (docs/architecture.md §18): the host's check (a pass after the attempt
 * changed the check's own files is marked unproven), changed files, tokens, cost, wall time, turns and
 * risky files per attempt. Applying one goes through Review like any run (files, target, the reviewed
 * digest); `attempts:apply` then wipes the others' sandboxes again and verifies them gone.
 */
export function CompareScreen({ groupId }: { groupId: string }) {
  const navigate = useAppStore((s) => s.navigate);
  const { compareAttempts, exportAttempts, onAttemptsChange } = useRecordsStore.getState();
  const { value: c, error: loadError, reload } = useRemote(() => compareAttempts(groupId), [groupId]);
  useEffect(() => onAttemptsChange(groupId, () => void reload()), [groupId, onAttemptsChange, reload]);
  // Loading, apply and export share one error line.
  const { error: actionError, setError } = useAction();
  const error = actionError ?? loadError?.message;
  const [report, setReport] = useState<string>();

  const exportAs = async (format: 'markdown' | 'json') => {
    try {
      const r = await exportAttempts(groupId, format);
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
      {c.chosen && (
        <div className={`banner ${c.chosen.others.every((o) => o.verified) ? 'ok' : 'error'}`} role="status" aria-label="Apply result">
          Applied attempt {(c.attempts.find((a) => a.runId === c.chosen?.runId)?.index ?? 0) + 1}. Other sandboxes {c.chosen.others.every((o) => o.verified) ? 'verified gone' : `NOT verified gone: ${c.chosen.others.flatMap((o) => o.leftovers).join(', ')}`}.
        </div>
      )}
      <section className="compare-grid" aria-label="Attempts">
        {c.attempts.map((a) => (
          <article key={a.runId} className="panel compare-card" data-run={a.runId} aria-label={`Attempt ${a.index + 1}: ${a.agent}`}>
            <header className="row" style={{ justifyContent: 'space-between' }}>
              <strong>{a.index + 1}. {a.agent}</strong><StatusBadge status={a.status} />
            </header>
            <div className="mono muted">{a.provider}/{a.model}</div>
            <div style={{ margin: '8px 0' }}><CheckBadge attempt={a} /></div>
            {checkUnproven(a) && <div className="hint" role="note">This attempt changed what its check reads; read those files in Review before trusting the pass.</div>}
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
            <AttemptFiles attempt={a} />
            {a.error && <div className="muted" title={a.error}>{a.error.slice(0, 160)}</div>}
            <div className="row" style={{ gap: 6 }}>
              {a.applied ? <span className="badge ok">Applied</span> : (
                <button className="btn small primary" onClick={() => navigate({ name: 'review', runId: a.runId })} disabled={!a.filesChanged || (c.chosen !== undefined)}
                  title={ended ? 'Review the diff, choose files and a target, then apply' : 'Every attempt must end before one is applied'}>{ended && c.chosen === undefined ? 'Review and apply' : 'Review diff'}</button>
              )}
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
