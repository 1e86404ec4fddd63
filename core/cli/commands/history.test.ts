import { describe, expect, it } from 'vitest';
import { applyReport, selectionOf } from './history';

describe('apply/patch --hunks and --lines', () => {
  it('groups hunks and lines per path, splitting at the last colon', () => {
    expect(selectionOf(['src/a.ts:1,3', 'odd:name.txt:2'], ['src/a.ts:-3,+4'])).toEqual([
      { path: 'src/a.ts', hunks: [0, 2], lines: ['-3', '+4'] },
      { path: 'odd:name.txt', hunks: [1] },
    ]);
    expect(selectionOf(undefined, undefined)).toBeUndefined();
  });

  it('says what is wrong with a malformed selection, naming the option', () => {
    expect(() => selectionOf(['src/a.ts'], undefined)).toThrow(expect.objectContaining({ kind: 'INVALID_INPUT', field: 'hunks' }));
    expect(() => selectionOf(['src/a.ts:x'], undefined)).toThrow(/'x' is not a hunk number/);
    // Numbered from 1, as `show --hunks` and the review screen print them.
    expect(() => selectionOf(['src/a.ts:0'], undefined)).toThrow(/'0' is not a hunk number \(1, 2/);
    expect(() => selectionOf(undefined, ['src/a.ts:12'])).toThrow(/'12' is not a line id/);
  });
});

describe('apply report', () => {
  it('says nothing was written on a conflict, and how to write the rest on purpose', () => {
    const text = applyReport({ applied: [], conflicts: [{ path: 'sum.js', reason: 'edits overlap' }], held: ['sum.test.js'], unchanged: [] }, 'airlock apply r1 --reviewed x');
    expect(text).toContain('CONFLICT   sum.js: edits overlap');
    expect(text).toContain('held       sum.test.js');
    expect(text).toContain('Nothing was written: 1 file conflicts with changes in your project');
    expect(text).toContain('airlock apply r1 --reviewed x --skip-conflicts (your project then has the run\'s changes to those, not to sum.js');
  });
  it('says when there is nothing to apply', () => {
    expect(applyReport({ applied: [], conflicts: [], held: [], unchanged: ['a.js'] }, 'x')).toBe('unchanged  a.js (the project already has it)\nNothing to apply: the project already has these changes.\n');
  });
});
