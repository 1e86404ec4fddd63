// @vitest-environment jsdom
import { cleanup, fireEvent, render, screen, within } from '@testing-library/react';
import { useState } from 'react';
import { afterEach, describe, expect, it } from 'vitest';
import type { FileDiff } from '../../../contracts';
import { fileSelectionOf, hunkIds } from '../lib/selection';
import { parseUnifiedDiff } from '../lib/unified-diff';
import { DiffBody } from './diff-viewer';

/*
 * Line picking in both diff layouts (docs/architecture.md §11, "Picking hunks and lines"): the
 * split layout ticks removals on the left and additions on the right, with the unified layout's
 * ids, so the same ticks give the same selection (and so the same host-rendered patch and digest).
 */

afterEach(cleanup);

// Hunk 0 replaces two lines by three and drops one; hunk 1 changes one line.
const DIFF: FileDiff = {
  path: 'f.txt',
  status: 'modified',
  binary: false,
  tooLarge: false,
  diff: [
    'diff --git a/f.txt b/f.txt',
    '--- a/f.txt',
    '+++ b/f.txt',
    '@@ -1,6 +1,6 @@',
    ' a',
    '-b',
    '-c',
    '+B',
    '+C',
    '+C2',
    ' d',
    '-e',
    ' f',
    '@@ -10,3 +10,3 @@ fn()',
    ' j',
    '-k',
    '+K',
    ' l',
    '',
  ].join('\n'),
};
const HUNKS = parseUnifiedDiff(DIFF.diff);
const ALL = HUNKS.flatMap(hunkIds);

/** The Review screen's part of picking: a set of ids (undefined: all), and what it sends for them. */
function Picker({ initial }: { initial: 'unified' | 'split' }) {
  const [mode, setMode] = useState(initial);
  const [picked, setPicked] = useState<Set<string>>();
  const pick = {
    ...(picked ? { picked } : {}),
    set(ids: string[], on: boolean) {
      setPicked((p) => {
        const next = new Set(p ?? ALL);
        for (const id of ids) if (on) next.add(id); else next.delete(id);
        return next;
      });
    },
  };
  return (
    <>
      <button onClick={() => setMode(mode === 'split' ? 'unified' : 'split')}>switch</button>
      <output aria-label="selection">{JSON.stringify(fileSelectionOf(DIFF.path, HUNKS, picked ?? new Set(ALL)))}</output>
      <div className="diff"><DiffBody diff={DIFF} mode={mode} pick={pick} /></div>
    </>
  );
}

const box = (label: string) => screen.getByLabelText(label, { exact: true }) as HTMLInputElement;
const selection = () => JSON.parse(screen.getByLabelText('selection').textContent ?? 'null') as unknown;

/** Unticks lines as a user would, and gives back what the screen would send. */
function untick(layout: 'unified' | 'split', ids: string[]): unknown {
  render(<Picker initial={layout} />);
  for (const id of ids) fireEvent.click(box(`line ${id}`));
  const sent = selection();
  cleanup();
  return sent;
}

describe('line picking in the split layout', () => {
  it('has a checkbox for every changed line: removals in the left column, additions in the right, none on context', () => {
    render(<Picker initial="split" />);
    const lineBoxes = screen.getAllByLabelText(/^line /);
    expect(lineBoxes.map((b) => b.getAttribute('aria-label')?.slice(5)).sort()).toEqual([...ALL].sort());
    for (const b of lineBoxes) {
      const id = b.getAttribute('aria-label')?.slice(5) ?? '';
      const cell = b.closest('td') as HTMLTableCellElement;
      const row = cell.closest('tr') as HTMLTableRowElement;
      // [pick][old no][old text][pick][new no][new text]
      expect(cell.cellIndex).toBe(id.startsWith('-') ? 0 : 3);
      expect(row.dataset[id.startsWith('-') ? 'left' : 'right']).toBe(id);
    }
    // 'C' (new line 3) sits beside 'c' (old line 3) on one row, each with its own box.
    const row = box('line -3').closest('tr') as HTMLTableRowElement;
    expect(within(row).getByLabelText('line +3', { exact: true })).toBeTruthy();
    expect(row.textContent).toContain('c');
    expect(row.textContent).toContain('C');
    // Context rows have no box.
    const context = [...document.querySelectorAll('tr')].find((r) => r.textContent === '1a1a') as HTMLTableRowElement;
    expect(context.querySelectorAll('input').length).toBe(0);
    // Unticking one side dims only that side.
    fireEvent.click(box('line -3'));
    expect(box('line -3').checked).toBe(false);
    expect(box('line +3').checked).toBe(true);
    expect([...row.cells].filter((c) => c.classList.contains('unpicked')).map((c) => c.cellIndex)).toEqual([1, 2]);
    expect((screen.getByLabelText('hunk 1', { exact: true }) as HTMLInputElement).indeterminate).toBe(true);
  });

  it('the same ticks give the same selection in split and unified', () => {
    const cases: Array<{ ids: string[]; expected: unknown }> = [
      { ids: ['-3', '+4', '-5', '+11'], expected: { path: 'f.txt', lines: ['-2', '+2', '+3', '-11'] } },
      { ids: ['+2'], expected: { path: 'f.txt', hunks: [1], lines: ['-2', '-3', '+3', '+4', '-5'] } },
      { ids: ['-11', '+11'], expected: { path: 'f.txt', hunks: [0] } },
      { ids: [], expected: 'whole' },
      { ids: ALL, expected: 'none' },
    ];
    for (const c of cases) {
      const split = untick('split', c.ids);
      expect(split).toEqual(c.expected);
      expect(untick('unified', c.ids)).toEqual(split);
    }
  });

  it('keeps the ticks when the layout changes, both ways', () => {
    render(<Picker initial="split" />);
    fireEvent.click(box('line +4'));
    fireEvent.click(box('line -11'));
    const inSplit = selection();
    fireEvent.click(screen.getByText('switch'));
    expect(document.querySelector('tr[data-line="+4"]')).not.toBeNull();
    expect(box('line +4').checked).toBe(false);
    expect(box('line -11').checked).toBe(false);
    expect(selection()).toEqual(inSplit);
    fireEvent.click(box('line -2'));
    const inUnified = selection();
    fireEvent.click(screen.getByText('switch'));
    expect(box('line -2').checked).toBe(false);
    expect(selection()).toEqual(inUnified);
    expect(inUnified).toEqual({ path: 'f.txt', lines: ['-3', '+2', '+3', '-5', '+11'] });
  });
});

describe('diff layout switch', () => {
  it('is offered for text lines only: not for an image or a binary', async () => {
    const { DiffViewer } = await import('./diff-viewer');
    const { setApi } = await import('../api');
    // The image preview asks for the image's bytes; none are needed to see the switch is gone.
    setApi({ call: () => new Promise(() => undefined), on: () => () => undefined, onConnectionChange: () => () => undefined } as unknown as Parameters<typeof setApi>[0]);
    const { useDiffStore, diffKey } = await import('../stores/diff-store');
    const binary: FileDiff = { path: 'data.bin', status: 'modified', binary: true, tooLarge: false, diff: '' };
    useDiffStore.setState({ loadFile: async () => undefined, diffs: { [diffKey('r-1', 'f.txt')]: DIFF, [diffKey('r-1', 'data.bin')]: binary, [diffKey('r-1', 'logo.png')]: { ...binary, path: 'logo.png' } } });
    const { unmount } = render(<DiffViewer runId="r-1" path="f.txt" />);
    expect(screen.queryByRole('radiogroup', { name: 'Diff layout' })).not.toBeNull();
    unmount();
    for (const path of ['data.bin', 'logo.png']) {
      const view = render(<DiffViewer runId="r-1" path={path} />);
      expect(screen.queryByRole('radiogroup', { name: 'Diff layout' })).toBeNull();
      view.unmount();
    }
  });
});
