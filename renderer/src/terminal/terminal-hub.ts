import type { TerminalChunk } from '../../../contracts';
import type { Api } from '../api';

/** A terminal view's end of the hub. `end`: the chunk's end offset in the terminal's log, if known. */
export interface TerminalReceiver {
  /** Text from the IPC and WebSocket transports; UTF-8 bytes from the browser's terminal stream. */
  write(data: string | Uint8Array, end?: number): void;
  gap(droppedBytes: number, end?: number): void;
  exit?(code: number | null): void;
}

/**
 * Routes `terminals:onDidData` chunks to whichever terminal view is attached to that terminal id;
 * output for terminals nobody is looking at is not kept (the on-disk log replays it on open).
 */
export class TerminalHub {
  private readonly receivers = new Map<string, TerminalReceiver>();
  private unsubscribe: (() => void) | undefined;

  constructor(api: Pick<Api, 'on'>) {
    this.unsubscribe = api.on('terminals:onDidData', (chunk) => this.route(chunk));
  }

  /** A chunk of the contract, or of the terminal stream (whose data is bytes). */
  private route(chunk: TerminalChunk | (Omit<Extract<TerminalChunk, { kind: 'data' }>, 'data'> & { data: Uint8Array })): void {
    const r = this.receivers.get(chunk.terminalId);
    if (!r) return;
    if (chunk.kind === 'data') r.write(chunk.data, chunk.end);
    else if (chunk.kind === 'gap') r.gap(chunk.droppedBytes, chunk.end);
    else r.exit?.(chunk.exitCode);
  }

  attach(terminalId: string, receiver: TerminalReceiver): () => void {
    this.receivers.set(terminalId, receiver);
    return () => {
      if (this.receivers.get(terminalId) === receiver) this.receivers.delete(terminalId);
    };
  }

  dispose(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    this.receivers.clear();
  }
}

let hub: TerminalHub | undefined;

/** The app's hub, created at boot. */
export function setTerminalHub(h: TerminalHub | undefined): void {
  hub = h;
}

export function terminalHub(): TerminalHub | undefined {
  return hub;
}
