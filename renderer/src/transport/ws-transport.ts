import type { Envelope } from '../../../contracts/errors';
import type { ClientFrame, ServerFrame } from '../../../contracts/transport';
import { HOST_TOKEN_PARAM, HOST_WS_PATH } from '../../../contracts/transport';
import { terminalFlow } from '../terminal/terminal-flow';
import { openTerminalStream } from './terminal-stream';
import type { Transport } from './transport';

export interface WsTransportOptions {
  /** ws://host:port/api[?token=…]; defaults to this page's host (the cookie carries the token). */
  url?: string;
  /** Factory for tests. */
  createSocket?: (url: string) => WebSocket;
  /**
   * Terminal output over a streamed HTTP response (default when served by `airlock serve`), or
   * `false` to take it over the WebSocket like every other event.
   */
  terminalStream?: boolean;
}

const TERMINAL_EVENT = 'terminals:onDidData';

function defaultUrl(): string {
  const token = new URLSearchParams(location.search).get(HOST_TOKEN_PARAM);
  return `ws://${location.host}${HOST_WS_PATH}${token ? `?${HOST_TOKEN_PARAM}=${encodeURIComponent(token)}` : ''}`;
}

/**
 * Browser: one WebSocket to `airlock serve`. Reconnects with backoff and re-subscribes; calls made
 * while disconnected wait for the connection, calls lost with a dropped socket fail with CHANNEL_CLOSED.
 */
export function createWsTransport(opts: WsTransportOptions = {}): Transport {
  const url = opts.url ?? defaultUrl();
  const create = opts.createSocket ?? ((u: string) => new WebSocket(u));
  const listeners = new Map<string, Set<(payload: unknown) => void>>();
  const pending = new Map<number, (e: Envelope<unknown>) => void>();
  const connListeners = new Set<(c: boolean, why?: string) => void>();
  let queue: string[] = [];
  let nextId = 1;
  let socket: WebSocket | undefined;
  let open = false;
  let retry = 0;
  const useStream = opts.terminalStream ?? (!opts.url && !opts.createSocket && typeof fetch === 'function');
  let closeStream: (() => void) | undefined;

  const send = (frame: ClientFrame) => {
    const text = JSON.stringify(frame);
    if (open && socket) socket.send(text);
    else queue.push(text);
  };
  const setOpen = (v: boolean, why?: string) => {
    open = v;
    for (const l of connListeners) l(v, why);
  };
  // Served by `airlock serve` (not a test socket): a lost connection can be asked why.
  const probe = !opts.url && !opts.createSocket && typeof fetch === 'function';
  let everOpen = false;
  let failures = 0;
  let stale = false;
  /**
   * Each start of `airlock serve` has a new token: a page left open from the last start gets 403
   * from the same port. That answer (our own server's, plain text) says to open the new address;
   * retrying would never help, so it stops.
   */
  const whyLost = async (): Promise<void> => {
    if (!probe || !everOpen) return;
    let said: string | undefined;
    try {
      const res = await fetch(location.href, { cache: 'no-store' });
      if (res.status === 403) said = (await res.text()).trim().slice(0, 300);
    } catch {
      // nothing answers on this address (stopped, or restarted on another port)
    }
    if (open) return;
    if (said) {
      stale = true;
      setOpen(false, said);
    } else if (failures >= 5) setOpen(false, 'Cannot reach Airlock. If you stopped or restarted it, open the address it printed (npm start or airlock serve).');
  };

  const connect = () => {
    const ws = create(url);
    socket = ws;
    ws.onopen = () => {
      retry = 0;
      failures = 0;
      everOpen = true;
      setOpen(true);
      for (const event of listeners.keys()) if (!(useStream && event === TERMINAL_EVENT)) ws.send(JSON.stringify({ t: 'sub', event } satisfies ClientFrame));
      const q = queue;
      queue = [];
      for (const text of q) ws.send(text);
    };
    ws.onmessage = (msg: MessageEvent) => {
      const frame = JSON.parse(String(msg.data)) as ServerFrame;
      if (frame.t === 'result') {
        pending.get(frame.id)?.(frame.envelope as Envelope<unknown>);
        pending.delete(frame.id);
      } else {
        const set = listeners.get(frame.event);
        if (set) for (const l of set) l(frame.payload);
      }
    };
    ws.onclose = () => {
      if (socket !== ws) return;
      setOpen(false);
      for (const resolve of pending.values()) resolve({ ok: false, error: { kind: 'CHANNEL_CLOSED', message: 'lost the connection to Airlock; retrying' } });
      pending.clear();
      retry = Math.min(retry + 1, 6);
      failures += 1;
      void whyLost().then(() => {
        if (!stale) setTimeout(connect, 200 * 2 ** retry);
      });
    };
  };
  connect();

  return {
    kind: 'websocket',
    invoke(channel, input) {
      const id = nextId++;
      return new Promise((resolve) => {
        pending.set(id, resolve);
        send({ t: 'invoke', id, channel, input });
      });
    },
    on(event, listener) {
      const streamed = useStream && event === TERMINAL_EVENT;
      let set = listeners.get(event);
      if (!set) {
        const fresh = new Set<(payload: unknown) => void>();
        set = fresh;
        listeners.set(event, set);
        if (streamed) {
          closeStream = openTerminalStream((chunk) => { for (const l of fresh) l(chunk); }, {
            flow: { state: terminalFlow, sendAck: (stream, bytes) => send({ t: 'ack', stream, bytes }) },
          });
        }
        else send({ t: 'sub', event });
      }
      set.add(listener);
      return () => {
        const s = listeners.get(event);
        s?.delete(listener);
        if (s && s.size === 0) {
          listeners.delete(event);
          if (streamed) {
            closeStream?.();
            closeStream = undefined;
          } else send({ t: 'unsub', event });
        }
      };
    },
    onConnectionChange(listener: (c: boolean, why?: string) => void) {
      connListeners.add(listener);
      return () => connListeners.delete(listener);
    },
  };
}
