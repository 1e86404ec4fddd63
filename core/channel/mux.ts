/**
 * The multiplexer both ends of the channel share: decodes frames from a readable, writes frames to
 * a writable, and does per-stream flow control so one slow consumer (a stalled TCP client, a child
 * that does not read its stdin) cannot make the other side buffer without bound.
 *
 * Flow control is credit-based: a sender may have STREAM_WINDOW_BYTES unacknowledged on a stream;
 * the receiver acknowledges bytes once it has handed them on (written to a socket/child, or given
 * to a listener). When credit is exhausted or the underlying writable reports backpressure, the
 * sender's `write` returns false and the data source is paused until `onReady` fires.
 *
 * Runs on Node 18 inside the sandbox: no dependencies.
 */
import {
  FrameDecoder,
  FrameType,
  MAX_FRAME_BYTES,
  ProtocolError,
  STREAM_WINDOW_BYTES,
  chunk,
  decodeControl,
  encodeAck,
  encodeControl,
  encodeFrame,
  encodeHeader,
  type ControlMessage,
  type RawControl,
} from './protocol';

export interface MuxHandlers {
  /** A control message, parsed but not yet checked: each side checks it with its guard (protocol.ts). */
  control(message: RawControl): void;
  /** Raw bytes on a stream; call `mux.consumed(streamId, n)` once they are handed on. */
  data(streamId: number, type: FrameType, payload: Buffer): void;
  end(streamId: number): void;
  reset(streamId: number, reason: string): void;
  /** The channel is gone (peer closed, I/O error, protocol error). Called once. */
  closed(reason: string, error?: Error): void;
}

export interface MuxOptions {
  window?: number;
}

type Queued = { kind: 'data'; type: FrameType; buf: Buffer } | { kind: 'end' };

/** The outbound half of one stream, with its credit. */
export class StreamSender {
  private credit: number;
  private queue: Queued[] = [];
  private readyCallbacks: Array<() => void> = [];
  private flushCallbacks: Array<() => void> = [];
  private ended = false;
  closed = false;

  constructor(
    private readonly mux: Mux,
    readonly streamId: number,
    window: number,
  ) {
    this.credit = window;
  }

  /** True when a source may keep writing: credit left and the channel is not congested. */
  get ready(): boolean {
    return !this.closed && this.queue.length === 0 && this.credit > 0 && !this.mux.congested;
  }

  /**
   * Sends (or queues) bytes. Returns false when the source should pause until `onReady`.
   * Bytes are never dropped while the stream is open.
   */
  write(buf: Buffer, type: FrameType = FrameType.data): boolean {
    if (this.closed || this.ended || buf.length === 0) return this.ready;
    for (const part of chunk(buf)) this.queue.push({ kind: 'data', type, buf: part });
    this.flush();
    return this.ready;
  }

  /** Half-closes: an END frame follows all queued data. */
  end(): void {
    if (this.closed || this.ended) return;
    this.ended = true;
    this.queue.push({ kind: 'end' });
    this.flush();
  }

  /** Calls `cb` once when the source may write again. */
  onReady(cb: () => void): void {
    if (this.ready) {
      cb();
      return;
    }
    this.readyCallbacks.push(cb);
  }

  /** Calls `cb` once everything queued so far has been written to the channel. */
  onFlushed(cb: () => void): void {
    if (this.queue.length === 0 || this.closed) {
      cb();
      return;
    }
    this.flushCallbacks.push(cb);
  }

  /** @internal */
  addCredit(bytes: number): void {
    this.credit += bytes;
    this.flush();
  }

  /** @internal Sends as much of the queue as credit allows, then wakes waiters. */
  flush(): void {
    while (!this.closed && this.queue.length > 0) {
      const item = this.queue[0]!;
      if (item.kind === 'end') {
        this.queue.shift();
        this.mux.sendRaw(encodeFrame(FrameType.end, this.streamId));
        continue;
      }
      if (this.credit <= 0) break;
      // Never past the window: the peer treats an overrun as a protocol violation.
      let part = item.buf;
      if (part.length > this.credit) {
        item.buf = part.subarray(this.credit);
        part = part.subarray(0, this.credit);
      } else {
        this.queue.shift();
      }
      this.credit -= part.length;
      this.mux.sendFrame(item.type, this.streamId, part);
    }
    if (this.queue.length === 0 || this.closed) {
      const flushed = this.flushCallbacks.splice(0);
      for (const cb of flushed) cb();
    }
    if (this.ready) {
      const ready = this.readyCallbacks.splice(0);
      for (const cb of ready) cb();
    }
  }

  /** Drops queued data (after a reset or when the channel closes). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.readyCallbacks = [];
    const flushed = this.flushCallbacks.splice(0);
    for (const cb of flushed) cb();
  }
}

export class Mux {
  private readonly decoder = new FrameDecoder();
  private readonly senders = new Map<number, StreamSender>();
  private readonly unacked = new Map<number, number>();
  /** Per stream: bytes received and not yet acknowledged to the peer (the peer's credit in use). */
  private readonly inflight = new Map<number, number>();
  private readonly window: number;
  private closedReason: string | undefined;
  congested = false;

  constructor(
    private readonly readable: NodeJS.ReadableStream,
    private readonly writable: NodeJS.WritableStream,
    private readonly handlers: MuxHandlers,
    opts: MuxOptions = {},
  ) {
    this.window = opts.window ?? STREAM_WINDOW_BYTES;
    readable.on('data', this.onData);
    readable.on('end', this.onEnd);
    readable.on('close', this.onEnd);
    readable.on('error', this.onError);
    writable.on('error', this.onError);
    writable.on('drain', this.onDrain);
  }

  get isClosed(): boolean {
    return this.closedReason !== undefined;
  }

  get closeReason(): string | undefined {
    return this.closedReason;
  }

  /** Sends a control message; throws ProtocolError (sending nothing) if it exceeds MAX_FRAME_BYTES. */
  sendControl(message: ControlMessage): void {
    const frame = encodeControl(message);
    if (frame.length - 4 > MAX_FRAME_BYTES) {
      throw new ProtocolError(`control message of ${frame.length} bytes exceeds the ${MAX_FRAME_BYTES}-byte frame limit`);
    }
    this.sendRaw(frame);
  }

  /** The outbound half of a stream; created on first use. */
  sender(streamId: number): StreamSender {
    let sender = this.senders.get(streamId);
    if (!sender) {
      sender = new StreamSender(this, streamId, this.window);
      if (this.isClosed) sender.close();
      this.senders.set(streamId, sender);
    }
    return sender;
  }

  /** Streams this side keeps any flow-control state for (senders, unacknowledged or in-flight bytes): zero when idle. */
  get trackedStreams(): number {
    return new Set([...this.senders.keys(), ...this.unacked.keys(), ...this.inflight.keys()]).size;
  }

  /** Tells the peer that `bytes` received on the stream were handed on, returning credit. */
  consumed(streamId: number, bytes: number): void {
    if (this.isClosed || bytes <= 0) return;
    const total = (this.unacked.get(streamId) ?? 0) + bytes;
    // Batch acknowledgements: a quarter window keeps the pipe full with few ack frames.
    if (total >= this.window / 4) {
      this.unacked.set(streamId, 0);
      const inflight = (this.inflight.get(streamId) ?? 0) - total;
      if (inflight > 0) this.inflight.set(streamId, inflight);
      else this.inflight.delete(streamId);
      this.sendRaw(encodeAck(streamId, total));
    } else {
      this.unacked.set(streamId, total);
    }
  }

  /** Aborts a stream in both directions; the peer gets the reason. */
  reset(streamId: number, reason: string): void {
    this.forget(streamId);
    this.sendRaw(encodeFrame(FrameType.reset, streamId, Buffer.from(reason, 'utf8')));
  }

  /** Drops local state of a stream that is finished in both directions. */
  forget(streamId: number): void {
    this.senders.get(streamId)?.close();
    this.senders.delete(streamId);
    this.unacked.delete(streamId);
    this.inflight.delete(streamId);
  }

  /**
   * Drops bytes received on a stream nobody reads (finished, or never opened), without giving the
   * peer credit for them and without keeping any state for the stream: a peer that sprays data on
   * stream ids of its choice costs no memory, and one that keeps going overruns the window.
   */
  discard(streamId: number): void {
    this.unacked.delete(streamId);
    this.inflight.delete(streamId);
  }

  /** @internal Sends a frame; large payloads go out as header + payload in one writev, uncopied. */
  sendFrame(type: FrameType, streamId: number, payload: Buffer): void {
    if (this.isClosed) return;
    const w = this.writable as NodeJS.WritableStream & { cork?(): void; uncork?(): void };
    if (payload.length < 4096 || !w.cork || !w.uncork) {
      this.sendRaw(encodeFrame(type, streamId, payload));
      return;
    }
    w.cork();
    w.write(encodeHeader(type, streamId, payload.length));
    const ok = w.write(payload);
    w.uncork();
    if (!ok) this.congested = true;
  }

  /** @internal */
  sendRaw(frame: Buffer): void {
    if (this.isClosed) return;
    const ok = this.writable.write(frame);
    if (!ok) this.congested = true;
  }

  /** Closes the channel locally (does not end the underlying streams; the owner does that). */
  close(reason: string, error?: Error): void {
    if (this.isClosed) return;
    this.closedReason = reason;
    this.readable.removeListener('data', this.onData);
    for (const sender of this.senders.values()) sender.close();
    this.senders.clear();
    this.handlers.closed(reason, error);
  }

  private readonly onData = (chunk: Buffer | string): void => {
    if (this.isClosed) return;
    let frames;
    try {
      frames = this.decoder.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    } catch (err) {
      this.close(err instanceof Error ? err.message : String(err), err instanceof Error ? err : undefined);
      return;
    }
    for (const frame of frames) {
      if (this.isClosed) return;
      try {
        this.dispatch(frame.type, frame.streamId, frame.payload);
      } catch (err) {
        // The peer may be hostile (code in the sandbox shares the helper's user): a message that
        // breaks a handler ends the channel instead of throwing into the host's event loop.
        const message = err instanceof Error ? err.message : String(err);
        this.close(err instanceof ProtocolError ? message : `malformed message: ${message}`, err instanceof Error ? err : undefined);
        return;
      }
    }
  };

  private dispatch(type: FrameType, streamId: number, payload: Buffer): void {
    switch (type) {
      case FrameType.control:
        this.handlers.control(decodeControl(payload));
        return;
      case FrameType.ack:
        this.senders.get(streamId)?.addCredit(payload.readUInt32BE(0));
        return;
      case FrameType.end:
        this.handlers.end(streamId);
        return;
      case FrameType.reset:
        this.senders.get(streamId)?.close();
        this.senders.delete(streamId);
        this.unacked.delete(streamId);
        this.inflight.delete(streamId);
        this.handlers.reset(streamId, payload.toString('utf8'));
        return;
      default: {
        // The peer may not have more than a window unacknowledged on a stream: an overrun is a
        // protocol violation (a hostile or broken peer), never a reason to buffer more.
        const inflight = (this.inflight.get(streamId) ?? 0) + payload.length;
        if (inflight > this.window) {
          throw new ProtocolError(
            `flow-control violation: the other side sent ${inflight} unacknowledged bytes on stream ${streamId}, past its window of ${this.window}`,
          );
        }
        this.inflight.set(streamId, inflight);
        this.handlers.data(streamId, type, payload);
      }
    }
  }

  private readonly onEnd = (): void => {
    this.close('the other side closed the channel');
  };

  private readonly onError = (err: Error): void => {
    this.close(`channel I/O error: ${err.message}`, err);
  };

  private readonly onDrain = (): void => {
    this.congested = false;
    for (const sender of [...this.senders.values()]) {
      if (this.congested) break;
      sender.flush();
    }
  };
}
