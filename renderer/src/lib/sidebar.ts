import { useCallback, useState } from 'react';

/** Where the sidebar's state is remembered (per origin: the app's, or `airlock serve`'s stable port). */
export const SIDEBAR_KEY = 'airlock.sidebar';

/** Narrower than this and nothing remembered: the sidebar starts collapsed, so an 800×600 window has room. */
export const COLLAPSE_BELOW_PX = 960;

function read(): boolean {
  try {
    const saved = globalThis.localStorage?.getItem(SIDEBAR_KEY);
    if (saved === 'collapsed') return true;
    if (saved === 'expanded') return false;
  } catch {
    // Storage refused (a locked-down profile): fall back to the window's width.
  }
  return typeof window !== 'undefined' && window.innerWidth < COLLAPSE_BELOW_PX;
}

/** Whether the sidebar is collapsed, and a toggle that remembers the choice. */
export function useSidebarCollapsed(): [boolean, () => void] {
  const [collapsed, setCollapsed] = useState(read);
  const toggle = useCallback(() => {
    setCollapsed((c) => {
      try {
        globalThis.localStorage?.setItem(SIDEBAR_KEY, c ? 'expanded' : 'collapsed');
      } catch {
        // Not remembered, still toggled.
      }
      return !c;
    });
  }, []);
  return [collapsed, toggle];
}
