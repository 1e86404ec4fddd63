/** What the sink needs of an xterm Terminal (a fake in tests). */
export interface TerminalLike {
  write(data: string, callback?: () => void): void;
}

export interface TerminalSinkOptions {
  /** Max characters waiting here (not yet given to xterm) before the oldest are dropped. */
  maxBacklogChars?: number;
  /** Max characters given to xterm and not yet parsed; more waits here, where it can be dropped. */
  maxInflightChars?: number;
  /** Batch interval; ~one frame. */
  intervalMs?: number;
}

export function gapMarker(droppedBytes: number): string {
  const size = droppedBytes >= 1024 * 1024 ? `${(droppedBytes / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(droppedBytes / 1024))} KB`;
  return `\r\n\x1b[30;43m … ${size} of output skipped in the live view (the full log is kept) … \x1b[0m\r\n`;
}

type Part = string | { dropped: number };

/**
 * Feeds an xterm directly, never through React state (DESIGN.md §5): writes are batched per
 * frame, and both what xterm has yet to parse and what waits here are bounded. Past the bound the
 * OLDEST waiting output is dropped and a visible gap marker takes its place, so a flood never
 * freezes the UI or grows memory, and the view keeps showing the latest output.
 */
export class TerminalSink {
  private queue: Part[] = [];
  private queuedChars = 0;
  /** Written to xterm, not yet parsed (xterm's write callback tells us). */
  private inflightChars = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly maxBacklog: number;
  private readonly maxInflight: number;
  private readonly intervalMs: number;
  private disposed = false;
  /** Totals, for the status line and the benchmark. */
  readonly stats = { receivedChars: 0, renderedChars: 0, droppedChars: 0, gaps: 0 };
  /** Called after xterm parsed a batch (benchmark, tests). */
  onRendered?: () => void;

  constructor(private readonly term: TerminalLike, opts: TerminalSinkOptions = {}) {
    this.maxBacklog = opts.maxBacklogChars ?? 2 * 1024 * 1024;
    this.maxInflight = opts.maxInflightChars ?? 512 * 1024;
    this.intervalMs = opts.intervalMs ?? 16;
  }

  write(data: string): void {
    if (this.disposed || data.length === 0) return;
    this.stats.receivedChars += data.length;
    this.queue.push(data);
    this.queuedChars += data.length;
    this.trim();
    this.schedule();
  }

  /** The host dropped output before it reached us (a `gap` chunk). */
  gap(droppedBytes: number): void {
    if (this.disposed) return;
    const last = this.queue.at(-1);
    if (last !== undefined && typeof last !== 'string') last.dropped += Math.max(1, droppedBytes);
    else {
      this.queue.push({ dropped: Math.max(1, droppedBytes) });
      this.stats.gaps++;
    }
    this.schedule();
  }

  /** Drops the oldest waiting output past the bound; the newest chunk keeps at least its tail. */
  private trim(): void {
    let excess = this.queuedChars - this.maxBacklog;
    if (excess <= 0) return;
    let dropped = 0;
    let hadGap = false;
    const drop = (chars: number) => {
      dropped += chars;
      excess -= chars;
      this.queuedChars -= chars;
      this.stats.droppedChars += chars;
    };
    // Whole parts from the front, never the newest one…
    let n = 0;
    while (excess > 0 && n < this.queue.length - 1) {
      const part = this.queue[n++] as Part;
      if (typeof part === 'string') drop(part.length);
      else {
        dropped += part.dropped;
        hadGap = true;
      }
    }
    const rest = this.queue.slice(n);
    // …then the head of the newest, if it alone is over the bound.
    const last = rest.length - 1;
    const newest = rest[last];
    if (excess > 0 && typeof newest === 'string') {
      rest[last] = newest.slice(excess);
      drop(excess);
    }
    const first = rest[0];
    if (first !== undefined && typeof first !== 'string') {
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
    if (this.inflightChars >= this.maxInflight) return;
    const text = this.queue.map((part) => (typeof part === 'string' ? part : gapMarker(part.dropped))).join('');
    this.queue = [];
    this.queuedChars = 0;
    const len = text.length;
    this.inflightChars += len;
    this.term.write(text, () => {
      this.inflightChars -= len;
      this.stats.renderedChars += len;
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
