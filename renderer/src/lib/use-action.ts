import { useCallback, useRef, useState } from 'react';
import { errorMessage } from '../api';

/** A button's action: whether it runs, and the error it last ended with (its message). */
export interface Action {
  busy: boolean;
  error: string | undefined;
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
  const [error, setError] = useState<string>();
  const running = useRef(false);
  const run = useCallback(async (work: () => Promise<void>, onError?: (err: unknown) => boolean | Promise<boolean>) => {
    if (running.current) return;
    running.current = true;
    setBusy(true);
    setError(undefined);
    try {
      await work();
    } catch (err) {
      if (!(await onError?.(err))) setError(errorMessage(err));
    } finally {
      running.current = false;
      setBusy(false);
    }
  }, []);
  return { busy, error, setError, run };
}
