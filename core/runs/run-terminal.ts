import { createWriteStream, type WriteStream } from 'node:fs';
import type { Disposable } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import { Utf8Carry } from '../common/utf8';

/**
 * One terminal of a run: every byte goes to a log file on disk (the full record, for replay), and
 * each chunk is pushed as numbered bytes, cut at character boundaries, so transports can bound what
 * they keep for a slow viewer and decode only if they carry text.
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

  constructor(
    readonly terminalId: string,
    readonly runId: string,
    logPath: string,
    private readonly push: (chunk: TerminalOutput) => void,
  ) {
    this.file = createWriteStream(logPath, { flags: 'a' });
    // A full disk must not crash the run; the live view still gets the bytes.
    this.file.on('error', () => undefined);
  }

  write(data: Buffer | string): void {
    if (this.closed || data.length === 0) return;
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
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
