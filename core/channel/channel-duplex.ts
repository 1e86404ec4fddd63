/**
 * One multiplexed stream of the channel as a Node Duplex, with half-close (END), errors (RESET) and
 * flow control (acks follow the consumer). Used on both sides for TCP forwarding; runs on Node 18.
 */
import { Duplex } from 'node:stream';
import type { Mux } from './mux';
import { FrameType } from './protocol';

/** What the owner of the stream routing table feeds into a stream. */
export interface StreamSink {
  remoteData(payload: Buffer): void;
  remoteEnd(): void;
  remoteReset(reason: string): void;
}

/**
 * A channel stream as a Duplex. Its life is accounted in one place (docs/architecture.md §4):
 * `onFinished` runs exactly once, when both directions are done (END sent and END received, in
 * either order) or when either side resets or destroys it. Whatever holds a slot for the stream (the
 * host's connection cap, a routing table) releases it there and nowhere else.
 */
export class ChannelDuplex extends Duplex implements StreamSink {
  private unacked = 0;
  private readBlocked = false;
  private remoteEnded = false;
  private localEnded = false;
  private resetByPeer = false;
  private finished = false;

  constructor(
    private readonly mux: Mux,
    readonly streamId: number,
    private readonly onFinished: () => void,
  ) {
    super({ allowHalfOpen: true });
  }

  /** True once both directions are done or the stream was reset: it holds nothing any more. */
  get isFinished(): boolean {
    return this.finished;
  }

  /** True once the other side sent END (its direction is done, whether or not anyone read it). */
  get remoteDone(): boolean {
    return this.remoteEnded;
  }

  // -- from the channel

  remoteData(payload: Buffer): void {
    if (this.destroyed) return;
    if (this.push(payload)) {
      this.mux.consumed(this.streamId, payload.length);
    } else {
      // The consumer is behind: withhold credit until it reads, so the peer stops sending.
      this.unacked += payload.length;
      this.readBlocked = true;
    }
  }

  remoteEnd(): void {
    if (this.remoteEnded || this.destroyed) return;
    this.remoteEnded = true;
    this.push(null);
    this.maybeFinished();
  }

  remoteReset(reason: string): void {
    this.resetByPeer = true;
    this.destroy(new Error(reason || 'the other side reset the connection'));
  }

  // -- Duplex implementation

  override _read(): void {
    if (this.readBlocked) {
      this.readBlocked = false;
      const n = this.unacked;
      this.unacked = 0;
      // A finished stream gets no more data: crediting it would only put its state back in the mux.
      if (!this.finished) this.mux.consumed(this.streamId, n);
    }
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.mux.isClosed) {
      callback(new Error(`channel closed: ${this.mux.closeReason ?? ''}`));
      return;
    }
    const sender = this.mux.sender(this.streamId);
    if (sender.write(chunk, FrameType.data)) callback();
    else sender.onReady(() => callback());
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.mux.sender(this.streamId).end();
    this.localEnded = true;
    callback();
    this.maybeFinished();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // Destroyed before both directions were done: the peer must drop its end too.
    if (!this.finished && !this.resetByPeer) this.mux.reset(this.streamId, error?.message ?? 'connection closed');
    this.finish();
    callback(error);
  }

  /**
   * Both directions done. The readable side may still hold bytes its consumer has not taken (or
   * never will, when the socket it was piped to closed): that is no reason to hold the stream.
   */
  private maybeFinished(): void {
    if (this.remoteEnded && this.localEnded) this.finish();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.mux.forget(this.streamId);
    this.onFinished();
  }
}

/**
 * Joins a socket (or any duplex) and a channel stream both ways: half-close travels as END, an
 * error on either side resets the other. Every way the socket can end finishes the stream: a clean
 * close after both halves ended (whichever first), a close before its own end (reset), an error.
 */
export function joinSocket(
  duplex: ChannelDuplex,
  socket: NodeJS.ReadWriteStream & { destroy(err?: Error): void; resetAndDestroy?(): void },
): void {
  socket.pipe(duplex);
  duplex.pipe(socket);
  socket.on('error', (err: Error) => duplex.destroy(err));
  duplex.on('error', () => {
    // Carry the failure on as a TCP reset, so the peer sees ECONNRESET rather than a clean EOF.
    try {
      if (socket.resetAndDestroy) socket.resetAndDestroy();
      else socket.destroy();
    } catch {
      socket.destroy();
    }
  });
  socket.on('close', (hadError?: boolean) => {
    if (duplex.destroyed) return;
    if (hadError) {
      duplex.destroy(new Error('connection failed'));
    } else if (!duplex.writableEnded) {
      // Closed without its end reaching the stream: nothing more will come, and the peer must know.
      duplex.destroy(new Error('connection closed'));
    } else {
      // The socket's side ended first (its END may still wait for credit) and the socket is gone, so
      // the stream's data has no reader: nothing may wait on one. Once both directions are done the
      // stream is dropped; bytes the peer still sends have nowhere to go and reset it, as a closed
      // TCP socket answers data with RST (the server closed an idle keep-alive connection, say).
      const settle = (): void => {
        if (duplex.isFinished && !duplex.destroyed) duplex.destroy();
      };
      duplex.once('finish', settle);
      if (!duplex.remoteDone) {
        duplex.on('data', () => duplex.destroy(new Error('the connection was closed on this side')));
        duplex.once('end', settle);
      }
      settle();
    }
  });
}
