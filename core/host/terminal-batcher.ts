import type { TerminalChunk } from '../../contracts';
import type { Disposable } from '../common/disposable';

export interface TerminalBatcherOptions {
  /** Sends one (merged) chunk toward the client. */
  send(chunk: TerminalChunk): void;
  /** True while the client is behind (e.g. a WebSocket's bufferedAmount over its high-water mark). */
  isCongested(): boolean;
  /** Flush interval; ~one frame so the UI gets at most one write per terminal per frame. */
  intervalMs?: number;
  /** Flush early once this many characters are pending for one terminal. */
  maxBatchChars?: number;
}

interface Pending {
  runId: string;
  parts: string[];
  chars: number;
  lastSeq: number;
  gap?: { fromSeq: number; toSeq: number; droppedBytes: number };
}

/**
 * Merges a terminal's output chunks per frame and keeps the client's backlog bounded: while the
 * client is congested, output is dropped from the live view and replaced by one `gap` chunk
 * (the full log stays on disk). A slow UI therefore never stalls the agent or grows memory.
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
    const p = this.pending.get(chunk.terminalId) ?? { runId: chunk.runId, parts: [], chars: 0, lastSeq: -1 };
    this.pending.set(chunk.terminalId, p);
    if (chunk.kind === 'data') {
      p.parts.push(chunk.data);
      p.chars += chunk.data.length;
      p.lastSeq = chunk.seq;
      if (p.chars >= this.maxBatchChars) this.flushOne(chunk.terminalId, p);
      else this.schedule();
      return;
    }
    if (chunk.kind === 'gap') {
      this.addGap(p, chunk.fromSeq, chunk.toSeq, chunk.droppedBytes);
      this.schedule();
      return;
    }
    // An exit is never dropped: flush what is pending (or its gap), then the exit.
    this.flushOne(chunk.terminalId, p, true);
    this.opts.send(chunk);
  }

  /** Sends everything pending now. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const [id, p] of this.pending) this.flushOne(id, p);
    // Congested terminals keep their gap pending: check again next frame.
    if ([...this.pending.values()].some((p) => p.gap || p.parts.length)) this.schedule();
  }

  private schedule(): void {
    if (!this.timer && !this.disposed) this.timer = setTimeout(() => this.flush(), this.intervalMs);
  }

  private addGap(p: Pending, fromSeq: number, toSeq: number, bytes: number): void {
    if (p.gap) {
      p.gap.fromSeq = Math.min(p.gap.fromSeq, fromSeq);
      p.gap.toSeq = Math.max(p.gap.toSeq, toSeq);
      p.gap.droppedBytes += bytes;
    } else {
      p.gap = { fromSeq, toSeq, droppedBytes: bytes };
    }
  }

  private flushOne(terminalId: string, p: Pending, force = false): void {
    if (p.parts.length && this.opts.isCongested() && !force) {
      const firstSeq = p.lastSeq - p.parts.length + 1;
      this.addGap(p, Math.max(0, firstSeq), p.lastSeq, Buffer.byteLength(p.parts.join(''), 'utf8'));
      p.parts = [];
      p.chars = 0;
      return;
    }
    if (p.gap && (!this.opts.isCongested() || force)) {
      this.opts.send({ kind: 'gap', terminalId, runId: p.runId, ...p.gap });
      p.gap = undefined;
    }
    if (p.parts.length) {
      const data = p.parts.length === 1 ? (p.parts[0] as string) : p.parts.join('');
      p.parts = [];
      p.chars = 0;
      this.opts.send({ kind: 'data', terminalId, runId: p.runId, seq: p.lastSeq, data });
    }
    if (!p.gap) this.pending.delete(terminalId);
  }

  dispose(): void {
    this.disposed = true;
    if (this.timer) clearTimeout(this.timer);
    this.pending.clear();
  }
}
