import { Transform, type TransformCallback } from 'node:stream';

/**
 * The forms a secret can come back in from a server that echoes what it was sent (docs/architecture.md
 * §2.8), and a stream that removes all of them. A server that reflects `Authorization` hands back the
 * value as given, inside the base64 of a Basic `user:secret` (at any of three alignments, in the
 * standard or URL-safe alphabet), percent-encoded (a redirect's query), or JSON-escaped.
 */

/** One byte string to find and what to put in its place. */
export interface ScrubPair {
  from: Buffer;
  to: Buffer;
}

/**
 * The base64 characters that depend only on `value`'s bytes, for each of the three offsets it can
 * sit at inside a longer encoded text (`user:` before it in a Basic credential shifts it). Whatever
 * precedes or follows the value, its encoding contains one of these three runs.
 */
function base64Runs(value: Buffer): string[] {
  const runs: string[] = [];
  for (let shift = 0; shift < 3; shift++) {
    const text = Buffer.concat([Buffer.alloc(shift), value, Buffer.alloc(2)]).toString('base64');
    // Character k covers bits 6k…6k+5: only the value's bytes when shift ≤ 6k/8 and (6k+5)/8 < shift + n.
    const first = Math.ceil((8 * shift) / 6);
    const last = Math.floor((8 * (shift + value.length) - 6) / 6);
    if (last >= first) runs.push(text.slice(first, last + 1));
  }
  return runs;
}

/** Every encoded form of `value` the scrubber looks for, distinct, longest first. */
export function secretForms(value: string): string[] {
  const bytes = Buffer.from(value);
  const forms = new Set<string>([value]);
  for (const run of base64Runs(bytes)) {
    forms.add(run);
    forms.add(run.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  const pct = encodeURIComponent(value);
  forms.add(pct);
  forms.add(pct.replace(/%[0-9A-F]{2}/g, (m) => m.toLowerCase()));
  forms.add(pct.replace(/%20/g, '+'));
  // Every byte percent-encoded (what some clients and servers do to a whole credential).
  forms.add([...bytes].map((b) => `%${b.toString(16).padStart(2, '0').toUpperCase()}`).join(''));
  const json = JSON.stringify(value).slice(1, -1);
  forms.add(json);
  forms.add(json.replace(/\//g, '\\/'));
  // A run shorter than this would match ordinary text; real tokens are far longer.
  return [...forms].filter((f) => f.length >= 4).sort((a, b) => b.length - a.length);
}

/** Pairs that replace every form of each value by `replacement(value)`. */
export function scrubPairs(values: Array<{ value: string; placeholder: string }>): ScrubPair[] {
  const pairs: ScrubPair[] = [];
  for (const v of values) {
    const to = Buffer.from(v.placeholder);
    for (const f of secretForms(v.value)) pairs.push({ from: Buffer.from(f), to });
  }
  return pairs.sort((a, b) => b.from.length - a.from.length);
}

/** Replaces every pair's `from` in a string (header values, a reason phrase). */
export function scrubString(text: string, pairs: readonly ScrubPair[]): string {
  if (pairs.length === 0) return text;
  // latin1 round-trips the header bytes exactly as they came off the wire.
  const buf = Buffer.from(text, 'latin1');
  const { emitted } = replaceAll(buf, pairs, buf.length, 'placeholder');
  return emitted === buf ? text : emitted.toString('latin1');
}

/**
 * `placeholder`: each match becomes its pair's `to` (lengths change; fine for a body the gateway
 * re-frames). `mask`: each match becomes as many `*` (lengths kept; for an upgraded stream whose own
 * framing counts bytes).
 */
export type ScrubMode = 'placeholder' | 'mask';

/**
 * Replaces matches in `buf`, leftmost first (longest on a tie), scanning matches that start before
 * `cut`; returns what can be sent and how much of `buf` it covers (a match that started before `cut`
 * is emitted whole, so nothing after `consumed` can be part of a match already seen).
 */
function replaceAll(buf: Buffer, pairs: readonly ScrubPair[], cut: number, mode: ScrubMode): { emitted: Buffer; consumed: number } {
  const next = pairs.map((p) => buf.indexOf(p.from));
  if (next.every((i) => i < 0 || i >= cut)) return { emitted: cut === buf.length ? buf : buf.subarray(0, cut), consumed: cut };
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    let best = -1;
    for (let k = 0; k < pairs.length; k++) {
      let i = next[k] as number;
      if (i >= 0 && i < at) next[k] = i = buf.indexOf((pairs[k] as ScrubPair).from, at);
      if (i < 0 || i >= cut) continue;
      // Pairs are sorted longest first, so the first at the lowest index is the longest there.
      if (best < 0 || i < (next[best] as number)) best = k;
    }
    if (best < 0) break;
    const i = next[best] as number;
    const pair = pairs[best] as ScrubPair;
    parts.push(buf.subarray(at, i), mode === 'mask' ? Buffer.alloc(pair.from.length, 0x2a) : pair.to);
    at = i + pair.from.length;
  }
  const end = Math.max(at, cut);
  parts.push(buf.subarray(at, end));
  return { emitted: Buffer.concat(parts), consumed: end };
}

/** The shortest beginning of a form an idle flush masks (shorter ones are common text). */
const MIN_MASKED_START = 8;

/**
 * Replaces byte strings in a stream, also across chunk boundaries: the last (longest needle − 1)
 * bytes of each chunk wait for the next one. A chunk with no match passes as a view, not a copy.
 */
export class ScrubStream extends Transform {
  private tail: Buffer = Buffer.alloc(0);
  private readonly keep: number;
  /** Mask mode: the rest of each form whose beginning ended an idle flush (masked there). */
  private partials: Buffer[] = [];

  constructor(
    private readonly pairs: readonly ScrubPair[],
    private readonly mode: ScrubMode = 'placeholder',
  ) {
    super();
    this.keep = Math.max(0, ...pairs.map((p) => p.from.length - 1));
  }

  override _transform(input: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const chunk = this.partials.length ? this.continueMasked(input) : input;
    const buf = this.tail.length ? Buffer.concat([this.tail, chunk]) : chunk;
    const cut = Math.max(0, buf.length - this.keep);
    const { emitted, consumed } = replaceAll(buf, this.pairs, cut, this.mode);
    // Copied: the tail must not pin (or alias) the caller's chunk.
    const tail = (this.tail = Buffer.from(buf.subarray(consumed)));
    if (emitted.length) this.push(emitted);
    // An interactive stream (an upgraded one) must not hold a message's last bytes until the next
    // one: when nothing more came in this turn, send the tail, masking what could begin a match.
    if (this.mode === 'mask' && tail.length) setImmediate(() => this.flushIdle(tail));
    done();
  }

  private flushIdle(tail: Buffer): void {
    if (this.tail !== tail || this.destroyed || this.writableFinished) return;
    const { emitted } = replaceAll(tail, this.pairs, tail.length, 'mask');
    let masked = 0;
    const partials: Buffer[] = [];
    for (const p of this.pairs) {
      for (let n = Math.min(p.from.length - 1, emitted.length); n > 0; n--) {
        if (emitted.subarray(emitted.length - n).equals(p.from.subarray(0, n))) {
          // A short run (a message ending in `g` when a form starts `ghp_`) is sent as is, or
          // ordinary messages would lose their last letters; what follows it is still masked.
          if (n >= MIN_MASKED_START) masked = Math.max(masked, n);
          partials.push(p.from.subarray(n));
        }
      }
    }
    const out = Buffer.from(emitted);
    out.fill(0x2a, out.length - masked);
    this.tail = Buffer.alloc(0);
    this.partials = partials;
    this.push(out);
  }

  /** Masks the start of `chunk` where it continues a match whose beginning an idle flush masked. */
  private continueMasked(chunk: Buffer): Buffer {
    let mask = 0;
    const still: Buffer[] = [];
    for (const rest of this.partials) {
      let k = 0;
      while (k < rest.length && k < chunk.length && rest[k] === chunk[k]) k++;
      if (k === rest.length) mask = Math.max(mask, k);
      else if (k === chunk.length) {
        mask = Math.max(mask, k);
        still.push(rest.subarray(k));
      }
    }
    this.partials = still;
    if (mask === 0) return chunk;
    const out = Buffer.from(chunk);
    out.fill(0x2a, 0, mask);
    return out;
  }

  override _flush(done: TransformCallback): void {
    if (this.tail.length) this.push(replaceAll(this.tail, this.pairs, this.tail.length, this.mode).emitted);
    this.tail = Buffer.alloc(0);
    done();
  }
}
