import { useEffect, useState } from 'react';
import { isFinalStatus } from '../../../contracts';
import { errorMessage } from '../api';
import { costUnknownWhy, formatTime, formatUsd } from '../lib/format';
import { useAppStore } from '../stores/app-store';
import { runAgain } from '../stores/new-run-form-store';
import { useRunsStore } from '../stores/runs-store';
import { threadRows } from '../lib/threads';
import { appliedText, StatusBadge } from './common';

/** Past and current runs; open one to replay it. */
export function HistoryScreen() {
  const { runs, order, loaded, load } = useRunsStore();
  const navigate = useAppStore((s) => s.navigate);
  // Deleting removes the run's record and its audit log: the Delete button asks first, in place.
  const [confirming, setConfirming] = useState<string | undefined>();
  const remove = (runId: string): void => {
    setConfirming(undefined);
    void useRunsStore.getState().remove(runId).catch((err) => useAppStore.getState().notify('error', errorMessage(err)));
  };
  useEffect(() => {
    void load().catch((err) => useAppStore.getState().notify('error', errorMessage(err)));
  }, [load]);
  const list = order.map((id) => runs[id]).filter((r) => r !== undefined);
  const rows = threadRows(list);
  return (
    <>
      <h1>History</h1>
      <section className="panel">
        {loaded && list.length === 0 && <div className="empty">No runs yet.</div>}
        {list.length > 0 && (
          <table aria-label="Runs" className="runs-table">
            <thead><tr><th>Status</th><th>Task</th><th>Agent</th><th>Model</th><th>Cost</th><th>Files</th><th>Started</th><th /></tr></thead>
            <tbody>
              {rows.map(({ run: r, depth, followUps, fork }) => (
                <tr key={r.id} className="clickable" tabIndex={0} data-run={r.id} data-thread={r.thread?.rootRunId ?? (followUps ? r.id : undefined)}
                  onClick={() => navigate({ name: 'run', runId: r.id })}
                  onKeyDown={(e) => { if (e.key === 'Enter') navigate({ name: 'run', runId: r.id }); }}>
                  <td className="c-status"><StatusBadge status={r.status} />{r.applied && <div className="badge" title={appliedText(r.applied)} aria-label={appliedText(r.applied)}>{r.applied.branch ? `applied → ${r.applied.branch}` : 'applied'}</div>}</td>
                  <td className="c-task" style={depth ? { paddingLeft: 24 } : undefined}>
                    {r.thread && <span className="badge" title={`follows up ${r.thread.parentRunId}${r.thread.conversation === 'fresh' ? ', fresh conversation' : ''}`}>↳ turn {r.thread.turn}</span>}{' '}
                    {fork && <span className="badge warn" aria-label="Fork" title={`A fork: ${fork.checkpoint !== undefined ? `follows up checkpoint ${fork.checkpoint} of ${fork.parentRunId}` : `a second follow-up to ${fork.parentRunId}`}; the other branch stays as it is`}>fork{fork.checkpoint !== undefined ? ` from checkpoint ${fork.checkpoint}` : ''}</span>}{' '}
                    {followUps > 0 && <span className="badge">thread · {followUps + 1} turns</span>}{' '}
                    {r.attempt && <button className="btn small" title="This run is one attempt of a group: compare them side by side" aria-label={`Compare attempts of ${r.attempt.groupId}`}
                      onClick={(e) => { e.stopPropagation(); if (r.attempt) navigate({ name: 'compare', groupId: r.attempt.groupId }); }}>attempt {r.attempt.index + 1} · Compare</button>}{' '}
                    {r.check && <span className={`badge ${r.check.passed ? 'ok' : 'fail'}`}>check {r.check.passed ? 'passed' : 'failed'}</span>}{' '}
                    {r.task.length > 80 ? `${r.task.slice(0, 80)}…` : r.task}<div className="muted mono" style={{ fontSize: 11 }}>{r.projectDir}</div></td>
                  <td data-label="Agent">{r.agent}</td>
                  <td data-label="Model" className="mono">{r.provider}/{r.model}</td>
                  <td data-label="Cost" className="mono" title={r.usage.costUsd === undefined ? costUnknownWhy(r.model) : undefined}>{formatUsd(r.usage.costUsd)}</td>
                  <td data-label="Files">{r.changedFiles}</td>
                  <td data-label="Started">{formatTime(r.createdAt)}</td>
                  <td className="c-actions">
                    {isFinalStatus(r.status) && confirming !== r.id && (
                      <span className="row" style={{ gap: 6, flexWrap: 'nowrap' }}>
                        {/* An MCP session's "task" is the client's session, not a task an agent could run again. */}
                        {r.agent !== 'mcp' && <button className="btn small" title="Open the New run form filled with this run's settings"
                          onClick={(e) => { e.stopPropagation(); void runAgain(r.id).catch((err) => useAppStore.getState().notify('error', errorMessage(err))); }}>Run again</button>}
                        <button className="btn small danger" onClick={(e) => { e.stopPropagation(); setConfirming(r.id); }}>Delete</button>
                      </span>
                    )}
                    {isFinalStatus(r.status) && confirming === r.id && (
                      <span role="group" aria-label="Confirm delete" className="row" style={{ gap: 6 }} onClick={(e) => e.stopPropagation()} onKeyDown={(e) => e.stopPropagation()}>
                        <span className="muted">Delete this run and its audit log? This cannot be undone.</span>
                        <button className="btn small danger" onClick={() => remove(r.id)}>Delete run</button>
                        <button className="btn small" autoFocus onClick={() => setConfirming(undefined)}>Keep</button>
                      </span>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  );
}
