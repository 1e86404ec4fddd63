import { describe, expect, it } from 'vitest';
import { StreamRedactor } from './stream-redactor';

const SECRET = 'airlock-run-Zq3xT0kEw9';
const b = (s: string) => Buffer.from(s, 'latin1');

/** Pushes `parts` through one redactor; returns everything released, and each push's output. */
function run(secrets: string[], parts: string[]): { text: string; released: string[] } {
  const r = new StreamRedactor(secrets.map(b));
  const released = parts.map((p) => r.push(b(p)).toString('latin1'));
  const text = released.join('') + r.end().toString('latin1');
  expect(r.heldBytes).toBe(0);
  return { text, released };
}

/** The redaction of the whole text at once, by brute force: overlapping occurrences form one mark. */
function reference(secrets: string[], text: string): string {
  const ranges: [number, number][] = [];
  for (const s of secrets) for (let i = 0; i + s.length <= text.length; i++) if (text.startsWith(s, i)) ranges.push([i, i + s.length]);
  ranges.sort((x, y) => x[0] - y[0]);
  let out = '';
  let pos = 0;
  let open: [number, number] | undefined;
  const close = () => {
    if (!open) return;
    out += `${text.slice(pos, open[0])}[REDACTED]`;
    pos = open[1];
    open = undefined;
  };
  for (const r of ranges) {
    if (open && r[0] < open[1]) open[1] = Math.max(open[1], r[1]);
    else {
      close();
      open = [r[0], r[1]];
    }
  }
  close();
  return out + text.slice(pos);
}

describe('StreamRedactor', () => {
  const text = `env: KEY=${SECRET}\nmore output`;
  const want = 'env: KEY=[REDACTED]\nmore output';

  it('redacts a secret cut at every position across two chunks', () => {
    for (let i = 0; i <= text.length; i++) {
      const { text: out, released } = run([SECRET], [text.slice(0, i), text.slice(i)]);
      expect(out).toBe(want);
      // Nothing released along the way holds a piece of the secret long enough to matter.
      for (const part of released) expect(part).not.toContain(SECRET.slice(0, 4));
    }
  });

  it('redacts a secret cut at every pair of positions across three chunks', () => {
    for (let i = 0; i <= text.length; i++) {
      for (let j = i; j <= text.length; j++) {
        expect(run([SECRET], [text.slice(0, i), text.slice(i, j), text.slice(j)]).text).toBe(want);
      }
    }
  });

  it('passes other output through untouched, without copying or holding anything', () => {
    const r = new StreamRedactor([b(SECRET)]);
    for (const s of ['plain line\n', 'ends in a different b', 'x'.repeat(100_000), 'airlock-run-', '-ZZZ\n']) {
      const chunk = b(s);
      const out = r.push(chunk);
      if (s === 'airlock-run-') {
        expect(out.length).toBe(0);
        expect(r.heldBytes).toBe(s.length);
        continue;
      }
      if (s === '-ZZZ\n') {
        expect(out.toString('latin1')).toBe('airlock-run--ZZZ\n');
        expect(r.heldBytes).toBe(0);
        continue;
      }
      expect(out).toBe(chunk); // the very same buffer
      expect(r.heldBytes).toBe(0);
    }
    expect(r.end().length).toBe(0);
  });

  it('holds back only the longest suffix that could start a secret, and end() releases it as is', () => {
    const r = new StreamRedactor([b(SECRET)]);
    expect(r.push(b('before a')).toString()).toBe('before ');
    expect(r.heldBytes).toBe(1);
    expect(r.push(b('irlock-run-Zq')).toString()).toBe('');
    expect(r.heldBytes).toBe(14);
    expect(r.end().toString()).toBe('airlock-run-Zq');
    expect(r.end().length).toBe(0);
  });

  it('joins overlapping occurrences into one mark and keeps touching ones apart', () => {
    expect(run(['abab'], ['xababab y']).text).toBe('x[REDACTED] y');
    expect(run(['abab'], ['ab', 'ab', 'ab', 'ab']).text).toBe('[REDACTED]');
    expect(run(['abc'], ['abcabc']).text).toBe('[REDACTED][REDACTED]');
    expect(run(['abc'], ['ab', 'cab', 'c']).text).toBe('[REDACTED][REDACTED]');
    expect(run(['aaa'], ['aa']).text).toBe('aa');
  });

  it('redacts several secrets, including one inside another', () => {
    const key = 'sk-test-0123456789abcdefghijklmnop';
    const parts = [key, key.slice(0, 16), key.slice(-12)];
    const input = `a ${key} b ${key.slice(0, 16)}.. c ..${key.slice(-12)} d TOKEN1 e`;
    for (let i = 0; i <= input.length; i++) {
      expect(run([...parts, 'TOKEN1'], [input.slice(0, i), input.slice(i)]).text).toBe('a [REDACTED] b [REDACTED].. c ..[REDACTED] d [REDACTED] e');
    }
  });

  it('gives the same result however the stream is cut (random texts and secrets over a small alphabet)', () => {
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const word = (len: number) => Array.from({ length: len }, () => 'ab'[rand(2)]).join('');
    for (let round = 0; round < 2000; round++) {
      const secrets = Array.from({ length: 1 + rand(3) }, () => word(2 + rand(4)));
      const input = word(rand(40));
      const parts: string[] = [];
      for (let i = 0; i < input.length; ) {
        const len = rand(6);
        parts.push(input.slice(i, i + len));
        i += len;
      }
      expect(run(secrets, parts).text, `${JSON.stringify(secrets)} ${JSON.stringify(parts)}`).toBe(reference(secrets, input));
    }
  });

  it('keeps every other byte as it was (binary and UTF-8 around a secret)', () => {
    const bytes = Buffer.concat([Buffer.from([0xff, 0x00, 0xc3]), Buffer.from('é€😀 '), b(SECRET), Buffer.from([0x80, 0xfe])]);
    const r = new StreamRedactor([b(SECRET)]);
    const out = Buffer.concat([r.push(bytes.subarray(0, 20)), r.push(bytes.subarray(20)), r.end()]);
    expect(out.equals(Buffer.concat([bytes.subarray(0, bytes.indexOf(b(SECRET))), b('[REDACTED]'), Buffer.from([0x80, 0xfe])]))).toBe(true);
  });

  it('with no secrets, passes everything through', () => {
    const r = new StreamRedactor([Buffer.alloc(0)]);
    const chunk = b('anything');
    expect(r.push(chunk)).toBe(chunk);
    expect(r.end().length).toBe(0);
  });
});
