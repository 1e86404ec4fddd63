import { ipcMain, type IpcMainEvent, type IpcMainInvokeEvent, type WebContents } from 'electron';
import type { TerminalChunk } from '../contracts';
import type { ApiRouter } from '../core/api/router';
import { DisposableStore, toDisposable, type Disposable } from '../core/common/disposable';
import { FlowWindow, TERMINAL_FLOW_WINDOW } from '../core/host/flow-window';
import { TerminalBatcher, textChunks, type TextChunk } from '../core/host/terminal-batcher';
import { isCommandOutput } from '../core/host/ws-session';
import { IPC_EVENT, IPC_INVOKE, IPC_SUBSCRIBE, IPC_TERMINAL_ACK, IPC_UNSUBSCRIBE } from '../preload/bridge-protocol';

export interface IpcRouterOptions {
  /** True when the calling frame is our window's main frame showing our UI. */
  isTrustedSender(event: IpcMainEvent | IpcMainInvokeEvent): boolean;
}

interface Client {
  subs: Map<string, Disposable>;
  terminal: TerminalBatcher<TextChunk>;
  /** Terminal flow control, once the renderer acknowledges output (a page that never does gets everything). */
  flow?: FlowWindow;
  store: DisposableStore;
}

/**
 * Serves every contract over IPC: sender check, zod validation and envelopes (in the router),
 * push events only for what each window subscribed to, terminal output batched per frame.
 */
export function registerIpcRouter(router: ApiRouter, opts: IpcRouterOptions): Disposable {
  const clients = new Map<number, Client>();

  const clientFor = (wc: WebContents): Client => {
    let c = clients.get(wc.id);
    if (c) return c;
    const store = new DisposableStore();
    const send = (event: string, payload: unknown) => {
      if (!wc.isDestroyed()) wc.send(IPC_EVENT, event, payload);
    };
    // IPC has no backpressure signal: the renderer acknowledges what it drew (FlowWindow); past the
    // window only the newest output waits here, and the renderer's bounded sink marks the gaps.
    const client: Client = {
      subs: new Map(),
      terminal: store.add(new TerminalBatcher(textChunks, {
        send: (chunk) => {
          if (chunk.kind === 'data') client.flow?.sent(chunk.data.length);
          send('terminals:onDidData', chunk);
        },
        isCongested: () => Boolean(client.flow?.full),
        maxBatch: TERMINAL_FLOW_WINDOW,
      })),
      store,
    };
    c = client;
    clients.set(wc.id, c);
    wc.once('destroyed', () => {
      for (const s of c?.subs.values() ?? []) s.dispose();
      c?.store.dispose();
      clients.delete(wc.id);
    });
    return c;
  };

  ipcMain.handle(IPC_INVOKE, async (event, channel: unknown, input: unknown) => {
    if (!opts.isTrustedSender(event)) return { ok: false, error: { kind: 'FORBIDDEN', message: 'this page may not call Airlock' } };
    const envelope = await router.invoke(String(channel), input);
    // Same ordering rule as the WebSocket host: batched output goes out before a replay's result.
    if (channel === 'terminals:replay') clients.get(event.sender.id)?.terminal.flush();
    return envelope;
  });
  const onSubscribe = (event: IpcMainEvent, name: unknown) => {
    if (!opts.isTrustedSender(event) || typeof name !== 'string') return;
    const client = clientFor(event.sender);
    // A (re)loaded page counts what it receives from here on.
    if (name === 'terminals:onDidData') client.flow = undefined;
    if (client.subs.has(name)) return;
    try {
      const wc = event.sender;
      const listener = name === 'terminals:onDidData'
        ? (payload: unknown) => client.terminal.push(payload as TerminalChunk)
        : (payload: unknown) => { if (!wc.isDestroyed()) wc.send(IPC_EVENT, name, payload); };
      // Command output reaches the window as terminal output: skipped before it is even validated.
      client.subs.set(name, router.subscribe(name, listener, name === 'runs:onDidEvent' ? isCommandOutput : undefined));
    } catch {
      // unknown event: ignored (the preload allowlists names already)
    }
  };
  const onUnsubscribe = (event: IpcMainEvent, name: unknown) => {
    if (typeof name !== 'string') return;
    const client = clients.get(event.sender.id);
    client?.subs.get(name)?.dispose();
    client?.subs.delete(name);
  };
  const onTerminalAck = (event: IpcMainEvent, total: unknown) => {
    if (!opts.isTrustedSender(event) || typeof total !== 'number' || !Number.isSafeInteger(total) || total < 0) return;
    const client = clientFor(event.sender);
    client.flow ??= new FlowWindow(TERMINAL_FLOW_WINDOW);
    if (client.flow.ack(total)) client.terminal.flush();
  };
  ipcMain.on(IPC_SUBSCRIBE, onSubscribe);
  ipcMain.on(IPC_UNSUBSCRIBE, onUnsubscribe);
  ipcMain.on(IPC_TERMINAL_ACK, onTerminalAck);

  return toDisposable(() => {
    ipcMain.removeHandler(IPC_INVOKE);
    ipcMain.off(IPC_SUBSCRIBE, onSubscribe);
    ipcMain.off(IPC_UNSUBSCRIBE, onUnsubscribe);
    ipcMain.off(IPC_TERMINAL_ACK, onTerminalAck);
    for (const c of clients.values()) {
      for (const s of c.subs.values()) s.dispose();
      c.store.dispose();
    }
    clients.clear();
  });
}
