import { createWriteStream, type WriteStream } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { TerminalChunk } from '../../contracts/terminals';
import type { Disposable } from '../common/disposable';

/**
 * One terminal of a run: every byte goes to a log file on disk (the full record, for replay), and
 * each chunk is pushed as numbered text so transports can bound what they keep for a slow viewer.
 */
export class RunTerminal implements Disposable {
  private readonly decoder = new StringDecoder('utf8');
  private readonly file: WriteStream;
  private seq = 0;
  /** Bytes handed to the log so far (written in order, so a chunk's end offset is known now). */
  private logBytes = 0;
  private closed = false;

  constructor(
    readonly terminalId: string,
    readonly runId: string,
    logPath: string,
    private readonly push: (chunk: TerminalChunk) => void,
  ) {
    this.file = createWriteStream(logPath, { flags: 'a' });
    // A full disk must not crash the run; the live view still gets the bytes.
    this.file.on('error', () => undefined);
  }

  write(data: Buffer | string): void {
    if (this.closed || data.length === 0) return;
    this.file.write(data);
    this.logBytes += typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    // Text needs no decoding; a partial character left by earlier bytes is flushed before it.
    const text = typeof data === 'string' ? this.decoder.end() + data : this.decoder.write(data);
    if (text) this.push({ kind: 'data', terminalId: this.terminalId, runId: this.runId, seq: this.seq++, data: text, end: this.logBytes });
  }

  exit(exitCode: number | null): void {
    if (this.closed) return;
    const rest = this.decoder.end();
    if (rest) this.push({ kind: 'data', terminalId: this.terminalId, runId: this.runId, seq: this.seq++, data: rest, end: this.logBytes });
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
