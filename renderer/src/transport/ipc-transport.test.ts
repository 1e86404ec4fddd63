import { describe, expect, it } from 'vitest';
import { TerminalFlow } from '../terminal/terminal-flow';
import { createIpcTransport } from './ipc-transport';
import type { PreloadBridge } from './transport';

function fakeBridge() {
  const listeners = new Map<string, (payload: unknown) => void>();
  const acks: number[] = [];
  let subscriptions = 0;
  const bridge: PreloadBridge = {
    invoke: async () => ({ ok: true, value: null }),
    on(event, listener) {
      subscriptions++;
      listeners.set(event, listener);
      return () => listeners.delete(event);
    },
    ackTerminal: (total) => acks.push(total),
  };
  return { bridge, acks, emit: (event: string, payload: unknown) => listeners.get(event)?.(payload), subscriptions: () => subscriptions };
}

describe('IPC transport terminal flow control', () => {
  it('asks for flow control, and acknowledges output (characters) only once no view has any left to draw', () => {
    const f = fakeBridge();
    const flow = new TerminalFlow();
    const transport = createIpcTransport(f.bridge, flow);
    const got: unknown[] = [];
    const view = {};
    const off = transport.on('terminals:onDidData', (c) => {
      got.push(c);
      flow.setBusy(view, true);
    });
    transport.on('terminals:onDidData', () => undefined);
    expect(f.subscriptions()).toBe(1); // one bridge subscription for every listener
    expect(f.acks).toEqual([0]);
    f.emit('terminals:onDidData', { kind: 'data', terminalId: 'run:r', runId: 'r', seq: 1, data: 'héllo' });
    f.emit('terminals:onDidData', { kind: 'gap', terminalId: 'run:r', runId: 'r', fromSeq: 2, toSeq: 3, droppedBytes: 10 });
    expect(got).toHaveLength(2);
    expect(f.acks).toEqual([0]);
    flow.setBusy(view, false);
    expect(f.acks).toEqual([0, 5]);
    off();
  });
});
