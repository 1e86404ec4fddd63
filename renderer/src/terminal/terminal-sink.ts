import { concatBytes } from '../lib/concat-bytes';
import type { TerminalFlow } from './terminal-flow';

/** What the sink needs of an xterm Terminal (a fake in tests). xterm takes UTF-8 bytes as they are. */
export interface TerminalLike {
  write(data: Uint8Array, callback?: () => void): void;
}

export interface TerminalSinkOptions {
  /**
   * Max bytes waiting here (not yet given to xterm) before the oldest are dropped. Also never
   * more than a few batches at the measured speed, so the view stays a few frames behind at most.
   */
  maxBacklogBytes?: number;
  /**
   * Time xterm may spend parsing one batch. One batch is parsed at a time, a frame apart, sized
   * from how fast xterm parsed the last ones, so a flood never blocks the page for long (a cold
   * xterm parses ~10× slower than a warm one) and gets a bounded share of the CPU, which the
   * producing side needs too; the rest waits here, where the oldest can be dropped.
   */
  parseBudgetMs?: number;
  /** Bounds of a batch, whatever the measured speed. */
  minBatchBytes?: number;
  maxBatchBytes?: number;
  /** Batch interval; ~one frame. */
  intervalMs?: number;
  /**
   * Frame interval in a flood (output was skipped, here or by the host): one batch of the newest
   * output per interval. A flood redraws the whole screen at every batch, which costs more than
   * parsing (~20 ms a frame here), and nobody reads 60 pages a second. The sink also reports idle
   * (which lets the host send more) only once per interval, so the host is paced the same way.
   */
  floodIntervalMs?: number;
  /** Told while output waits here or in xterm (the terminal stream's flow control). */
  flow?: Pick<TerminalFlow, 'setBusy'>;
}

export function gapMarker(droppedBytes: number): string {
  const size = droppedBytes >= 1024 * 1024 ? `${(droppedBytes / 1024 / 1024).toFixed(1)} MB` : `${Math.max(1, Math.round(droppedBytes / 1024))} KB`;
  return `\r\n\x1b[30;43m … ${size} of output skipped in the live view (the full log is kept) … \x1b[0m\r\n`;
}

type Part = Uint8Array | { dropped: number };
/** Batches that may wait here outside a flood: older output is skipped, so the view is never far behind. */
const BACKLOG_BATCHES = 8;
const encoder = new TextEncoder();

/**
 * Feeds an xterm directly, never through React state (docs/architecture.md §5): writes are batched per
 * frame, and both what xterm has yet to parse and what waits here are bounded. Past the bound the
 * OLDEST waiting output is dropped and a visible gap marker takes its place, so a flood never
 * freezes the UI or grows memory, and the view keeps showing the latest output. Output stays UTF-8
 * bytes (xterm decodes them, across writes too).
 */
export class TerminalSink {
  private queue: Part[] = [];
  private queuedBytes = 0;
  /** A batch is written to xterm and not yet parsed (xterm's write callback tells us). */
  private inflight = false;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly maxBacklog: number;
  private readonly maxBatch: number;
  private readonly minBatch: number;
  private readonly budgetMs: number;
  /** xterm's parse speed, bytes per ms, from the last batch big enough to measure. */
  private bytesPerMs: number;
  private readonly intervalMs: number;
  private readonly floodIntervalMs: number;
  private readonly flow: Pick<TerminalFlow, 'setBusy'> | undefined;
  /** Output was skipped (here, or by the host: a gap) since the sink was last idle. */
  private flooding = false;
  private batchStartedAt = 0;
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  private disposed = false;
  /** Totals in bytes, for the status line and the benchmark. */
  readonly stats = { receivedBytes: 0, renderedBytes: 0, droppedBytes: 0, gaps: 0 };
  /** Called after xterm parsed a batch (benchmark, tests). */
  onRendered?: () => void;

  constructor(private readonly term: TerminalLike, opts: TerminalSinkOptions = {}) {
    // About what the scrollback (5000 lines) holds: older output would scroll out of view anyway.
    this.maxBacklog = opts.maxBacklogBytes ?? 1024 * 1024;
    this.maxBatch = opts.maxBatchBytes ?? 256 * 1024;
    this.minBatch = opts.minBatchBytes ?? 8 * 1024;
    this.budgetMs = opts.parseBudgetMs ?? 6;
    // Until measured, assume a cold xterm (~3 MB/s).
    this.bytesPerMs = 3 * 1024;
    this.intervalMs = opts.intervalMs ?? 16;
    this.floodIntervalMs = opts.floodIntervalMs ?? 100;
    this.flow = opts.flow;
  }

  write(data: Uint8Array | string): void {
    const bytes = typeof data === 'string' ? encoder.encode(data) : data;
    if (this.disposed || bytes.length === 0) return;
    this.stats.receivedBytes += bytes.length;
    this.queue.push(bytes);
    this.queuedBytes += bytes.length;
    this.trim();
    this.schedule();
    this.flow?.setBusy(this, true);
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
    this.flooding = true;
    this.schedule();
    this.flow?.setBusy(this, true);
  }

  /** Drops the oldest waiting output past the bound; the newest chunk keeps at least its tail. */
  private trim(): void {
    const limit = (batches: number) => this.queuedBytes - Math.min(this.maxBacklog, batches * this.batchSize());
    if (!this.flooding && limit(BACKLOG_BATCHES) <= 0) return;
    // Over the bound, or already in a flood: only the newest batch waits.
    this.flooding = true;
    let excess = limit(1);
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

  private schedule(delayMs = this.intervalMs): void {
    if (!this.timer && !this.disposed) this.timer = setTimeout(() => this.flush(), delayMs);
  }

  flush(): void {
    this.timer = undefined;
    // xterm is still parsing: the rest waits here, where a flood can drop its oldest part.
    if (this.disposed || !this.queue.length || this.inflight) return;
    const parts = this.takeBatch(this.batchSize());
    const batch = parts.length === 1 ? (parts[0] as Uint8Array) : concatBytes(parts);
    this.inflight = true;
    this.batchStartedAt = performance.now();
    this.term.write(batch, () => {
      this.inflight = false;
      // Small batches say little about speed (fixed costs dominate); others set the next size.
      if (batch.length >= this.minBatch) this.bytesPerMs = batch.length / Math.max(1, performance.now() - this.batchStartedAt);
      this.stats.renderedBytes += batch.length;
      this.onRendered?.();
      if (this.queue.length) this.schedule(this.flooding ? this.floodIntervalMs : this.intervalMs);
      else this.idle();
    });
  }

  /** Nothing waits: say so (the host may send more), in a flood not before the next frame is due. */
  private idle(): void {
    if (this.idleTimer || this.disposed) return;
    const wait = this.flooding ? this.floodIntervalMs - (performance.now() - this.batchStartedAt) : 0;
    const done = () => {
      this.idleTimer = undefined;
      if (this.queue.length || this.inflight || this.disposed) return;
      this.flooding = false;
      this.flow?.setBusy(this, false);
    };
    if (wait > 0) this.idleTimer = setTimeout(done, wait);
    else done();
  }

  /** What xterm should parse within the budget, at its last measured speed. */
  private batchSize(): number {
    return Math.min(this.maxBatch, Math.max(this.minBatch, Math.round(this.bytesPerMs * this.budgetMs)));
  }

  /** The oldest waiting output, at most `size` bytes of it (a gap marker counts as its text). */
  private takeBatch(size: number): Uint8Array[] {
    const parts: Uint8Array[] = [];
    let room = size;
    while (this.queue.length && room > 0) {
      const head = this.queue[0] as Part;
      const bytes = head instanceof Uint8Array ? head : encoder.encode(gapMarker(head.dropped));
      if (head instanceof Uint8Array && bytes.length > room) {
        // xterm decodes UTF-8 across writes, so a cut inside a character is fine.
        parts.push(bytes.subarray(0, room));
        this.queue[0] = bytes.subarray(room);
        this.queuedBytes -= room;
        break;
      }
      this.queue.shift();
      if (head instanceof Uint8Array) this.queuedBytes -= bytes.length;
      parts.push(bytes);
      room -= bytes.length;
    }
    return parts;
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.queue = [];
    this.flow?.setBusy(this, false);
  }
}

