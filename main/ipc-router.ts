import { ipcMain, type IpcMainEvent, type IpcMainInvokeEvent, type WebContents } from 'electron';
import type { ApiRouter } from '../core/api/router';
import { toDisposable, type Disposable } from '../core/common/disposable';
import { ClientSession } from '../core/host/client-session';
import { FlowWindow, TERMINAL_FLOW_WINDOW } from '../core/host/flow-window';
import { IPC_EVENT, IPC_INVOKE, IPC_SUBSCRIBE, IPC_TERMINAL_ACK, IPC_UNSUBSCRIBE } from '../preload/bridge-protocol';

export interface IpcRouterOptions {
  /** True when the calling frame is our window's main frame showing our UI. */
  isTrustedSender(event: IpcMainEvent | IpcMainInvokeEvent): boolean;
}

interface Client {
  session: ClientSession;
  /** Terminal flow control, once the renderer acknowledges output (a page that never does gets everything). */
  flow?: FlowWindow;
}

/**
 * Serves every contract over IPC: sender check, then one `ClientSession` per window (the same as a
 * browser's over WebSocket): zod validation and envelopes in the router, push events only for what
 * the window subscribed to, terminal output batched per frame.
 */
export function registerIpcRouter(router: ApiRouter, opts: IpcRouterOptions): Disposable {
  const clients = new Map<number, Client>();

  const clientFor = (wc: WebContents): Client => {
    const known = clients.get(wc.id);
    if (known) return known;
    // IPC has no backpressure signal: the renderer acknowledges what it drew (FlowWindow); past the
    // window only the newest output waits here, and the renderer's bounded sink marks the gaps.
    const client: Client = {
      session: new ClientSession(router, {
        send: (event, payload) => {
          if (!wc.isDestroyed()) wc.send(IPC_EVENT, event, payload);
        },
        onTerminalSend: (chunk) => {
          if (chunk.kind === 'data') client.flow?.sent(chunk.data.length);
        },
        isCongested: () => Boolean(client.flow?.full),
        maxBatch: TERMINAL_FLOW_WINDOW,
      }),
    };
    clients.set(wc.id, client);
    wc.once('destroyed', () => {
      client.session.dispose();
      clients.delete(wc.id);
    });
    return client;
  };

  ipcMain.handle(IPC_INVOKE, async (event, channel: unknown, input: unknown) => {
    if (!opts.isTrustedSender(event)) return { ok: false, error: { kind: 'FORBIDDEN', message: 'this page may not call Airlock' } };
    const client = clients.get(event.sender.id);
    return client ? client.session.invoke(String(channel), input) : router.invoke(String(channel), input);
  });
  const onSubscribe = (event: IpcMainEvent, name: unknown) => {
    if (!opts.isTrustedSender(event) || typeof name !== 'string') return;
    const client = clientFor(event.sender);
    // A (re)loaded page counts what it receives from here on.
    if (name === 'terminals:onDidData') client.flow = undefined;
    try {
      client.session.subscribe(name);
    } catch {
      // unknown event: ignored (the preload allowlists names already)
    }
  };
  const onUnsubscribe = (event: IpcMainEvent, name: unknown) => {
    if (typeof name !== 'string') return;
    clients.get(event.sender.id)?.session.unsubscribe(name);
  };
  const onTerminalAck = (event: IpcMainEvent, total: unknown) => {
    if (!opts.isTrustedSender(event) || typeof total !== 'number' || !Number.isSafeInteger(total) || total < 0) return;
    const client = clientFor(event.sender);
    client.flow ??= new FlowWindow(TERMINAL_FLOW_WINDOW);
    if (client.flow.ack(total)) client.session.flushTerminal();
  };
  ipcMain.on(IPC_SUBSCRIBE, onSubscribe);
  ipcMain.on(IPC_UNSUBSCRIBE, onUnsubscribe);
  ipcMain.on(IPC_TERMINAL_ACK, onTerminalAck);

  return toDisposable(() => {
    ipcMain.removeHandler(IPC_INVOKE);
    ipcMain.off(IPC_SUBSCRIBE, onSubscribe);
    ipcMain.off(IPC_UNSUBSCRIBE, onUnsubscribe);
    ipcMain.off(IPC_TERMINAL_ACK, onTerminalAck);
    for (const c of clients.values()) c.session.dispose();
    clients.clear();
  });
}
