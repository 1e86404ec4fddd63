import { describe, expect, it } from 'vitest';
import type { TerminalChunk } from '../../contracts';
import { TerminalBatcher, textChunks } from './terminal-batcher';

const data = (seq: number, text: string, end?: number): TerminalChunk => ({ kind: 'data', terminalId: 'run:r-1-00000000', runId: 'r-1-00000000', seq, data: text, ...(end !== undefined ? { end } : {}) });

describe('TerminalBatcher', () => {
  it('merges chunks of one frame into one send', () => {
    const sent: TerminalChunk[] = [];
    const b = new TerminalBatcher(textChunks, { send: (c) => sent.push(c), isCongested: () => false, intervalMs: 1000 });
    b.push(data(0, 'a'));
    b.push(data(1, 'b'));
    b.push(data(2, 'c'));
    expect(sent).toEqual([]);
    b.flush();
    expect(sent).toEqual([{ ...data(2, 'abc') }]);
    b.dispose();
  });

  it('while the client is congested, keeps only the newest output and sends one gap marker before it', () => {
    const sent: TerminalChunk[] = [];
    let congested = true;
    const b = new TerminalBatcher(textChunks, { send: (c) => sent.push(c), isCongested: () => congested, intervalMs: 1000, maxBatch: 4 });
    b.push(data(0, 'xx', 2));
    b.push(data(1, 'yy', 4));
    b.flush();
    b.push(data(2, 'zz', 6));
    b.push(data(3, 'ww', 8));
    b.flush();
    expect(sent).toEqual([]);
    congested = false;
    b.flush();
    expect(sent).toEqual([
      { kind: 'gap', terminalId: 'run:r-1-00000000', runId: 'r-1-00000000', fromSeq: 0, toSeq: 1, droppedBytes: 4, end: 4 },
      data(3, 'zzww', 8),
    ]);
    b.dispose();
  });

  it('sends the last output of a flood once the client catches up, with no new output needed', () => {
    const sent: TerminalChunk[] = [];
    let congested = true;
    const b = new TerminalBatcher(textChunks, { send: (c) => sent.push(c), isCongested: () => congested, intervalMs: 5, maxBatch: 4 });
    for (let i = 0; i < 10; i++) b.push(data(i, `${i}${i}`));
    congested = false;
    return new Promise<void>((resolve) => setTimeout(() => {
      expect(sent.map((c) => c.kind)).toEqual(['gap', 'data']);
      expect(sent[1]).toMatchObject({ seq: 9, data: '8899' });
      b.dispose();
      resolve();
    }, 50));
  });

  it('never drops an exit', () => {
    const sent: TerminalChunk[] = [];
    const b = new TerminalBatcher(textChunks, { send: (c) => sent.push(c), isCongested: () => true, intervalMs: 1000 });
    b.push({ kind: 'exit', terminalId: 'run:r-1-00000000', runId: 'r-1-00000000', seq: 0, exitCode: 0 });
    expect(sent.map((c) => c.kind)).toEqual(['exit']);
    b.dispose();
  });
});
