import { useEffect, useState, type ReactNode } from 'react';
import type { RunStatus } from '../../../contracts';

export function StatusBadge({ status }: { status: RunStatus | 'ok' | 'warn' | 'fail' | 'skipped' }) {
  return <span className={`badge ${status}`}>{status}</span>;
}

export function ErrorBanner({ message }: { message?: string }) {
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
