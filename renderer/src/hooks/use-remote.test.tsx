// @vitest-environment jsdom
import { act, renderHook } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { useRemote } from './use-remote';

/** A read the test answers by hand, in any order. */
function deferred<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

describe('useRemote (what a screen reads from the host)', () => {
  it('drops the answer to an earlier read: a quick switch never shows the previous item', async () => {
    const reads = new Map<string, ReturnType<typeof deferred<string>>>();
    const load = (id: string) => {
      const d = deferred<string>();
      reads.set(id, d);
      return d.promise;
    };
    const { result, rerender } = renderHook(({ id }) => useRemote(() => load(id), [id], { reset: true }), { initialProps: { id: 'a' } });
    rerender({ id: 'b' });
    await act(async () => reads.get('b')?.resolve('B'));
    await act(async () => reads.get('a')?.resolve('A')); // late: for the item no longer shown
    expect(result.current.value).toBe('B');
  });

  it('keeps the value on a failed re-read, says why, and clears the error on the next success', async () => {
    let answer: () => Promise<number> = () => Promise.resolve(1);
    const { result } = renderHook(() => useRemote(() => answer(), []));
    await act(async () => undefined);
    expect(result.current.value).toBe(1);
    answer = () => Promise.reject(new Error('the engine did not answer'));
    await act(() => result.current.reload());
    expect(result.current).toMatchObject({ value: 1, error: { message: 'the engine did not answer' } });
    answer = () => Promise.resolve(2);
    await act(() => result.current.reload());
    expect(result.current.value).toBe(2);
    expect(result.current.error).toBeUndefined();
  });

  it('sets nothing after unmount', async () => {
    const d = deferred<string>();
    const { result, unmount } = renderHook(() => useRemote(() => d.promise, []));
    unmount();
    await act(async () => d.resolve('late'));
    expect(result.current.value).toBeUndefined();
  });
});
