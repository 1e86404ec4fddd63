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

export class ChannelDuplex extends Duplex implements StreamSink {
  private unacked = 0;
  private readBlocked = false;
  private remoteEnded = false;
  private localEnded = false;
  private resetByPeer = false;

  constructor(
    private readonly mux: Mux,
    readonly streamId: number,
    private readonly onFinished: () => void,
  ) {
    super({ allowHalfOpen: true });
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
      this.mux.consumed(this.streamId, n);
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
    if (!(this.remoteEnded && this.localEnded) && !this.resetByPeer) {
      this.mux.reset(this.streamId, error?.message ?? 'connection closed');
    } else {
      this.mux.forget(this.streamId);
    }
    this.onFinished();
    callback(error);
  }

  private maybeFinished(): void {
    if (this.remoteEnded && this.localEnded) this.mux.forget(this.streamId);
  }
}

/**
 * Joins a socket (or any duplex) and a channel stream both ways: half-close travels as END, an
 * error on either side resets the other.
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
  // A normal close needs nothing: both halves end through the pipes and the duplex cleans up.
  socket.on('close', (hadError?: boolean) => {
    if (hadError && !duplex.destroyed) duplex.destroy(new Error('connection failed'));
  });
}
