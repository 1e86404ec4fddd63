import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it, vi } from 'vitest';

// Electron cannot start here: a stand-in ipcMain with the same surface carries the messages. What is
// tested is the router's own logic (sender checks, terminal batching, flow control), not Electron.
const ipc = vi.hoisted(() => ({ handlers: new Map<string, (...args: unknown[]) => unknown>(), bus: undefined as unknown as EventEmitter }));
vi.mock('electron', async () => {
  const { EventEmitter } = await import('node:events');
  ipc.bus = new EventEmitter();
  return {
    ipcMain: {
      handle: (channel: string, fn: (...args: unknown[]) => unknown) => ipc.handlers.set(channel, fn),
      removeHandler: (channel: string) => ipc.handlers.delete(channel),
      on: (channel: string, fn: (...args: unknown[]) => void) => ipc.bus.on(channel, fn),
      off: (channel: string, fn: (...args: unknown[]) => void) => ipc.bus.off(channel, fn),
    },
  };
});

const { registerIpcRouter } = await import('./ipc-router');
const { createApiRouter } = await import('../core/api/router');
const { createFakeServices } = await import('../test/support/fake-services');
const { IPC_SUBSCRIBE, IPC_TERMINAL_ACK } = await import('../preload/bridge-protocol');
const { TERMINAL_FLOW_WINDOW } = await import('../core/host/flow-window');

/** A window's webContents: records what main sends it. */
function fakeWindow(id: number) {
  const sent: Array<{ event: string; payload: Record<string, unknown> }> = [];
  const destroyed = new EventEmitter();
  const sender = {
    id,
    isDestroyed: () => false,
    send: (_ch: string, event: string, payload: Record<string, unknown>) => sent.push({ event, payload }),
    once: (e: string, fn: () => void) => destroyed.once(e, fn),
  };
  const data = () => sent.filter((s) => s.event === 'terminals:onDidData' && s.payload.kind === 'data').map((s) => String(s.payload.data));
  return { event: { sender }, sent, data };
}

describe('IPC router terminal output', () => {
  let dispose: (() => void) | undefined;
  afterEach(() => dispose?.());

  async function setup() {
    const services = createFakeServices({ autoFinish: false });
    const d = registerIpcRouter(createApiRouter(services), { isTrustedSender: (e) => (e.sender as { id: number }).id !== 666 });
    dispose = () => d.dispose();
    const run = await services.runs.start({ projectDir: '/p', task: 't', agent: 'builtin', provider: 'anthropic', model: 'm', approval: 'auto', isolation: 'container', network: 'none', limits: { timeoutSec: 60 } });
    return { services, run };
  }

  it('sends everything to a window that does not acknowledge, and nothing to an untrusted one', async () => {
    const { services, run } = await setup();
    const w = fakeWindow(1);
    const evil = fakeWindow(666);
    ipc.bus.emit(IPC_SUBSCRIBE, w.event, 'terminals:onDidData');
    ipc.bus.emit(IPC_SUBSCRIBE, evil.event, 'terminals:onDidData');
    for (let i = 0; i < 10; i++) services.emitOutput(run.id, `chunk-${i} ${'x'.repeat(32 * 1024)}\n`);
    await vi.waitFor(() => expect(w.data().join('')).toContain('chunk-9 '));
    expect(w.data().join('').length).toBeGreaterThan(10 * 32 * 1024);
    expect(evil.sent).toHaveLength(0);
  });

  it('with acknowledgements, sends at most a window more, then the newest output after a gap; a reload starts afresh', async () => {
    const { services, run } = await setup();
    const w = fakeWindow(2);
    ipc.bus.emit(IPC_SUBSCRIBE, w.event, 'terminals:onDidData');
    ipc.bus.emit(IPC_TERMINAL_ACK, w.event, 0);
    for (let i = 0; i < 20; i++) services.emitOutput(run.id, `chunk-${i} ${'x'.repeat(32 * 1024)}\n`);
    services.emitOutput(run.id, 'the newest line\n');
    // The window fills, and then nothing more goes out until the page acknowledges.
    await vi.waitFor(() => expect(w.data().join('').length).toBeGreaterThanOrEqual(TERMINAL_FLOW_WINDOW));
    const first = w.data().join('').length;
    expect(first).toBeLessThanOrEqual(2 * TERMINAL_FLOW_WINDOW + 64);
    expect(w.data().join('')).not.toContain('the newest line');
    ipc.bus.emit(IPC_TERMINAL_ACK, w.event, first);
    await vi.waitFor(() => expect(w.data().join('')).toContain('the newest line'));
    expect(w.sent.some((s) => s.event === 'terminals:onDidData' && s.payload.kind === 'gap')).toBe(true);

    // The page fills the window again, then reloads before acknowledging: it subscribes again and
    // counts from zero, and main must not wait for totals the old page never sent.
    for (let i = 0; i < 10; i++) services.emitOutput(run.id, `again-${i} ${'x'.repeat(32 * 1024)}\n`);
    await vi.waitFor(() => expect(w.data().join('')).toContain('again-0 '));
    ipc.bus.emit(IPC_SUBSCRIBE, w.event, 'terminals:onDidData');
    ipc.bus.emit(IPC_TERMINAL_ACK, w.event, 0);
    const before = w.data().length;
    services.emitOutput(run.id, 'after the reload\n');
    await vi.waitFor(() => expect(w.data().slice(before).join('')).toContain('after the reload'));
  });
});
