import type { WebSocket } from 'ws';
import { ClientFrame, type ServerFrame } from '../../contracts/transport';
import type { ApiRouter } from '../api/router';
import type { Disposable } from '../common/disposable';
import { ClientSession } from './client-session';

/** Past this many bytes queued to the socket, terminal output is dropped from the live view. */
const HIGH_WATER = 4 * 1024 * 1024;

/** One browser connection: frames in and out of a `ClientSession`. */
export class WsSession implements Disposable {
  private readonly session: ClientSession;

  /** `ack`: flow control for the page's terminal stream (see HOST_TERMINAL_STREAM_ACK_PARAM). */
  constructor(private readonly ws: WebSocket, router: ApiRouter, private readonly ack?: (stream: string, bytes: number) => void) {
    this.session = new ClientSession(router, {
      send: (event, payload) => this.send({ t: 'event', event, payload }),
      isCongested: () => this.ws.bufferedAmount > HIGH_WATER,
    });
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
      case 'invoke':
        this.send({ t: 'result', id: frame.id, envelope: await this.session.invoke(frame.channel, frame.input) });
        return;
      case 'sub':
        try {
          this.session.subscribe(frame.event);
        } catch {
          this.ws.close(1008, 'unknown event');
        }
        return;
      case 'unsub':
        this.session.unsubscribe(frame.event);
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
    this.session.dispose();
  }
}
