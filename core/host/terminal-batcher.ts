import type { TerminalChunk } from '../../contracts';
import type { Disposable } from '../common/disposable';

export interface TerminalBatcherOptions {
  /** Sends one (merged) chunk toward the client. */
  send(chunk: TerminalChunk): void;
  /** True while the client is behind (e.g. a response's or socket's queue over its high-water mark). */
  isCongested(): boolean;
  /** Flush interval; ~one frame so the UI gets at most one write per terminal per frame. */
  intervalMs?: number;
  /** Flush early once this many characters are pending for one terminal; also what a congested terminal keeps. */
  maxBatchChars?: number;
}

type DataChunk = Extract<TerminalChunk, { kind: 'data' }>;
type Gap = { fromSeq: number; toSeq: number; droppedBytes: number; end?: number };

interface Pending {
  runId: string;
  parts: DataChunk[];
  chars: number;
  gap?: Gap;
}

/**
 * Merges a terminal's output chunks per frame and keeps the client's backlog bounded: while the
 * client is congested, only the newest output waits (up to `maxBatchChars`); older output is
 * dropped from the live view and replaced by one `gap` chunk (the full log stays on disk). A slow
 * UI therefore never stalls the agent or grows memory, and still gets the latest output.
 */
export class TerminalBatcher implements Disposable {
  private readonly pending = new Map<string, Pending>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly intervalMs: number;
  private readonly maxBatchChars: number;
  private disposed = false;

  constructor(private readonly opts: TerminalBatcherOptions) {
    this.intervalMs = opts.intervalMs ?? 16;
    this.maxBatchChars = opts.maxBatchChars ?? 256 * 1024;
  }

  push(chunk: TerminalChunk): void {
    if (this.disposed) return;
    const p = this.pending.get(chunk.terminalId) ?? { runId: chunk.runId, parts: [], chars: 0 };
    this.pending.set(chunk.terminalId, p);
    if (chunk.kind === 'data') {
      p.parts.push(chunk);
      p.chars += chunk.data.length;
      if (p.chars >= this.maxBatchChars) this.flushOne(chunk.terminalId, p);
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

  private addGap(p: Pending, g: Gap): void {
    if (!p.gap) p.gap = { fromSeq: g.fromSeq, toSeq: g.toSeq, droppedBytes: 0 };
    p.gap.fromSeq = Math.min(p.gap.fromSeq, g.fromSeq);
    p.gap.toSeq = Math.max(p.gap.toSeq, g.toSeq);
    p.gap.droppedBytes += g.droppedBytes;
    if (g.end !== undefined) p.gap.end = Math.max(p.gap.end ?? 0, g.end);
  }

  /** Drops the oldest pending output of a congested terminal until what is left fits. */
  private keepNewest(p: Pending): void {
    while (p.chars > this.maxBatchChars && p.parts.length > 1) {
      const old = p.parts.shift() as DataChunk;
      p.chars -= old.data.length;
      this.addGap(p, { fromSeq: old.seq, toSeq: old.seq, droppedBytes: Buffer.byteLength(old.data), ...(old.end !== undefined ? { end: old.end } : {}) });
    }
  }

  private flushOne(terminalId: string, p: Pending, force = false): void {
    if (!force && this.opts.isCongested()) {
      this.keepNewest(p);
      return;
    }
    if (p.gap) this.opts.send({ kind: 'gap', terminalId, runId: p.runId, ...p.gap });
    const last = p.parts.at(-1);
    if (last) {
      const data = p.parts.length === 1 ? last.data : p.parts.map((c) => c.data).join('');
      this.opts.send({ ...last, data });
    }
    this.pending.delete(terminalId);
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.pending.clear();
  }
}
