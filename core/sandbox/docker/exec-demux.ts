import { Readable } from 'node:stream';

/**
 * Splits Docker's multiplexed exec stream (8-byte header: stream id, 3 zero bytes, big-endian
 * length) into stdout, with backpressure, and stderr, handed to a sink and never mixed in. Frame
 * boundaries mean nothing inside a byte stream, so payloads come out as views into the socket's
 * chunks, cut wherever a chunk or frame ends: no bytes are copied on the channel's hot path.
 */
export class ExecDemuxer {
  readonly stdout: Readable;
  /** The frame header being gathered (a chunk can end inside it). */
  private readonly header = Buffer.alloc(8);
  private headerFill = 0;
  /** The current frame's stream id and the payload bytes it still has. */
  private kind = 0;
  private remaining = 0;
  private paused = false;

  constructor(
    private readonly source: NodeJS.ReadableStream & { pause(): unknown; resume(): unknown },
    private readonly onStderr: (chunk: Buffer) => void,
  ) {
    this.stdout = new Readable({
      read: () => {
        if (this.paused) {
          this.paused = false;
          this.source.resume();
        }
      },
    });
    source.on('data', (chunk: Buffer | string) => this.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk));
    source.on('end', () => this.stdout.push(null));
    source.on('close', () => {
      if (!this.stdout.readableEnded) this.stdout.push(null);
    });
    source.on('error', (err: Error) => this.stdout.destroy(err));
  }

  private push(chunk: Buffer): void {
    let wantsMore = true;
    let off = 0;
    while (off < chunk.length) {
      if (this.remaining === 0) {
        const take = Math.min(8 - this.headerFill, chunk.length - off);
        chunk.copy(this.header, this.headerFill, off, off + take);
        this.headerFill += take;
        off += take;
        if (this.headerFill < 8) break;
        this.headerFill = 0;
        this.kind = this.header[0] as number;
        this.remaining = this.header.readUInt32BE(4);
        continue;
      }
      const take = Math.min(this.remaining, chunk.length - off);
      const piece = chunk.subarray(off, off + take);
      off += take;
      this.remaining -= take;
      if (this.kind === 2) this.onStderr(piece);
      else if (this.kind === 1 || this.kind === 0) wantsMore = this.stdout.push(piece) && wantsMore;
    }
    if (!wantsMore && !this.paused) {
      this.paused = true;
      this.source.pause();
    }
  }
}

/** A bounded tail of text, for diagnostics (helper stderr) without unbounded memory. */
export class TextTail {
  private chunks: string[] = [];
  private size = 0;

  constructor(private readonly maxChars = 8192) {}

  append(text: string): void {
    this.chunks.push(text);
    this.size += text.length;
    while (this.size > this.maxChars && this.chunks.length > 1) {
      this.size -= (this.chunks.shift() as string).length;
    }
  }

  toString(): string {
    const all = this.chunks.join('');
    return all.length > this.maxChars ? all.slice(all.length - this.maxChars) : all;
  }
}
