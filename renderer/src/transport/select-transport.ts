import { createIpcTransport } from './ipc-transport';
import type { PreloadBridge, Transport } from './transport';
import { createWsTransport } from './ws-transport';

declare global {
  interface Window {
    /** Present only inside Electron (preload/index.ts). */
    airlock?: PreloadBridge;
  }
}

/** IPC when the preload bridge exists, WebSocket otherwise. */
export function selectTransport(win: Window = window): Transport {
  return win.airlock ? createIpcTransport(win.airlock) : createWsTransport();
}
