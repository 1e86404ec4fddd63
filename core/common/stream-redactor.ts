/** What every occurrence of a secret becomes. */
export const REDACTED = '[REDACTED]';

const MARK = Buffer.from(REDACTED);
const EMPTY = Buffer.alloc(0);

/**
 * Redacts secrets from one byte stream however it is cut into chunks. `push` releases at once all
 * but the shortest tail that could still be the start of a secret (the longest suffix that is a
 * proper prefix of one), so ordinary output is never delayed; `end` releases that tail.
 *
 * Each run of overlapping occurrences (of any of the secrets) becomes one `[REDACTED]`, so no piece
 * of a secret survives next to the mark; touching occurrences get a mark each. The result is the
 * same whatever the chunking. Secrets are matched as bytes: keep them ASCII, so that what is held
 * back is never part of a multi-byte character.
 */
export class StreamRedactor {
  private readonly secrets: Buffer[];
  private held: Buffer | undefined;
  /** Leading bytes of `held` that belong to an occurrence whose mark has already gone out. */
  private covered = 0;

  /** Empty secrets are ignored; with none left, `push` returns its input as is. */
  constructor(secrets: readonly Buffer[]) {
    this.secrets = secrets.filter((s) => s.length > 0);
  }

  /** Bytes held back (a possible start of a secret). */
  get heldBytes(): number {
    return this.held?.length ?? 0;
  }

  /**
   * The next chunk in; what can be released now out. Returns `chunk` itself (no copy) when it holds
   * no secret and nothing was or is held back.
   */
  push(chunk: Buffer): Buffer {
    if (!this.secrets.length) return chunk;
    const data = this.held ? Buffer.concat([this.held, chunk]) : chunk;
    this.held = undefined;
    return this.scan(data, false);
  }

  /** The end of the stream: releases what is held, redacted (an unfinished prefix is not a secret). */
  end(): Buffer {
    const held = this.held;
    this.held = undefined;
    return held ? this.scan(held, true) : EMPTY;
  }

  private scan(data: Buffer, final: boolean): Buffer {
    const n = data.length;
    let ranges: [number, number][] | undefined;
    for (const s of this.secrets) {
      for (let at = data.indexOf(s); at >= 0; at = data.indexOf(s, at + 1)) (ranges ??= []).push([at, at + s.length]);
    }
    const cut = final ? n : this.holdFrom(data);
    const covered = this.covered;
    this.covered = 0;
    if (!ranges && !covered) {
      if (cut === n) return data;
      this.held = Buffer.from(data.subarray(cut));
      return data.subarray(0, cut);
    }
    // The tail of an occurrence already marked continues that mark rather than starting one.
    if (covered) (ranges ??= []).push([0, covered]);
    const merged = mergeRanges(ranges as [number, number][]);
    const out: Buffer[] = [];
    let pos = 0;
    for (const [start, stop] of merged) {
      const continued = covered > 0 && start === 0;
      // An occurrence wholly in the held tail is found again, with what follows, next time.
      if (start >= cut && !continued) break;
      if (start > pos) out.push(data.subarray(pos, start));
      if (!continued) out.push(MARK);
      pos = Math.min(stop, cut);
      if (stop > cut) this.covered = stop - cut;
    }
    if (cut > pos) out.push(data.subarray(pos, cut));
    if (cut < n) this.held = Buffer.from(data.subarray(cut));
    return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
  }

  /** Where the longest suffix of `data` that is a proper prefix of some secret starts (`data.length` if none). */
  private holdFrom(data: Buffer): number {
    const n = data.length;
    let from = n;
    for (const s of this.secrets) {
      const first = s[0] as number;
      // Only starts before `from` could make the held tail longer.
      for (let i = data.indexOf(first, Math.max(0, n - s.length + 1)); i >= 0 && i < from; i = data.indexOf(first, i + 1)) {
        if (data.compare(s, 0, n - i, i, n) === 0) {
          from = i;
          break;
        }
      }
    }
    return from;
  }
}

/** Sorted, with overlapping ranges joined (touching ones stay apart: each gets its own mark). */
function mergeRanges(ranges: [number, number][]): [number, number][] {
  ranges.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const merged: [number, number][] = [];
  for (const [start, stop] of ranges) {
    const last = merged[merged.length - 1];
    if (last && start < last[1]) last[1] = Math.max(last[1], stop);
    else merged.push([start, stop]);
  }
  return merged;
}
