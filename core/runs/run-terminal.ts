import { createWriteStream, type WriteStream } from 'node:fs';
import type { Disposable } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import { splitAtCharBoundary } from '../common/utf8';

/**
 * One terminal of a run: every byte goes to a log file on disk (the full record, for replay), and
 * each chunk is pushed as numbered bytes, cut at character boundaries, so transports can bound what
 * they keep for a slow viewer and decode only if they carry text.
 */
export class RunTerminal implements Disposable {
  /** The start of a character the last write cut: it goes out with the next one. */
  private carry: Buffer | undefined;
  private readonly file: WriteStream;
  private seq = 0;
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
    this.file.write(bytes);
    this.logBytes += bytes.length;
    const { whole, rest } = splitAtCharBoundary(this.carry ? Buffer.concat([this.carry, bytes]) : bytes);
    this.carry = rest.length ? Buffer.from(rest) : undefined;
    if (whole.length) this.push({ kind: 'bytes', terminalId: this.terminalId, runId: this.runId, seq: this.seq++, end: this.logBytes - rest.length, bytes: whole });
  }

  exit(exitCode: number | null): void {
    if (this.closed) return;
    if (this.carry) this.push({ kind: 'bytes', terminalId: this.terminalId, runId: this.runId, seq: this.seq++, end: this.logBytes, bytes: this.carry });
    this.carry = undefined;
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
