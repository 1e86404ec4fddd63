import { describe, expect, it } from 'vitest';
import { CookieScrubber } from './cookie-scrub';

describe('CookieScrubber', () => {
  const head = 'GET / HTTP/1.1\r\nHost: 127.0.0.1:5000\r\nCookie: theme=dark; airlock_token_41234=s3cr3tT0ken_abc-DEF; other=1\r\n\r\n';
  const expected = head.replace('s3cr3tT0ken_abc-DEF', 'x'.repeat('s3cr3tT0ken_abc-DEF'.length));

  it('blanks the value, same length, whatever the chunk boundaries', () => {
    for (let cut = 0; cut <= head.length; cut++) {
      for (const second of [cut, Math.min(head.length, cut + 7)]) {
        const s = new CookieScrubber();
        const parts = [head.slice(0, cut), head.slice(cut, second), head.slice(second)].map((p) => s.push(Buffer.from(p, 'latin1')));
        const out = Buffer.concat([...parts, s.flush()]).toString('latin1');
        expect(out).toBe(expected);
      }
    }
  });

  it('passes other bytes through unchanged and uncopied', () => {
    const s = new CookieScrubber();
    const chunk = Buffer.from('POST /x HTTP/1.1\r\nCookie: a=b\r\n\r\nbody airlock_tok');
    const out = s.push(chunk);
    expect(out.buffer).toBe(chunk.buffer);
    expect(Buffer.concat([out, s.flush()]).toString()).toBe(chunk.toString());
  });
});
