import { useState } from 'react';
import type { DebugNote } from '../../../contracts/sandboxes';
import { errorMessage } from '../api';
import { useRecordsStore } from '../stores/records-store';

/**
 * The errors Airlock handled by itself (best-effort steps that failed, core/common/debug-log.ts),
 * loaded when opened: what `airlock --debug` prints, for a user reporting a problem.
 */
export function DebugLogPanel() {
  const [notes, setNotes] = useState<DebugNote[]>();
  const [error, setError] = useState<string>();
  const load = async () => {
    try {
      setNotes(await useRecordsStore.getState().debugLog());
      setError(undefined);
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  return (
    <details className="panel" aria-label="Debug log" onToggle={(e) => { if ((e.currentTarget as HTMLDetailsElement).open) void load(); }}>
      <summary><b>Debug log</b> <span className="muted">— errors Airlock handled by itself (the CLI prints them with --debug)</span></summary>
      {error && <div className="fix">{error}</div>}
      {notes && notes.length === 0 && <div className="empty">Nothing so far.</div>}
      {notes && notes.length > 0 && (
        <ol className="mono debug-log">
          {notes.map((n, i) => <li key={i}><span className="muted">{n.at}</span> {n.where}: {n.message}</li>)}
        </ol>
      )}
    </details>
  );
}
