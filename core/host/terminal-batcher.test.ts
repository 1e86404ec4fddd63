import { describe, expect, it } from 'vitest';
import type { TerminalChunk } from '../../contracts';
import { TerminalBatcher } from './terminal-batcher';

const data = (seq: number, text: string): TerminalChunk => ({ kind: 'data', terminalId: 'run:r-1-00000000', runId: 'r-1-00000000', seq, data: text });

describe('TerminalBatcher', () => {
  it('merges chunks of one frame into one send', () => {
    const sent: TerminalChunk[] = [];
    const b = new TerminalBatcher({ send: (c) => sent.push(c), isCongested: () => false, intervalMs: 1000 });
    b.push(data(0, 'a'));
    b.push(data(1, 'b'));
    b.push(data(2, 'c'));
    expect(sent).toEqual([]);
    b.flush();
    expect(sent).toEqual([{ ...data(2, 'abc') }]);
    b.dispose();
  });

  it('drops output while the client is congested and sends one gap marker before resuming', () => {
    const sent: TerminalChunk[] = [];
    let congested = true;
    const b = new TerminalBatcher({ send: (c) => sent.push(c), isCongested: () => congested, intervalMs: 1000 });
    b.push(data(0, 'xx'));
    b.push(data(1, 'yy'));
    b.flush();
    b.push(data(2, 'zz'));
    b.flush();
    expect(sent).toEqual([]);
    congested = false;
    b.push(data(3, 'ok'));
    b.flush();
    expect(sent).toEqual([
      { kind: 'gap', terminalId: 'run:r-1-00000000', runId: 'r-1-00000000', fromSeq: 0, toSeq: 2, droppedBytes: 6 },
      data(3, 'ok'),
    ]);
    b.dispose();
  });

  it('never drops an exit', () => {
    const sent: TerminalChunk[] = [];
    const b = new TerminalBatcher({ send: (c) => sent.push(c), isCongested: () => true, intervalMs: 1000 });
    b.push({ kind: 'exit', terminalId: 'run:r-1-00000000', runId: 'r-1-00000000', seq: 0, exitCode: 0 });
    expect(sent.map((c) => c.kind)).toEqual(['exit']);
    b.dispose();
  });
});
