import { TerminalAcks, terminalFlow, type TerminalFlow } from '../terminal/terminal-flow';
import type { PreloadBridge, Transport } from './transport';

const TERMINAL_EVENT = 'terminals:onDidData';

/**
 * Electron: calls go through the preload bridge, which allowlists channels from the contracts.
 * Terminal output is acknowledged once drawn (flow control), so main sends no more than the window
 * draws; one bridge subscription carries it to every listener.
 */
export function createIpcTransport(bridge: PreloadBridge, flow: Pick<TerminalFlow, 'isBusy' | 'onIdle'> = terminalFlow): Transport {
  const terminalListeners = new Set<(payload: unknown) => void>();
  let closeTerminal: (() => void) | undefined;

  const subscribeTerminal = () => {
    const ack = bridge.ackTerminal?.bind(bridge);
    const acks = ack ? new TerminalAcks(flow, ack) : undefined;
    const off = bridge.on(TERMINAL_EVENT, (payload) => {
      for (const l of terminalListeners) l(payload);
      const c = payload as { kind?: unknown; data?: unknown };
      if (c.kind === 'data' && typeof c.data === 'string') acks?.add(c.data.length);
      acks?.maybeAck();
    });
    // Asks main for flow control: from here on it counts what it sends.
    ack?.(0);
    return () => {
      off();
      acks?.dispose();
    };
  };

  return {
    kind: 'ipc',
    invoke: (channel, input) => bridge.invoke(channel, input),
    on(event, listener) {
      if (event !== TERMINAL_EVENT) return bridge.on(event, listener);
      terminalListeners.add(listener);
      closeTerminal ??= subscribeTerminal();
      return () => {
        terminalListeners.delete(listener);
        if (terminalListeners.size === 0) {
          closeTerminal?.();
          closeTerminal = undefined;
        }
      };
    },
  };
}
