import { useCallback, useEffect, useRef, useState, type DependencyList } from 'react';
import type { ErrorInfo } from '../../../contracts';
import { errorInfo } from '../api';

/** A value the host answers, with the last failure to read it. */
export interface Remote<T> {
  value?: T;
  /** The last failure; a later success clears it. */
  error?: ErrorInfo;
  /** Reads again now (after an action changed what the host would answer). */
  reload(): Promise<void>;
}

/**
 * Reads `load()` whenever `deps` change, and on `reload()`. An answer to an earlier read is
 * dropped, so a quick switch never shows the previous item's data, and nothing is set after
 * unmount. `reset` clears the value at each change of `deps` (else it stays until the new answer).
 * The load functions come from the stores: components never call the host themselves
 * (docs/architecture.md §5).
 */
export function useRemote<T>(load: () => Promise<T>, deps: DependencyList, opts: { reset?: boolean } = {}): Remote<T> {
  const [state, setState] = useState<{ value?: T; error?: ErrorInfo }>({});
  const generation = useRef(0);
  const latest = useRef(load);
  latest.current = load;
  const reload = useCallback(async () => {
    const mine = ++generation.current;
    try {
      const value = await latest.current();
      if (mine === generation.current) setState({ value });
    } catch (err) {
      if (mine === generation.current) setState((s) => ({ ...s, error: errorInfo(err) }));
    }
  }, []);
  useEffect(() => {
    if (opts.reset) setState({});
    void reload();
    return () => {
      generation.current++;
    };
  }, deps);
  return { ...state, reload };
}
