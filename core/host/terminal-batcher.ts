import type { TerminalChunk } from '../../contracts';
import type { Disposable } from '../common/disposable';
import type { TerminalBytes } from '../common/terminal-output';

export type GapOrExit = Exclude<TerminalChunk, { kind: 'data' }>;
type Gap = { fromSeq: number; toSeq: number; droppedBytes: number; end?: number };

/** How the batcher handles one kind of data chunk: text (WebSocket, IPC) or bytes (the browser stream). */
export interface ChunkCodec<D extends { kind: string; seq: number; end?: number }> {
  isData(chunk: D | GapOrExit): chunk is D;
  /** Characters or bytes: what the batch bound counts. */
  size(chunk: D): number;
  byteLength(chunk: D): number;
  /** One chunk with the parts' content, the last part's seq and end. */
  merge(parts: D[]): D;
}

export type TextChunk = Extract<TerminalChunk, { kind: 'data' }>;

export const textChunks: ChunkCodec<TextChunk> = {
  isData: (c): c is TextChunk => c.kind === 'data',
  size: (c) => c.data.length,
  byteLength: (c) => Buffer.byteLength(c.data),
  merge: (parts) => ({ ...(parts.at(-1) as TextChunk), data: parts.map((p) => p.data).join('') }),
};

export const byteChunks: ChunkCodec<TerminalBytes> = {
  isData: (c): c is TerminalBytes => c.kind === 'bytes',
  size: (c) => c.bytes.length,
  byteLength: (c) => c.bytes.length,
  merge: (parts) => ({ ...(parts.at(-1) as TerminalBytes), bytes: Buffer.concat(parts.map((p) => p.bytes)) }),
};

export interface TerminalBatcherOptions<D> {
  /** Sends one (merged) chunk toward the client. */
  send(chunk: D | GapOrExit): void;
  /** True while the client is behind (e.g. a response's or socket's queue over its high-water mark). */
  isCongested(): boolean;
  /** Flush interval; ~one frame so the UI gets at most one write per terminal per frame. */
  intervalMs?: number;
  /** Flush early once this much (characters of text, or bytes) is pending for one terminal; also what a congested terminal keeps. */
  maxBatch?: number;
}

interface Pending<D> {
  runId: string;
  parts: D[];
  /** Characters or bytes pending (the codec's size). */
  size: number;
  gap?: Gap;
}

/**
 * Merges a terminal's output chunks per frame and keeps the client's backlog bounded: while the
 * client is congested, only the newest output waits (up to `maxBatch`); older output is
 * dropped from the live view and replaced by one `gap` chunk (the full log stays on disk). A slow
 * UI therefore never stalls the agent or grows memory, and still gets the latest output.
 */
export class TerminalBatcher<D extends { kind: string; terminalId: string; runId: string; seq: number; end?: number }> implements Disposable {
  private readonly pending = new Map<string, Pending<D>>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly intervalMs: number;
  private readonly maxBatch: number;
  private disposed = false;

  constructor(
    private readonly codec: ChunkCodec<D>,
    private readonly opts: TerminalBatcherOptions<D>,
  ) {
    this.intervalMs = opts.intervalMs ?? 16;
    this.maxBatch = opts.maxBatch ?? 256 * 1024;
  }

  push(chunk: D | GapOrExit): void {
    if (this.disposed) return;
    const p: Pending<D> = this.pending.get(chunk.terminalId) ?? { runId: chunk.runId, parts: [], size: 0 };
    this.pending.set(chunk.terminalId, p);
    if (this.codec.isData(chunk)) {
      p.parts.push(chunk);
      p.size += this.codec.size(chunk);
      if (p.size >= this.maxBatch) this.flushOne(chunk.terminalId, p);
      else this.schedule();
      return;
    }
    if (chunk.kind === 'gap') {
      this.addGap(p, chunk);
      this.schedule();
      return;
    }
    // An exit is never dropped: flush what is pending (or its gap), then the exit.
    this.flushOne(chunk.terminalId, p, true);
    this.opts.send(chunk);
  }

  /** Sends everything pending now (congested terminals keep waiting, bounded). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const [id, p] of this.pending) this.flushOne(id, p);
    if (this.pending.size) this.schedule();
  }

  private schedule(): void {
    if (!this.timer && !this.disposed) this.timer = setTimeout(() => this.flush(), this.intervalMs);
  }

  private addGap(p: Pending<D>, g: Gap): void {
    if (!p.gap) p.gap = { fromSeq: g.fromSeq, toSeq: g.toSeq, droppedBytes: 0 };
    p.gap.fromSeq = Math.min(p.gap.fromSeq, g.fromSeq);
    p.gap.toSeq = Math.max(p.gap.toSeq, g.toSeq);
    p.gap.droppedBytes += g.droppedBytes;
    if (g.end !== undefined) p.gap.end = Math.max(p.gap.end ?? 0, g.end);
  }

  /** Drops the oldest pending output of a congested terminal until what is left fits. */
  private keepNewest(p: Pending<D>): void {
    while (p.size > this.maxBatch && p.parts.length > 1) {
      const old = p.parts.shift() as D;
      p.size -= this.codec.size(old);
      this.addGap(p, { fromSeq: old.seq, toSeq: old.seq, droppedBytes: this.codec.byteLength(old), ...(old.end !== undefined ? { end: old.end } : {}) });
    }
  }

  private flushOne(terminalId: string, p: Pending<D>, force = false): void {
    if (!force && this.opts.isCongested()) {
      this.keepNewest(p);
      return;
    }
    if (p.gap) this.opts.send({ kind: 'gap', terminalId, runId: p.runId, ...p.gap });
    if (p.parts.length) this.opts.send(p.parts.length === 1 ? (p.parts[0] as D) : this.codec.merge(p.parts));
    this.pending.delete(terminalId);
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.pending.clear();
  }
}
