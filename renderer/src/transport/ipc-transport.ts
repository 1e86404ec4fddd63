import type { PreloadBridge, Transport } from './transport';

/** Electron: calls go through the preload bridge, which allowlists channels from the contracts. */
export function createIpcTransport(bridge: PreloadBridge): Transport {
  return {
    kind: 'ipc',
    invoke: (channel, input) => bridge.invoke(channel, input),
    on: (event, listener) => bridge.on(event, listener),
  };
}
