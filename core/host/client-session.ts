import type { RunEvent, TerminalChunk } from '../../contracts';
import type { Envelope } from '../../contracts/errors';
import type { ApiRouter } from '../api/router';
import { DisposableStore, type Disposable } from '../common/disposable';
import { TerminalBatcher, textChunks, type GapOrExit, type TextChunk } from './terminal-batcher';

/** Command output travels as terminal chunks (bounded); the same bytes as run events would not be. */
export function isCommandOutput(payload: unknown): boolean {
  return (payload as RunEvent | undefined)?.event?.type === 'command_output';
}

/** How a transport delivers pushed events to its client. */
export interface ClientSessionSink {
  /** Sends one event (`terminals:onDidData` carries batched terminal chunks). */
  send(event: string, payload: unknown): void;
  /** The client is backed up: terminal output waits, only the newest kept (`TerminalBatcher`). */
  isCongested(): boolean;
  /** What one terminal batch may hold (default the batcher's). */
  maxBatch?: number;
  /** Called with each terminal batch just before it is sent (flow control counts them). */
  onTerminalSend?(chunk: TextChunk | GapOrExit): void;
}

/**
 * One client of the contracts, whatever carries it — a window over Electron IPC (`main/ipc-router.ts`)
 * or a browser over WebSocket (`ws-session.ts`): contract calls, the events it subscribed to, and
 * terminal output batched per frame and bounded. The special cases live here once: command output
 * reaches the client as terminal chunks only, and batched output goes out before a replay's result.
 */
export class ClientSession implements Disposable {
  private readonly subs = new Map<string, Disposable>();
  private readonly store = new DisposableStore();
  private readonly terminal: TerminalBatcher<TextChunk>;

  constructor(
    private readonly router: ApiRouter,
    private readonly sink: ClientSessionSink,
  ) {
    this.terminal = this.store.add(
      new TerminalBatcher(textChunks, {
        send: (chunk) => {
          sink.onTerminalSend?.(chunk);
          sink.send('terminals:onDidData', chunk);
        },
        isCongested: () => sink.isCongested(),
        ...(sink.maxBatch ? { maxBatch: sink.maxBatch } : {}),
      }),
    );
  }

  /** One contract call, validated and enveloped by the router. */
  async invoke(channel: string, input: unknown): Promise<Envelope<unknown>> {
    const envelope = await this.router.invoke(channel, input);
    // Output already in a replayed log must not arrive after the replay (it would show twice):
    // send what is batched first; the view drops live chunks received while it replays.
    if (channel === 'terminals:replay') this.terminal.flush();
    return envelope;
  }

  /** Starts pushing `event` (once per name). Throws for an event the contracts do not have. */
  subscribe(event: string): void {
    if (this.subs.has(event)) return;
    const listener = event === 'terminals:onDidData' ? (payload: unknown) => this.terminal.push(payload as TerminalChunk) : (payload: unknown) => this.sink.send(event, payload);
    // Command output reaches the client as terminal output: skipped before it is even validated.
    this.subs.set(event, this.router.subscribe(event, listener, event === 'runs:onDidEvent' ? isCommandOutput : undefined));
  }

  unsubscribe(event: string): void {
    this.subs.get(event)?.dispose();
    this.subs.delete(event);
  }

  /** Sends batched terminal output now (the client caught up). */
  flushTerminal(): void {
    this.terminal.flush();
  }

  dispose(): void {
    for (const s of this.subs.values()) s.dispose();
    this.subs.clear();
    this.store.dispose();
  }
}
