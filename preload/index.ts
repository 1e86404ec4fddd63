import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import { isChannel, isEventName } from '../contracts';
import { IPC_EVENT, IPC_INVOKE, IPC_SUBSCRIBE, IPC_TERMINAL_ACK, IPC_UNSUBSCRIBE } from './bridge-protocol';

/**
 * The renderer's only door to the app: two generic functions, allowlisted from the contracts.
 * No raw ipcRenderer, no Node. Main validates sender and input again on every call.
 */
const listeners = new Map<string, Set<(payload: unknown) => void>>();

ipcRenderer.on(IPC_EVENT, (_e: IpcRendererEvent, event: string, payload: unknown) => {
  const set = listeners.get(event);
  if (set) for (const l of set) l(payload);
});

const bridge = {
  invoke(channel: string, input: unknown): Promise<unknown> {
    if (!isChannel(channel)) return Promise.resolve({ ok: false, error: { kind: 'INVALID_INPUT', message: `unknown channel '${String(channel)}'` } });
    return ipcRenderer.invoke(IPC_INVOKE, channel, input);
  },
  on(event: string, listener: (payload: unknown) => void): () => void {
    if (!isEventName(event) || typeof listener !== 'function') throw new Error(`unknown event '${String(event)}'`);
    let set = listeners.get(event);
    if (!set) {
      set = new Set();
      listeners.set(event, set);
      ipcRenderer.send(IPC_SUBSCRIBE, event);
    }
    set.add(listener);
    return () => {
      const s = listeners.get(event);
      if (!s?.delete(listener) || s.size > 0) return;
      listeners.delete(event);
      ipcRenderer.send(IPC_UNSUBSCRIBE, event);
    };
  },
  /** Terminal flow control: characters of terminal output drawn or skipped since subscribing (a running total). */
  ackTerminal(total: number): void {
    if (Number.isSafeInteger(total) && total >= 0) ipcRenderer.send(IPC_TERMINAL_ACK, total);
  },
};

contextBridge.exposeInMainWorld('airlock', bridge);
