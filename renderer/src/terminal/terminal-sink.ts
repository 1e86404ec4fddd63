import { concatBytes } from '../lib/concat-bytes';

/** What the sink needs of an xterm Terminal (a fake in tests). xterm takes UTF-8 bytes as they are. */
export interface TerminalLike {
  write(data: Uint8Array, callback?: () => void): void;
}

export interface TerminalSinkOptions {
  /** Max bytes waiting here (not yet given to xterm) before the oldest are dropped. */
  maxBacklogBytes?: number;
  /** Max bytes given to xterm and not yet parsed; more waits here, where it can be dropped. */
  maxInflightBytes?: number;
  /** Batch interval; ~one frame. */
  intervalMs?: number;
}

export function gapMarker(droppedBytes: number): string {
  const size = droppedBytes >= 1024 * 1024 ? `${(droppedBytes / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(droppedBytes / 1024))} KB`;
  return `\r\n\x1b[30;43m … ${size} of output skipped in the live view (the full log is kept) … \x1b[0m\r\n`;
}

type Part = Uint8Array | { dropped: number };
const encoder = new TextEncoder();

/**
 * Feeds an xterm directly, never through React state (DESIGN.md §5): writes are batched per
 * frame, and both what xterm has yet to parse and what waits here are bounded. Past the bound the
 * OLDEST waiting output is dropped and a visible gap marker takes its place, so a flood never
 * freezes the UI or grows memory, and the view keeps showing the latest output. Output stays UTF-8
 * bytes (xterm decodes them, across writes too).
 */
export class TerminalSink {
  private queue: Part[] = [];
  private queuedBytes = 0;
  /** Written to xterm, not yet parsed (xterm's write callback tells us). */
  private inflightBytes = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly maxBacklog: number;
  private readonly maxInflight: number;
  private readonly intervalMs: number;
  private disposed = false;
  /** Totals in bytes, for the status line and the benchmark. */
  readonly stats = { receivedBytes: 0, renderedBytes: 0, droppedBytes: 0, gaps: 0 };
  /** Called after xterm parsed a batch (benchmark, tests). */
  onRendered?: () => void;

  constructor(private readonly term: TerminalLike, opts: TerminalSinkOptions = {}) {
    this.maxBacklog = opts.maxBacklogBytes ?? 2 * 1024 * 1024;
    this.maxInflight = opts.maxInflightBytes ?? 512 * 1024;
    this.intervalMs = opts.intervalMs ?? 16;
  }

  write(data: Uint8Array | string): void {
    const bytes = typeof data === 'string' ? encoder.encode(data) : data;
    if (this.disposed || bytes.length === 0) return;
    this.stats.receivedBytes += bytes.length;
    this.queue.push(bytes);
    this.queuedBytes += bytes.length;
    this.trim();
    this.schedule();
  }

  /** The host dropped output before it reached us (a `gap` chunk). */
  gap(droppedBytes: number): void {
    if (this.disposed) return;
    const last = this.queue.at(-1);
    if (last !== undefined && !(last instanceof Uint8Array)) last.dropped += Math.max(1, droppedBytes);
    else {
      this.queue.push({ dropped: Math.max(1, droppedBytes) });
      this.stats.gaps++;
    }
    this.schedule();
  }

  /** Drops the oldest waiting output past the bound; the newest chunk keeps at least its tail. */
  private trim(): void {
    let excess = this.queuedBytes - this.maxBacklog;
    if (excess <= 0) return;
    let dropped = 0;
    let hadGap = false;
    const drop = (n: number) => {
      dropped += n;
      excess -= n;
      this.queuedBytes -= n;
      this.stats.droppedBytes += n;
    };
    // Whole parts from the front, never the newest one…
    let n = 0;
    while (excess > 0 && n < this.queue.length - 1) {
      const part = this.queue[n++] as Part;
      if (part instanceof Uint8Array) drop(part.length);
      else {
        dropped += part.dropped;
        hadGap = true;
      }
    }
    const rest = this.queue.slice(n);
    // …then the head of the newest, if it alone is over the bound.
    const last = rest.length - 1;
    const newest = rest[last];
    if (excess > 0 && newest instanceof Uint8Array) {
      rest[last] = newest.subarray(excess);
      drop(excess);
    }
    const first = rest[0];
    if (first !== undefined && !(first instanceof Uint8Array)) {
      first.dropped += dropped;
      hadGap = true;
    } else rest.unshift({ dropped });
    if (!hadGap) this.stats.gaps++;
    this.queue = rest;
  }

  private schedule(): void {
    if (!this.timer && !this.disposed) this.timer = setTimeout(() => this.flush(), this.intervalMs);
  }

  flush(): void {
    this.timer = undefined;
    if (this.disposed || !this.queue.length) return;
    // xterm is still parsing plenty: keep the rest here, where a flood can drop its oldest part.
    if (this.inflightBytes >= this.maxInflight) return;
    const parts = this.queue.map((part) => (part instanceof Uint8Array ? part : encoder.encode(gapMarker(part.dropped))));
    this.queue = [];
    this.queuedBytes = 0;
    const batch = parts.length === 1 ? (parts[0] as Uint8Array) : concatBytes(parts);
    const len = batch.length;
    this.inflightBytes += len;
    this.term.write(batch, () => {
      this.inflightBytes -= len;
      this.stats.renderedBytes += len;
      this.onRendered?.();
      if (this.queue.length) this.schedule();
    });
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.queue = [];
  }
}

