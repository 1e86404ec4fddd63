/** What the sink needs of an xterm Terminal (a fake in tests). */
export interface TerminalLike {
  write(data: string, callback?: () => void): void;
}

export interface TerminalSinkOptions {
  /** Max characters waiting for xterm (queued + written but not yet parsed) before output is dropped. */
  maxBacklogChars?: number;
  /** Batch interval; ~one frame. */
  intervalMs?: number;
}

export function gapMarker(droppedBytes: number): string {
  const size = droppedBytes >= 1024 * 1024 ? `${(droppedBytes / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(droppedBytes / 1024))} KB`;
  return `\r\n\x1b[30;43m … ${size} of output skipped in the live view (the full log is kept) … \x1b[0m\r\n`;
}

/**
 * Feeds an xterm directly, never through React state (DESIGN.md §5): writes are batched per
 * frame, and the backlog is bounded — past the bound, output is dropped and a visible gap marker
 * is written instead, so a flood never freezes the UI or grows memory.
 */
export class TerminalSink {
  /** Text, and gap markers at the point where output was dropped (their size grows until flushed). */
  private queue: Array<string | { dropped: number }> = [];
  private openGap: { dropped: number } | undefined;
  private queuedChars = 0;
  /** Written to xterm, not yet parsed (xterm's write callback tells us). */
  private inflightChars = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly maxBacklog: number;
  private readonly intervalMs: number;
  private disposed = false;
  /** Totals, for the status line and the benchmark. */
  readonly stats = { receivedChars: 0, renderedChars: 0, droppedChars: 0, gaps: 0 };
  /** Called after xterm parsed a batch (benchmark, tests). */
  onRendered?: () => void;

  constructor(private readonly term: TerminalLike, opts: TerminalSinkOptions = {}) {
    this.maxBacklog = opts.maxBacklogChars ?? 4 * 1024 * 1024;
    this.intervalMs = opts.intervalMs ?? 16;
  }

  write(data: string): void {
    if (this.disposed || data.length === 0) return;
    this.stats.receivedChars += data.length;
    if (this.queuedChars + this.inflightChars + data.length > this.maxBacklog) {
      this.markGap(data.length);
      this.stats.droppedChars += data.length;
    } else {
      this.queue.push(data);
      this.queuedChars += data.length;
      this.openGap = undefined;
    }
    this.schedule();
  }

  private markGap(bytes: number): void {
    if (this.openGap) this.openGap.dropped += bytes;
    else {
      this.openGap = { dropped: bytes };
      this.queue.push(this.openGap);
      this.stats.gaps++;
    }
  }

  /** The host dropped output before it reached us (a `gap` chunk). */
  gap(droppedBytes: number): void {
    this.markGap(Math.max(1, droppedBytes));
    this.schedule();
  }

  private schedule(): void {
    if (!this.timer && !this.disposed) this.timer = setTimeout(() => this.flush(), this.intervalMs);
  }

  flush(): void {
    this.timer = undefined;
    if (this.disposed) return;
    if (!this.queue.length) return;
    const text = this.queue.map((part) => (typeof part === 'string' ? part : gapMarker(part.dropped))).join('');
    this.queue = [];
    this.queuedChars = 0;
    this.openGap = undefined;
    if (!text) return;
    const len = text.length;
    this.inflightChars += len;
    this.term.write(text, () => {
      this.inflightChars -= len;
      this.stats.renderedChars += len;
      this.onRendered?.();
    });
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.queue = [];
  }
}
