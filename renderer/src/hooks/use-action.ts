import { useCallback, useRef, useState } from 'react';
import type { ErrorInfo } from '../../../contracts';
import { errorInfo } from '../api';

/** A button's action: whether it runs, and the error it last ended with. */
export interface Action {
  busy: boolean;
  /** The last error's message (what a plain banner or a field's line shows). */
  error: string | undefined;
  /**
   * The last error as the host typed it (kind, field, suggestion), for ErrorBanner's title and fix
   * buttons; an error of the UI itself, or a message set with `setError`, is `INTERNAL`.
   */
  failure: ErrorInfo | undefined;
  setError: (message: string | undefined) => void;
  /**
   * Runs `work` unless it is already running: busy while it runs, the error cleared first and set
   * from what it throws, unless `onError` takes it (return true). Resolves when done; never throws.
   */
  run: (work: () => Promise<void>, onError?: (err: unknown) => boolean | Promise<boolean>) => Promise<void>;
}

/** The busy / error pattern of every form and button that calls the host, written once. */
export function useAction(): Action {
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<ErrorInfo>();
  const running = useRef(false);
  const setError = useCallback((message: string | undefined) => setFailure(message === undefined ? undefined : { kind: 'INTERNAL', message }), []);
  const run = useCallback(async (work: () => Promise<void>, onError?: (err: unknown) => boolean | Promise<boolean>) => {
    if (running.current) return;
    running.current = true;
    setBusy(true);
    setFailure(undefined);
    try {
      await work();
    } catch (err) {
      if (!(await onError?.(err))) setFailure(errorInfo(err));
    } finally {
      running.current = false;
      setBusy(false);
    }
  }, []);
  return { busy, error: failure?.message, failure, setError, run };
}
