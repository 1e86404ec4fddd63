import type { ReactElement } from 'react';

/** Stroke icons for the collapsed sidebar, drawn inline so they never depend on the system's fonts. */
const PATHS: Record<string, string> = {
  new: 'M10 4v12M4 10h12',
  history: 'M4 5h12M4 10h12M4 15h12',
  keys: 'M8 12a3.5 3.5 0 1 1 2.5-1l5.5 5.5M13.5 14l1.5-1.5M12 12.5l1.5-1.5',
  doctor: 'M4.5 10.5l3.5 3.5 7.5-8',
  settings: 'M10 7a3 3 0 1 0 0 6 3 3 0 0 0 0-6zM10 2v3M10 15v3M2 10h3M15 10h3M4.3 4.3l2.1 2.1M13.6 13.6l2.1 2.1M4.3 15.7l2.1-2.1M13.6 6.4l2.1-2.1',
  run: 'M7 5l8 5-8 5z',
};

/** The icon of a screen (or a running run), or `fallback` (a letter) for a screen with none. */
export function NavIcon({ name, fallback }: { name: string; fallback: string }): ReactElement {
  const d = PATHS[name];
  if (!d) return <>{fallback}</>;
  return (
    <svg width="18" height="18" viewBox="0 0 20 20" fill="none" stroke="currentColor" strokeWidth="1.7" strokeLinecap="round" strokeLinejoin="round" aria-hidden focusable="false">
      <path d={d} />
    </svg>
  );
}
