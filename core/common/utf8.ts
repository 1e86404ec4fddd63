/**
 * Splits bytes at the last UTF-8 character boundary: `whole` decodes on its own, `rest` (at most
 * three bytes of an unfinished character) belongs in front of the next chunk. Invalid bytes count
 * as whole characters, so `rest` never grows past one character.
 */
export function splitAtCharBoundary(buf: Buffer): { whole: Buffer; rest: Buffer } {
  const n = buf.length;
  // Look back over at most three bytes for the lead byte of an unfinished sequence.
  for (let i = n - 1; i >= Math.max(0, n - 3); i--) {
    const b = buf[i] as number;
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: keep looking for its lead
    const need = b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 1;
    return need > n - i ? { whole: buf.subarray(0, i), rest: buf.subarray(i) } : { whole: buf, rest: buf.subarray(n) };
  }
  return { whole: buf, rest: buf.subarray(n) };
}

/**
 * One stream's output cut into whole characters: `cut` returns what decodes on its own and keeps
 * an unfinished character for the next chunk; `rest` hands over what is left at the end.
 */
export class Utf8Carry {
  private held: Buffer | undefined;

  cut(bytes: Buffer): Buffer {
    const { whole, rest } = splitAtCharBoundary(this.held ? Buffer.concat([this.held, bytes]) : bytes);
    this.held = rest.length ? Buffer.from(rest) : undefined;
    return whole;
  }

  /** Bytes held back (an unfinished character). */
  get heldBytes(): number {
    return this.held?.length ?? 0;
  }

  /** The unfinished character left at the end (it decodes to a replacement character), if any. */
  rest(): Buffer | undefined {
    const held = this.held;
    this.held = undefined;
    return held;
  }
}
