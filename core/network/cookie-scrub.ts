/**
 * Airlock's own session cookie (`airlock serve`) must not reach a sandbox. Cookies are scoped to a
 * host, not a port, so a browser sends the cookie of the UI at 127.0.0.1:A with every request to a
 * published preview at 127.0.0.1:B, and the preview would hand it to the sandbox (issue 12, attack 6).
 * The preview path therefore blanks the value of every `airlock_token_<port>=` it forwards: same
 * length (`x`s), so no framing (Content-Length, chunk sizes) changes, across chunk boundaries.
 */
import { Transform, type TransformCallback } from 'node:stream';

/** The name prefix of the cookie `airlock serve` sets (`airlock_token_<port>`). */
export const AIRLOCK_COOKIE_PREFIX = 'airlock_token_';

const NAME = Buffer.from(AIRLOCK_COOKIE_PREFIX, 'latin1');
/** A value longer than this is blanked up to here and the rest passes: nothing waits on it forever. */
const MAX_VALUE_BYTES = 1024;
/** Held bytes (a name or value that may go on in the next chunk) go out after this much quiet. */
const HOLD_MS = 20;

const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
/** Cookie value octets (RFC 6265) minus `;`, `,`, space, quotes and controls. */
const isValue = (b: number) => b > 0x20 && b < 0x7f && b !== 0x3b && b !== 0x2c && b !== 0x22 && b !== 0x5c;

/** The scrubbing state of one byte stream. */
export class CookieScrubber {
  private held: Buffer = Buffer.alloc(0);

  /** Scrubs a chunk; returns what may go out now (the rest is held until more comes, or `flush`). */
  push(chunk: Buffer): Buffer {
    let buf = this.held.length ? Buffer.concat([this.held, chunk]) : chunk;
    let copied = this.held.length > 0;
    this.held = Buffer.alloc(0);
    let hold = buf.length;
    for (let i = buf.indexOf(NAME); i >= 0; i = buf.indexOf(NAME, i + 1)) {
      let j = i + NAME.length;
      while (j < buf.length && isDigit(buf[j] as number)) j++;
      if (j >= buf.length) {
        hold = i;
        break;
      }
      if (buf[j] !== 0x3d) continue; // not `name=`
      const start = ++j;
      while (j < buf.length && j - start < MAX_VALUE_BYTES && isValue(buf[j] as number)) j++;
      if (j >= buf.length && j - start < MAX_VALUE_BYTES) {
        hold = i;
        break;
      }
      if (!copied) {
        buf = Buffer.from(buf);
        copied = true;
      }
      buf.fill(0x78, start, j);
    }
    if (hold === buf.length) {
      // A proper prefix of the name at the very end may be completed by the next chunk.
      for (let n = Math.min(NAME.length - 1, buf.length); n > 0; n--) {
        if (buf.subarray(buf.length - n).equals(NAME.subarray(0, n))) {
          hold = buf.length - n;
          break;
        }
      }
    }
    if (hold < buf.length) this.held = Buffer.from(buf.subarray(hold));
    return buf.subarray(0, hold);
  }

  /** What is held, blanked as far as it goes (the stream ended or went quiet). */
  flush(): Buffer {
    const rest = this.held;
    this.held = Buffer.alloc(0);
    const i = rest.indexOf(NAME);
    if (i < 0) return rest;
    let j = i + NAME.length;
    while (j < rest.length && isDigit(rest[j] as number)) j++;
    if (rest[j] === 0x3d) rest.fill(0x78, j + 1);
    return rest;
  }

  get holding(): boolean {
    return this.held.length > 0;
  }
}

/** A Transform that scrubs Airlock cookies from the bytes passing through it. */
export class CookieScrubStream extends Transform {
  private readonly scrubber = new CookieScrubber();
  private timer: NodeJS.Timeout | undefined;

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const out = this.scrubber.push(chunk);
    if (out.length) this.push(out);
    if (this.scrubber.holding) {
      this.timer = setTimeout(() => {
        this.timer = undefined;
        const rest = this.scrubber.flush();
        if (rest.length) this.push(rest);
      }, HOLD_MS);
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.timer) clearTimeout(this.timer);
    const rest = this.scrubber.flush();
    if (rest.length) this.push(rest);
    done();
  }

  override _destroy(err: Error | null, done: (error?: Error | null) => void): void {
    if (this.timer) clearTimeout(this.timer);
    done(err);
  }
}
