// @vitest-environment jsdom
import { act, renderHook } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../api';
import { useAction } from './use-action';

describe('useAction (the busy / error pattern, once)', () => {
  it('is busy while the work runs, ignores a second start, and keeps the error message', async () => {
    const { result } = renderHook(() => useAction());
    let release!: () => void;
    let runs = 0;
    let first!: Promise<void>;
    act(() => {
      first = result.current.run(() => new Promise<void>((r) => { runs++; release = r; }));
    });
    expect(result.current.busy).toBe(true);
    await act(() => result.current.run(async () => { runs++; }));
    expect(runs).toBe(1);
    await act(async () => { release(); await first; });
    expect(result.current.busy).toBe(false);
    await act(() => result.current.run(() => Promise.reject(new Error('the engine did not answer'))));
    expect(result.current.error).toBe('the engine did not answer');
    await act(() => result.current.run(async () => undefined));
    expect(result.current.error).toBeUndefined();
  });

  it('lets onError take an error instead of showing it', async () => {
    const { result } = renderHook(() => useAction());
    const taken: unknown[] = [];
    await act(() => result.current.run(() => Promise.reject(new Error('conflict')), (err) => { taken.push(err); return true; }));
    expect(taken).toHaveLength(1);
    expect(result.current.error).toBeUndefined();
  });

  it("keeps the host's typed error (field, suggestion) for the screen to act on", async () => {
    const { result } = renderHook(() => useAction());
    const info = { kind: 'CONFLICT' as const, message: "Branch 'x' already exists", field: 'branch', suggestion: 'x-2' };
    await act(() => result.current.run(() => Promise.reject(new ApiError(info))));
    expect(result.current.failure).toEqual(info);
    expect(result.current.error).toBe(info.message);
    // A plain error of the UI is INTERNAL; a message set by the screen too.
    await act(() => result.current.run(() => Promise.reject(new Error('not collected yet'))));
    expect(result.current.failure).toEqual({ kind: 'INTERNAL', message: 'not collected yet' });
    act(() => result.current.setError(undefined));
    expect(result.current.failure).toBeUndefined();
  });
});
