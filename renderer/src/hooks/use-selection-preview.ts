import { useEffect, useState } from 'react';
import type { SelectionPatch } from '../../../contracts';
import { api, errorMessage } from '../api';
import { scopeArgs, type ViewScope } from '../stores/diff-store';
import type { SelectionRequest } from './use-review-selection';

/** How long the selection must rest before the host renders its patch (ticking lines in a row sends one call). */
const PREVIEW_DEBOUNCE_MS = 120;

/**
 * The host's rendering of the selection's patch (`diffs:preview`): what the user reviews, and whose
 * digest apply sends back (docs/architecture.md §11). Undefined until it matches the current
 * selection, so apply never sends the digest of an earlier one. An error goes to `onError`.
 */
export function useSelectionPreview({ runId, scope, collected, request, requestKey, onError }: {
  runId: string;
  scope: ViewScope;
  /** The collected result's digest; nothing is previewed before the run is collected. */
  collected: string | undefined;
  request: SelectionRequest;
  requestKey: string;
  onError(message: string): void;
}): SelectionPatch | undefined {
  const [preview, setPreview] = useState<SelectionPatch & { key: string }>();
  useEffect(() => {
    if (!collected || request.files.length === 0) return setPreview(undefined);
    let stale = false;
    const t = setTimeout(() => {
      api().call('diffs:preview', { runId, ...scopeArgs(scope), files: request.files, ...(request.selection.length ? { selection: request.selection } : {}) })
        .then((p) => { if (!stale) setPreview({ ...p, key: requestKey }); })
        .catch((err) => { if (!stale) onError(errorMessage(err)); });
    }, PREVIEW_DEBOUNCE_MS);
    return () => {
      stale = true;
      clearTimeout(t);
    };
  }, [requestKey, collected, runId, scope, request, onError]);
  return preview?.key === requestKey ? preview : undefined;
}
