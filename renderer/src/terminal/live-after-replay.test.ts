import { describe, expect, it } from 'vitest';
import { newPart } from './live-after-replay';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);

describe('newPart: live output after a replay of the log', () => {
  it('skips chunks the replay showed, keeps later ones, and trims one that straddles by bytes', () => {
    // Log: "héllo " (7 bytes) then "wörld" (6 bytes): the chunks end at 7 and 13.
    expect(dec(newPart(enc('héllo '), 7, 7))).toBe('');
    expect(dec(newPart(enc('héllo '), 7, 20))).toBe('');
    expect(dec(newPart(enc('wörld'), 13, 7))).toBe('wörld');
    expect(dec(newPart(enc('wörld'), 13, 10))).toBe('rld'); // the replay ended after "wö"
    expect(dec(newPart(enc('héllo wörld'), 13, 3))).toBe('llo wörld');
  });

  it('takes a chunk without an end offset whole', () => {
    expect(dec(newPart(enc('abc'), undefined, 100))).toBe('abc');
  });
});
