import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { scrubPairs, ScrubStream, scrubString, secretForms } from './secret-scrub';

const TOKEN = 'ghp_scrubCANARY0123456789abcdef/+xyz';
const PH = 'airlock-placeholder-gh-0000';
const pairs = scrubPairs([{ value: TOKEN, placeholder: PH }]);

/** Every form a server could plausibly echo the token in. */
function echoes(user: string): string[] {
  return [
    TOKEN,
    `Basic ${Buffer.from(`${user}:${TOKEN}`).toString('base64')}`,
    Buffer.from(`${user}:${TOKEN}`).toString('base64url'),
    `?token=${encodeURIComponent(TOKEN)}`,
    JSON.stringify({ token: TOKEN }),
    JSON.stringify({ token: TOKEN }).replace(/\//g, '\\/'),
  ];
}

function leaks(text: string): boolean {
  if (text.includes(TOKEN)) return true;
  // Decode every base64-looking run and every percent-encoding: the token must not come back out.
  for (const run of text.match(/[A-Za-z0-9+/_-]{8,}={0,2}/g) ?? []) {
    for (let skip = 0; skip < 4; skip++) {
      const s = run.slice(skip);
      for (const enc of ['base64', 'base64url'] as const) if (Buffer.from(s, enc).toString('latin1').includes(TOKEN.slice(0, 12))) return true;
    }
  }
  try {
    if (decodeURIComponent(text).includes(TOKEN)) return true;
  } catch {
    // not percent-encoded
  }
  return text.replace(/\\\//g, '/').includes(TOKEN);
}

async function through(stream: ScrubStream, chunks: Buffer[]): Promise<string> {
  const out: Buffer[] = [];
  stream.on('data', (c: Buffer) => out.push(c));
  const done = new Promise((r) => stream.on('end', r));
  for (const c of chunks) stream.write(c);
  stream.end();
  await done;
  return Buffer.concat(out).toString('latin1');
}

describe('secret scrubbing', () => {
  it('finds the value as given, inside Basic base64 at every alignment, percent- and JSON-encoded', () => {
    expect(secretForms(TOKEN).length).toBeGreaterThan(5);
    for (const user of ['x', 'xy', 'x-access-token', 'abc']) {
      for (const e of echoes(user)) {
        expect(leaks(e)).toBe(true);
        expect(leaks(scrubString(e, pairs))).toBe(false);
      }
    }
  });

  it('scrubs across every chunk boundary in a stream, and passes clean bytes unchanged', async () => {
    const text = echoes('x-access-token').join(' | ');
    for (let cut = 1; cut < text.length; cut += 7) {
      const out = await through(new ScrubStream(pairs), [Buffer.from(text.slice(0, cut)), Buffer.from(text.slice(cut))]);
      expect(leaks(out)).toBe(false);
    }
    const clean = Buffer.alloc(200_000, 'a');
    expect(await through(new ScrubStream(pairs), [clean.subarray(0, 70_000), clean.subarray(70_000)])).toBe(clean.toString('latin1'));
  });

  it('mask mode keeps lengths and sends an idle tail without holding it, even when the value is split over two writes', async () => {
    const s = new ScrubStream(pairs, 'mask');
    const out: Buffer[] = [];
    s.on('data', (c: Buffer) => out.push(c));
    const msg = `echo ${TOKEN} end`;
    s.write(Buffer.from('hello'));
    // Not held: the idle tail arrives without another write.
    await new Promise<void>((r) => s.once('data', () => r()));
    expect(Buffer.concat(out).toString()).toBe('hello');
    const half = msg.indexOf(TOKEN) + 10;
    s.write(Buffer.from(msg.slice(0, half)));
    await new Promise((r) => setTimeout(r, 20));
    s.write(Buffer.from(msg.slice(half)));
    s.end();
    await new Promise((r) => s.on('end', r));
    const all = Buffer.concat(out).toString();
    expect(all.length).toBe('hello'.length + msg.length);
    expect(all).not.toContain(TOKEN.slice(0, 6));
    expect(all).not.toContain(TOKEN.slice(10));
    expect(all.endsWith(' end')).toBe(true);
  });

  it('a stream of many small writes loses nothing', async () => {
    const src = new PassThrough();
    const s = new ScrubStream(pairs);
    const out: Buffer[] = [];
    s.on('data', (c: Buffer) => out.push(c));
    const ended = new Promise((r) => s.on('end', r));
    src.pipe(s);
    const text = `a${TOKEN}b`.repeat(50);
    for (const ch of text) src.write(ch);
    src.end();
    await ended;
    expect(Buffer.concat(out).toString()).toBe(`a${PH}b`.repeat(50));
  });
});
