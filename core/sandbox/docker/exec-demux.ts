import { Readable } from 'node:stream';

/**
 * Splits Docker's multiplexed exec stream (8-byte header: stream id, 3 zero bytes, big-endian
 * length) into stdout, with backpressure, and stderr, handed to a sink and never mixed in.
 */
export class ExecDemuxer {
  readonly stdout: Readable;
  private pending: Buffer = Buffer.alloc(0);
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
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let wantsMore = true;
    while (this.pending.length >= 8) {
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < 8 + size) break;
      const kind = this.pending[0];
      const payload = this.pending.subarray(8, 8 + size);
      this.pending = this.pending.subarray(8 + size);
      if (kind === 2) {
        this.onStderr(Buffer.from(payload));
      } else if (kind === 1 || kind === 0) {
        wantsMore = this.stdout.push(Buffer.from(payload)) && wantsMore;
      }
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
