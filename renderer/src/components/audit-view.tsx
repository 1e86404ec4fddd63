import { Fragment, useState, type ReactNode } from 'react';
import type { AuditRecordView, AuditVerifyResult } from '../../../contracts';
import { useRemote } from '../hooks/use-remote';
import { describeAuditRecord } from '../lib/audit-summary';
import { useAppStore } from '../stores/app-store';
import { useRecordsStore } from '../stores/records-store';
import { ErrorBanner } from './common';

/** Audit times to the second: records often come many to a minute. */
function recordTime(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export interface AuditLogState {
  verify?: AuditVerifyResult;
  records?: AuditRecordView[];
  total?: number;
  error?: string;
}

/** A run's audit log (and apply log) with the verification of its hash chain, re-read when `refreshKey` changes. */
export function useAuditLog(runId: string, refreshKey?: unknown): AuditLogState {
  const read = useRecordsStore((s) => s.readAuditLog);
  const { value, error } = useRemote(() => read(runId), [runId, refreshKey]);
  return { ...value, ...(error ? { error: error.message } : {}) };
}

/** The verdict on a run's audit log, prominent: verified, or broken at record N and why. */
export function AuditVerdict({ verify, error, children }: { verify?: AuditVerifyResult; error?: string; children?: ReactNode }) {
  if (error) return <div className="verify broken" role="status"><b>Audit log could not be checked.</b> {error}{children}</div>;
  if (!verify) return <div className="verify" role="status"><span className="muted">Checking the audit log…</span>{children}</div>;
  if (verify.intact) {
    return (
      <div className="verify ok" role="status" aria-label="Audit log verified">
        <b className="add-n">✓ Audit log verified</b>
        <span className="muted">{verify.records} records, hash chain intact{verify.applies ? `; ${verify.applies} apply record(s) chained from the seal` : ''}</span>
        {children}
      </div>
    );
  }
  const at = verify.firstBroken;
  return (
    <div className="verify broken" role="alert" aria-label="Audit log broken">
      <b className="del-n">✗ Audit log broken at {at?.log === 'apply' ? 'apply record' : 'record'} {at?.index}</b>
      <span>{at?.reason}. Records from there on cannot be trusted.</span>
      {children}
    </div>
  );
}

/** The run's hash-chained audit log, readable: one sentence per record, the raw record on demand. */
export function AuditView({ runId }: { runId: string }) {
  const navigate = useAppStore((s) => s.navigate);
  const { verify, records, total, error } = useAuditLog(runId);
  const [open, setOpen] = useState<number>();
  const broken = verify && !verify.intact && verify.firstBroken?.log !== 'apply' ? verify.firstBroken?.index : undefined;
  return (
    <>
      <div className="row spread">
        <h1>Audit log</h1>
        <button className="btn" onClick={() => navigate({ name: 'run', runId })}>Back to the run</button>
      </div>
      <div className="muted mono">{runId}</div>
      <AuditVerdict verify={verify} error={error} />
      <ErrorBanner message={error} />
      <p className="muted" style={{ margin: 0 }}>
        Airlock appends a record for everything the host did or saw in this run; each record carries the hash of the one before it, so a record changed, removed or added afterwards breaks the chain.
        {total !== undefined && records && total > records.length && ` Showing the first ${records.length} of ${total} records.`}
      </p>
      <section className="panel" aria-label="Audit records">
        {!records && !error && <div className="empty">Loading…</div>}
        {records && (
          <table className="audit-table">
            <thead><tr><th>#</th><th>Time</th><th>What</th><th>Hash</th></tr></thead>
            <tbody>
              {records.map((r, i) => (
                <Fragment key={`${r.index}-${i}`}>
                  <tr className={`clickable ${broken !== undefined && r.index >= broken ? 'broken-row' : ''}`} data-type={r.type} onClick={() => setOpen(open === i ? undefined : i)}>
                    <td className="mono">{r.index}</td>
                    <td className="mono" style={{ whiteSpace: 'nowrap' }}>{recordTime(r.at)}</td>
                    <td><span className="badge" style={{ marginRight: 6 }}>{r.type}</span>{describeAuditRecord(r)}</td>
                    <td className="mono muted" title={r.hash}>{r.hash.slice(0, 12)}…</td>
                  </tr>
                  {open === i && (
                    <tr><td /><td colSpan={3}><pre className="mono">{JSON.stringify(r.data, null, 2)}</pre></td></tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </>
  );
}
