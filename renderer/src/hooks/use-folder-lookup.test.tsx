// @vitest-environment jsdom
import { act, renderHook, waitFor } from '@testing-library/react';
import { describe, expect, it } from 'vitest';
import { useFolderLookup } from './use-folder-lookup';

describe('useFolderLookup', () => {
  it('reads the folder again when the window comes back into focus (the project may have changed meanwhile)', async () => {
    let reads = 0;
    const { result } = renderHook(() => useFolderLookup('/p', async () => ++reads));
    await waitFor(() => expect(result.current.value).toBe(1));
    act(() => { window.dispatchEvent(new Event('focus')); });
    await waitFor(() => expect(result.current.value).toBe(2));
    expect(reads).toBe(2);
  });
});
