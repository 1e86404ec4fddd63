import type { Envelope } from '../../../contracts/errors';

/**
 * How the renderer reaches the core: Electron IPC through the preload bridge, or a WebSocket to
 * `airlock serve`. Chosen once at boot; components never ask which.
 */
export interface Transport {
  readonly kind: 'ipc' | 'websocket' | 'memory';
  invoke(channel: string, input: unknown): Promise<Envelope<unknown>>;
  /** Subscribes to a push event; returns the unsubscribe function. */
  on(event: string, listener: (payload: unknown) => void): () => void;
  /**
   * Connection state for the status bar (IPC is always connected); `why` says what to do when
   * retrying will not help (the server restarted with a new token, or has not answered for long).
   */
  onConnectionChange?(listener: (connected: boolean, why?: string) => void): () => void;
}

/** The bridge the preload script exposes as `window.airlock` (see preload/index.ts). */
export interface PreloadBridge {
  invoke(channel: string, input: unknown): Promise<Envelope<unknown>>;
  on(event: string, listener: (payload: unknown) => void): () => void;
  /** Terminal flow control (a running total of characters drawn or skipped); absent in older preloads. */
  ackTerminal?(total: number): void;
}
