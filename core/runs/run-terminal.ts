import { createWriteStream, type WriteStream } from 'node:fs';
import type { Disposable } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import { Utf8Carry } from '../common/utf8';

/** Most bytes a terminal's log keeps by default; past it, a marker says what was left out. */
export const DEFAULT_TERMINAL_LOG_BYTES = 512 * 1024 * 1024;
/** Bytes the log may have queued for the disk: past it, output is dropped rather than held in memory. */
const MAX_PENDING_LOG_BYTES = 32 * 1024 * 1024;

export interface RunTerminalOptions {
  /** Most bytes the log keeps (default 512 MiB); the sandbox decides how much it prints, not how much the host keeps. */
  maxLogBytes?: number;
}

/**
 * One terminal of a run: every byte goes to a log file on disk (the record, for replay), and each
 * chunk is pushed as numbered bytes, cut at character boundaries, so transports can bound what they
 * keep for a slow viewer and decode only if they carry text. The log is capped: past `maxLogBytes`
 * one marker line goes to the log and the live view and the rest is counted, not kept. Host memory
 * stays bounded whatever a sandbox prints: when the disk falls behind, output is dropped (and said
 * so) instead of queued without limit.
 */
export class RunTerminal implements Disposable {
  /** The start of a character the last write cut: it goes out with the next one. */
  private readonly carry = new Utf8Carry();
  private readonly file: WriteStream;
  private seq = 0;
  /** Writes in one tick reach the file as one writev (a flood arrives as many small chunks). */
  private corked = false;
  /** Bytes handed to the log so far (written in order, so a chunk's end offset is known now). */
  private logBytes = 0;
  private closed = false;
  private readonly maxLogBytes: number;
  /** The cap was reached: nothing more is kept. */
  private capped = false;
  /** Bytes not kept: past the cap, or while the disk was behind. */
  droppedBytes = 0;
  /** Bytes dropped in the current stretch of the disk being behind (said once it catches up). */
  private behindBytes = 0;

  constructor(
    readonly terminalId: string,
    readonly runId: string,
    logPath: string,
    private readonly push: (chunk: TerminalOutput) => void,
    opts: RunTerminalOptions = {},
  ) {
    this.maxLogBytes = opts.maxLogBytes ?? DEFAULT_TERMINAL_LOG_BYTES;
    this.file = createWriteStream(logPath, { flags: 'a' });
    // A full disk must not crash the run; the live view still gets the bytes.
    this.file.on('error', () => undefined);
  }

  /** Bytes the log holds (markers included). */
  get loggedBytes(): number {
    return this.logBytes;
  }

  write(data: Buffer | string): void {
    if (this.closed || data.length === 0) return;
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    if (this.capped) {
      this.droppedBytes += bytes.length;
      return;
    }
    if (this.logBytes + bytes.length > this.maxLogBytes) {
      this.capped = true;
      this.droppedBytes += bytes.length;
      this.emit(Buffer.from(`\r\n\x1b[33m[airlock] terminal log limit of ${this.maxLogBytes} bytes reached: further output is not kept\x1b[0m\r\n`));
      return;
    }
    if (this.file.writableLength > MAX_PENDING_LOG_BYTES) {
      this.behindBytes += bytes.length;
      this.droppedBytes += bytes.length;
      return;
    }
    if (this.behindBytes) {
      const n = this.behindBytes;
      this.behindBytes = 0;
      this.emit(Buffer.from(`\r\n\x1b[33m[airlock] ${n} bytes of output dropped: the log on disk fell behind\x1b[0m\r\n`));
    }
    this.emit(bytes);
  }

  private emit(bytes: Buffer): void {
    if (!this.corked) {
      this.corked = true;
      this.file.cork();
      process.nextTick(() => {
        this.corked = false;
        this.file.uncork();
      });
    }
    this.file.write(bytes);
    this.logBytes += bytes.length;
    const whole = this.carry.cut(bytes);
    // The end offset counts only what is pushed: a held partial character goes with the next chunk.
    if (whole.length) this.push({ kind: 'bytes', terminalId: this.terminalId, runId: this.runId, seq: this.seq++, end: this.logBytes - this.carry.heldBytes, bytes: whole });
  }

  exit(exitCode: number | null): void {
    if (this.closed) return;
    if (this.behindBytes && !this.capped) {
      this.emit(Buffer.from(`\r\n\x1b[33m[airlock] ${this.behindBytes} bytes of output dropped: the log on disk fell behind\x1b[0m\r\n`));
      this.behindBytes = 0;
    }
    if (this.capped) this.emit(Buffer.from(`\r\n\x1b[33m[airlock] ${this.droppedBytes} bytes of output in all were not kept\x1b[0m\r\n`));
    const rest = this.carry.rest();
    if (rest) this.push({ kind: 'bytes', terminalId: this.terminalId, runId: this.runId, seq: this.seq++, end: this.logBytes, bytes: rest });
    this.push({ kind: 'exit', terminalId: this.terminalId, runId: this.runId, seq: this.seq++, exitCode });
    this.dispose();
  }

  /** Resolves once everything written so far is on disk. */
  flush(): Promise<void> {
    return new Promise((resolve) => {
      if (this.file.writableFinished || this.file.destroyed) return resolve();
      this.file.write('', () => resolve());
    });
  }

  dispose(): void {
    if (this.closed) return;
    this.closed = true;
    this.file.end();
  }
}
