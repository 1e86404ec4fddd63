import { useEffect, useState } from 'react';
import type { ErrorInfo, ExcludedPreview } from '../../../contracts';
import { api, errorInfo } from '../api';

/** How long the typed folder must rest before the host reads it. */
const PREVIEW_DEBOUNCE_MS = 400;

/**
 * Which files of the project folder stay out of the sandbox (`runs:previewExcluded`), read as the
 * user types; a folder that does not exist comes back as an error on the `projectDir` field.
 */
export function useExcludedPreview(projectDir: string): { preview: ExcludedPreview | undefined; error: ErrorInfo | undefined } {
  const [preview, setPreview] = useState<ExcludedPreview>();
  const [error, setError] = useState<ErrorInfo>();
  useEffect(() => {
    const dir = projectDir.trim();
    if (!dir) {
      setPreview(undefined);
      setError(undefined);
      return;
    }
    let stale = false;
    const t = setTimeout(() => {
      api().call('runs:previewExcluded', { projectDir: dir }).then(
        (p) => { if (!stale) { setPreview(p); setError(undefined); } },
        (err) => { if (!stale) { setPreview(undefined); setError(errorInfo(err)); } },
      );
    }, PREVIEW_DEBOUNCE_MS);
    return () => { stale = true; clearTimeout(t); };
  }, [projectDir]);
  return { preview, error };
}
