import type { WebSocket } from 'ws';
import { ClientFrame, type ServerFrame } from '../../contracts/transport';
import type { RunEvent, TerminalChunk } from '../../contracts';
import type { ApiRouter } from '../api/router';
import { DisposableStore, type Disposable } from '../common/disposable';
import { TerminalBatcher, textChunks, type TextChunk } from './terminal-batcher';

/** Past this many bytes queued to the socket, terminal output is dropped from the live view. */
const HIGH_WATER = 4 * 1024 * 1024;

/** Command output travels as terminal chunks (bounded); the same bytes as run events would not be. */
export function isCommandOutput(payload: unknown): boolean {
  return (payload as RunEvent | undefined)?.event?.type === 'command_output';
}

/** One browser connection: contract calls, event subscriptions, bounded terminal output. */
export class WsSession implements Disposable {
  private readonly subs = new Map<string, Disposable>();
  private readonly store = new DisposableStore();
  private readonly terminal: TerminalBatcher<TextChunk>;

  /** `ack`: flow control for the page's terminal stream (see HOST_TERMINAL_STREAM_ACK_PARAM). */
  constructor(private readonly ws: WebSocket, private readonly router: ApiRouter, private readonly ack?: (stream: string, bytes: number) => void) {
    this.terminal = this.store.add(new TerminalBatcher(textChunks, {
      send: (chunk) => this.send({ t: 'event', event: 'terminals:onDidData', payload: chunk }),
      isCongested: () => this.ws.bufferedAmount > HIGH_WATER,
    }));
    ws.on('message', (data, isBinary) => {
      if (isBinary) return this.ws.close(1003, 'text frames only');
      void this.onMessage(data.toString());
    });
  }

  private send(frame: ServerFrame): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(frame));
  }

  private async onMessage(text: string): Promise<void> {
    let frame: ClientFrame;
    try {
      frame = ClientFrame.parse(JSON.parse(text));
    } catch {
      this.ws.close(1008, 'malformed frame');
      return;
    }
    switch (frame.t) {
      case 'invoke': {
        const envelope = await this.router.invoke(frame.channel, frame.input);
        // Output already in a replayed log must not arrive after the replay (it would show twice):
        // send what is batched first; the view drops live chunks received while it replays.
        if (frame.channel === 'terminals:replay') this.terminal.flush();
        this.send({ t: 'result', id: frame.id, envelope });
        return;
      }
      case 'sub': {
        if (this.subs.has(frame.event)) return;
        try {
          const listener = frame.event === 'terminals:onDidData'
            ? (payload: unknown) => this.terminal.push(payload as TerminalChunk)
            : (payload: unknown) => this.send({ t: 'event', event: frame.event, payload });
          // Command output reaches the page as terminal output: skipped here before it is even validated.
          this.subs.set(frame.event, this.router.subscribe(frame.event, listener, frame.event === 'runs:onDidEvent' ? isCommandOutput : undefined));
        } catch {
          this.ws.close(1008, 'unknown event');
        }
        return;
      }
      case 'unsub':
        this.subs.get(frame.event)?.dispose();
        this.subs.delete(frame.event);
        return;
      case 'ack':
        this.ack?.(frame.stream, frame.bytes);
        return;
    }
  }

  close(): void {
    this.ws.close(1001, 'server closing');
    this.dispose();
  }

  dispose(): void {
    for (const s of this.subs.values()) s.dispose();
    this.subs.clear();
    this.store.dispose();
  }
}
