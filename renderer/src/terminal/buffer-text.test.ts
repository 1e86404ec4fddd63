import { describe, expect, it } from 'vitest';
import { bufferText, type TextBuffer } from './buffer-text';

function buffer(rows: Array<[string, boolean?]>): TextBuffer {
  return {
    length: rows.length,
    getLine: (y) => {
      const row = rows[y];
      return row && { isWrapped: Boolean(row[1]), translateToString: (trim) => (trim ? row[0].trimEnd() : row[0]) };
    },
  };
}

describe('bufferText', () => {
  it('joins wrapped rows, trims trailing blanks and drops empty rows at the end', () => {
    expect(bufferText(buffer([['$ echo aaaa'], ['bbbb', true], ['aaaabbbb   '], ['$ '], [''], ['']]))).toBe('$ echo aaaabbbb\naaaabbbb\n$');
  });

  it('keeps empty rows in the middle', () => {
    expect(bufferText(buffer([['one'], [''], ['two']]))).toBe('one\n\ntwo');
  });
});
