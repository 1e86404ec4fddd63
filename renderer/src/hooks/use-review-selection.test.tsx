// @vitest-environment jsdom
import { act, cleanup, renderHook } from '@testing-library/react';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChangedFile } from '../../../contracts';
import { parseUnifiedDiff, type Hunk } from '../lib/unified-diff';
import { useReviewSelection } from './use-review-selection';

/*
 * The selection rules of Review & apply (docs/architecture.md §11): risky files ask first, a file
 * with every change picked is whole, one with none is out, a new result starts over.
 */

const file = (path: string, risky?: string): ChangedFile => ({ path, status: 'modified', binary: false, additions: 2, deletions: 1, ...(risky ? { risky } : {}) });
const FILES = [file('.github/workflows/ci.yml', 'CI workflow'), file('src/a.ts'), file('src/b.ts')];

// Two hunks of src/a.ts: ids -2 +2 (hunk 0) and +9 (hunk 1).
const A_HUNKS = parseUnifiedDiff([
  'diff --git a/src/a.ts b/src/a.ts',
  '--- a/src/a.ts',
  '+++ b/src/a.ts',
  '@@ -1,3 +1,3 @@',
  ' x',
  '-y',
  '+Y',
  ' z',
  '@@ -8,2 +8,3 @@',
  ' p',
  '+q',
  ' r',
  '',
].join('\n'));
const CI_HUNKS = parseUnifiedDiff('diff --git a/c b/c\n--- a/c\n+++ b/c\n@@ -1 +1,2 @@\n on: push\n+jobs: {}\n');
const hunksOf = (path: string): Hunk[] | undefined => (path === 'src/a.ts' ? A_HUNKS : path === FILES[0]?.path ? CI_HUNKS : undefined);

function setup(files = FILES) {
  return renderHook((props: { files: ChangedFile[]; resetKey: string }) => useReviewSelection({ ...props, hunksOf }), { initialProps: { files, resetKey: 'r1' } });
}
const selected = (r: { current: { selected: ReadonlySet<string> } }) => [...r.current.selected].sort();

describe('useReviewSelection', () => {
  afterEach(cleanup);

  it('leaves risky files out at first and focuses the first file', () => {
    const { result } = setup();
    expect(selected(result)).toEqual(['src/a.ts', 'src/b.ts']);
    expect(result.current.focused).toBe('.github/workflows/ci.yml');
    expect(result.current.request).toEqual({ files: ['src/a.ts', 'src/b.ts'], selection: [] });
  });

  it('asks before ticking a risky file, whole or by Select all; Cancel leaves it out', () => {
    const { result } = setup();
    act(() => result.current.toggle('.github/workflows/ci.yml'));
    expect(result.current.pending?.paths).toEqual(['.github/workflows/ci.yml']);
    expect(result.current.selected.has('.github/workflows/ci.yml')).toBe(false);
    act(() => result.current.cancel());
    expect(result.current.pending).toBeUndefined();
    expect(result.current.selected.has('.github/workflows/ci.yml')).toBe(false);

    act(() => result.current.selectAll());
    expect(result.current.pending?.paths).toEqual(['.github/workflows/ci.yml']);
    act(() => result.current.confirm());
    expect(selected(result)).toEqual(['.github/workflows/ci.yml', 'src/a.ts', 'src/b.ts']);
    // Unticking never asks.
    act(() => result.current.toggle('.github/workflows/ci.yml'));
    expect(result.current.pending).toBeUndefined();
    expect(result.current.selected.has('.github/workflows/ci.yml')).toBe(false);
  });

  it('asks before ticking a line of a risky file too', () => {
    const { result } = setup();
    act(() => result.current.setLines('.github/workflows/ci.yml', ['+2'], true));
    expect(result.current.pending?.paths).toEqual(['.github/workflows/ci.yml']);
    act(() => result.current.confirm());
    expect(result.current.selected.has('.github/workflows/ci.yml')).toBe(true);
  });

  it('takes a file in part, whole again when every change is picked, and out when none is', () => {
    const { result } = setup();
    act(() => result.current.setLines('src/a.ts', ['+9'], false));
    expect(result.current.isPartial('src/a.ts')).toBe(true);
    expect([...(result.current.pickedOf('src/a.ts') ?? [])].sort()).toEqual(['+2', '-2']);
    // Hunk 0 whole, by number; hunk 1 not at all.
    expect(result.current.request).toEqual({ files: ['src/a.ts', 'src/b.ts'], selection: [{ path: 'src/a.ts', hunks: [0] }] });
    const before = result.current.requestKey;

    act(() => result.current.setLines('src/a.ts', ['-2'], false));
    expect(result.current.request.selection).toEqual([{ path: 'src/a.ts', lines: ['+2'] }]);
    expect(result.current.requestKey).not.toBe(before);

    act(() => result.current.setLines('src/a.ts', ['-2', '+9'], true));
    expect(result.current.isPartial('src/a.ts')).toBe(false);
    expect(result.current.pickedOf('src/a.ts')).toBeUndefined();
    expect(result.current.request.selection).toEqual([]);

    act(() => result.current.setLines('src/a.ts', ['-2', '+2', '+9'], false));
    expect(result.current.selected.has('src/a.ts')).toBe(false);
    expect(result.current.pickedOf('src/a.ts')).toEqual(new Set());
    expect(result.current.request.files).toEqual(['src/b.ts']);
  });

  it('ticking lines of an unticked file takes only those', () => {
    const { result } = setup();
    act(() => result.current.toggle('src/a.ts'));
    act(() => result.current.setLines('src/a.ts', ['+9'], true));
    expect(result.current.request.selection).toEqual([{ path: 'src/a.ts', hunks: [1] }]);
  });

  it('starts over on a new result, not on a refetch of the same one', () => {
    const { result, rerender } = setup();
    act(() => result.current.setLines('src/a.ts', ['+9'], false));
    act(() => result.current.toggle('src/b.ts'));
    act(() => result.current.focus('src/b.ts'));
    // The same result fetched again (after an apply): the selection stays.
    rerender({ files: [...FILES], resetKey: 'r1' });
    expect(result.current.isPartial('src/a.ts')).toBe(true);
    expect(result.current.selected.has('src/b.ts')).toBe(false);

    rerender({ files: [...FILES, file('src/c.ts')], resetKey: 'r2' });
    expect(result.current.isPartial('src/a.ts')).toBe(false);
    expect(selected(result)).toEqual(['src/a.ts', 'src/b.ts', 'src/c.ts']);
    // The file being read stays in view.
    expect(result.current.focused).toBe('src/b.ts');
  });
});
