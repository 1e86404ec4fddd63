import { describe, expect, it } from 'vitest';
import { newPart } from './live-after-replay';

describe('newPart: live output after a replay of the log', () => {
  it('skips chunks the replay showed, keeps later ones, and trims one that straddles by bytes', () => {
    // Log: "héllo " (7 bytes) then "wörld" (6 bytes): the chunks end at 7 and 13.
    expect(newPart('héllo ', 7, 7)).toBe('');
    expect(newPart('héllo ', 7, 20)).toBe('');
    expect(newPart('wörld', 13, 7)).toBe('wörld');
    expect(newPart('wörld', 13, 10)).toBe('rld'); // the replay ended after "wö"
    expect(newPart('héllo wörld', 13, 3)).toBe('llo wörld');
  });

  it('takes a chunk without an end offset whole', () => {
    expect(newPart('abc', undefined, 100)).toBe('abc');
  });
});
