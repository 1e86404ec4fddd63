import { useEffect } from 'react';
import { useDoctorStore } from '../stores/doctor-store';
import { useAppStore } from '../stores/app-store';
import { ErrorBanner, StatusBadge } from './common';
import { DebugLogPanel } from './debug-log-panel';

/** First run / doctor: readiness checks, each failure with its fix, and the image build. */
export function DoctorScreen() {
  const { report, checking, building, progress, error, check, buildImage } = useDoctorStore();
  const navigate = useAppStore((s) => s.navigate);
  // Checks can pass with no key stored, but no run can then call a model: not "Ready".
  const needsKey = report?.checks.some((c) => c.fixAction === 'add-key' && c.status === 'warn') ?? false;
  useEffect(() => {
    void check();
  }, [check]);

  return (
    <>
      <div className="row spread">
        <h1>Setup check</h1>
        <button className="btn" onClick={() => void check()} disabled={checking || building}>{checking ? 'Checking…' : 'Check again'}</button>
      </div>
      <ErrorBanner message={error} />
      {report && (
        <div className={`banner ${!report.ready ? 'error' : needsKey ? '' : 'ok'}`} role="status">
          {!report.ready ? 'Not ready yet: fix the failed checks below.' : needsKey ? 'Almost ready: runs need a provider key.' : 'Ready: runs can start.'}
          {report.ready && needsKey && (
            <button className="btn small primary" style={{ marginLeft: 12 }} onClick={() => navigate({ name: 'keys' })}>Add key</button>
          )}
          {report.ready && !needsKey && (
            <button className="btn small primary" style={{ marginLeft: 12 }} onClick={() => navigate({ name: 'new' })}>Start a run</button>
          )}
        </div>
      )}
      <section className="panel" aria-label="Checks">
        {!report && <div className="empty">{checking ? 'Checking your machine…' : 'No results yet.'}</div>}
        {report?.checks.map((c) => (
          <div className="check" key={c.id} data-check={c.id}>
            <div><StatusBadge status={c.status} /></div>
            <div className="stack" style={{ gap: 4 }}>
              <div><b>{c.label}</b> <span className="muted">— {c.detail}</span></div>
              {c.status !== 'ok' && c.fix && <div className="fix"><b>Fix:</b> {c.fix}</div>}
              {(c.fixAction === 'add-key' || c.fixAction === 'replace-key' || c.fixAction === 'open-keys') && c.status !== 'ok' && (
                // A key that exists but was refused is replaced, not added (polish list).
                <div className="row"><button className="btn" onClick={() => navigate({ name: 'keys' })}>{c.fixAction === 'add-key' ? 'Add key' : c.fixAction === 'replace-key' ? 'Replace key' : 'Open Keys'}</button></div>
              )}
              {c.fixAction === 'build-image' && c.status !== 'ok' && (
                <div className="row">
                  <button className="btn primary" onClick={() => void buildImage()} disabled={building}>{building ? 'Building…' : 'Build the sandbox image'}</button>
                </div>
              )}
            </div>
          </div>
        ))}
      </section>
      {(building || (progress && progress.phase !== 'done')) && progress && (
        <section className="panel stack" aria-label="Image build">
          <div className="row spread"><b>Building the sandbox image</b><span className="muted">{progress.phase}</span></div>
          <progress max={1} value={progress.fraction ?? undefined} aria-label="Image build progress" />
          <div className="mono muted">{progress.message}</div>
        </section>
      )}
      <DebugLogPanel />
    </>
  );
}
