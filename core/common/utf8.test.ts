import { describe, expect, it } from 'vitest';
import { splitAtCharBoundary } from './utf8';

describe('splitAtCharBoundary', () => {
  it('keeps an unfinished character for the next chunk, and nothing else', () => {
    const text = 'a€b😀';
    const bytes = Buffer.from(text);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const { whole, rest } = splitAtCharBoundary(bytes.subarray(0, cut));
      expect(rest.length).toBeLessThanOrEqual(3);
      // What is whole decodes without replacement characters, and whole + rest is the input.
      expect(whole.toString('utf8')).not.toContain('\ufffd');
      expect(Buffer.concat([whole, rest]).equals(bytes.subarray(0, cut))).toBe(true);
      const next = Buffer.concat([rest, bytes.subarray(cut)]);
      expect(whole.toString('utf8') + next.toString('utf8')).toBe(text);
    }
  });

  it('does not hold back invalid bytes', () => {
    expect(splitAtCharBoundary(Buffer.from([0x61, 0xff])).rest.length).toBe(0);
    expect(splitAtCharBoundary(Buffer.from([0x61, 0x80, 0x80, 0x80])).rest.length).toBe(0);
  });
});
