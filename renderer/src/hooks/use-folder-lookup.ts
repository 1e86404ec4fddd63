import { useEffect, useRef, useState } from 'react';
import type { ErrorInfo } from '../../../contracts';
import { errorInfo } from '../api';

/** How long the typed folder must rest before the host reads it. */
const LOOKUP_DEBOUNCE_MS = 400;

/**
 * Something the host reads from the project folder the user is typing (the exclusions preview, the
 * environments found): asked once the folder has rested, answers for an older folder dropped, and
 * nothing asked while the folder is empty. `key` names everything else the answer depends on. Asked
 * again when the window comes back into focus: the user may have changed the project meanwhile (added a
 * devcontainer in their editor), and the folder's text alone would not say so.
 */
export function useFolderLookup<T>(projectDir: string, load: (dir: string) => Promise<T>, key = ''): { value: T | undefined; error: ErrorInfo | undefined } {
  const [value, setValue] = useState<T>();
  const [error, setError] = useState<ErrorInfo>();
  // The latest loader, without making a new closure per render restart the debounce.
  const loader = useRef(load);
  loader.current = load;
  const [returns, setReturns] = useState(0);
  useEffect(() => {
    const again = () => { if (document.visibilityState !== 'hidden') setReturns((n) => n + 1); };
    window.addEventListener('focus', again);
    document.addEventListener('visibilitychange', again);
    return () => {
      window.removeEventListener('focus', again);
      document.removeEventListener('visibilitychange', again);
    };
  }, []);
  useEffect(() => {
    const dir = projectDir.trim();
    if (!dir) {
      setValue(undefined);
      setError(undefined);
      return;
    }
    let stale = false;
    const t = setTimeout(() => {
      loader.current(dir).then(
        (v) => { if (!stale) { setValue(v); setError(undefined); } },
        (err) => { if (!stale) { setValue(undefined); setError(errorInfo(err)); } },
      );
    }, LOOKUP_DEBOUNCE_MS);
    return () => { stale = true; clearTimeout(t); };
  }, [projectDir, key, returns]);
  return { value, error };
}
