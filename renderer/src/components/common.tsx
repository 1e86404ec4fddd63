import { useEffect, useState, type ReactNode } from 'react';
import { ERROR_ACTION_LABEL, describeError, type ErrorAction, type ErrorInfo, type RunApplied, type RunStatus } from '../../../contracts';
import { useAppStore } from '../stores/app-store';
import { useKeysStore } from '../stores/keys-store';
import { countOf, formatTime } from '../lib/format';

export function StatusBadge({ status }: { status: RunStatus | 'ok' | 'warn' | 'fail' | 'skipped' }) {
  return <span className={`badge ${status}`}>{status}</span>;
}

/** Runs an error's action: each opens the screen where the fix is made. */
export function runErrorAction(action: ErrorAction, provider?: string): void {
  const { navigate } = useAppStore.getState();
  if (action === 'replace-key' || action === 'add-key' || action === 'open-keys') navigate({ name: 'keys' });
  else if (action === 'test-connection') {
    navigate({ name: 'keys' });
    if (provider) void useKeysStore.getState().testKey(provider);
  }
  else if (action === 'open-setup-check') navigate({ name: 'doctor' });
  else {
    navigate({ name: 'new' });
    // The form may still be mounting: focus its folder field once it is there.
    setTimeout(() => document.getElementById('r-project')?.focus(), 0);
  }
}

/**
 * An error in plain words (contracts/error-help.ts): a title, the message and buttons for the fix.
 * A plain string is shown as it is (messages from the UI itself).
 */
export function ErrorBanner({ message, error, provider }: { message?: string; error?: ErrorInfo; provider?: string }) {
  if (error) {
    const help = describeError(error);
    return (
      <div className="banner error" role="alert">
        <b>{help.title}.</b> {help.message}
        {help.actions.length > 0 && (
          <span className="row" style={{ display: 'inline-flex', gap: 8, marginLeft: 8 }}>
            {help.actions.map((a) => <button key={a} className="btn small" onClick={() => runErrorAction(a, provider)}>{ERROR_ACTION_LABEL[a]}</button>)}
          </span>
        )}
      </div>
    );
  }
  if (!message) return null;
  return <div className="banner error" role="alert">{message}</div>;
}

/** Re-renders every second while `active` (elapsed timers). */
export function useNow(active: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [active]);
  return now;
}

export function Field({ label, htmlFor, children }: { label: string; htmlFor: string; children: ReactNode }) {
  return (
    <>
      <label htmlFor={htmlFor}>{label}</label>
      <div>{children}</div>
    </>
  );
}

/** Where and when a run's result was applied: a branch of the project, or its working tree. */
export function appliedText(applied: RunApplied): string {
  const where = applied.branch ? `to branch ${applied.branch}` : 'to the working tree';
  return `Applied ${where} of ${applied.target} (${countOf(applied.files.length, 'file')}, ${formatTime(applied.at)})`;
}

/**
 * Asks before something that cannot be undone, in place: the question, the action and a way back.
 * The way back has the focus, so a stray Enter keeps things as they are.
 */
export function ConfirmInline({ label, question, confirm, cancel, onConfirm, onCancel }: {
  /** The group's accessible name, e.g. "Confirm remove key". */
  label: string;
  question: ReactNode;
  confirm: string;
  cancel: string;
  onConfirm(): void;
  onCancel(): void;
}) {
  return (
    <span role="group" aria-label={label} className="row confirm-inline" style={{ gap: 6, flexWrap: 'wrap' }} onClick={(e) => e.stopPropagation()} onKeyDown={(e) => { e.stopPropagation(); if (e.key === 'Escape') onCancel(); }}>
      <span className="muted">{question}</span>
      <button className="btn small danger" onClick={onConfirm}>{confirm}</button>
      <button className="btn small" autoFocus onClick={onCancel}>{cancel}</button>
    </span>
  );
}
