/**
 * Wire format of the channel between the host and the in-sandbox helper (DESIGN.md §4).
 *
 * Every frame is `u32 length | u8 type | u32 stream id | payload`, big-endian, where `length`
 * counts the type, stream id and payload (so it is always >= 5). Stream 0 carries JSON control
 * messages; other streams carry raw bytes (process stdio, TCP connections, file contents).
 * Stream ids opened by the host are odd, those opened by the helper are even, so both sides can
 * open streams without coordinating.
 *
 * This module is imported by both sides: it must stay free of dependencies and run on Node 18.
 */

export const PROTOCOL_VERSION = '1';

/** Bytes before the payload: u32 length + u8 type + u32 stream id. */
export const HEADER_BYTES = 9;
/** Raw data is sent in chunks of at most this size so one stream cannot hog the channel. */
export const MAX_CHUNK_BYTES = 64 * 1024;
/** A control frame (JSON) may be larger than a data chunk (directory listings, watch batches). */
export const MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** Bytes a sender may have in flight on one stream before the receiver acknowledges them. */
export const STREAM_WINDOW_BYTES = 4 * 1024 * 1024;

export const FrameType = {
  /** JSON control message (stream id 0). */
  control: 1,
  /** Process stdout (helper → host). */
  stdout: 2,
  /** Process stderr (helper → host). */
  stderr: 3,
  /** Raw bytes: process stdin, TCP data, file contents — the stream says what. */
  data: 4,
  /** The sender will send no more data on this stream (stdin end, TCP half-close, end of file). */
  end: 5,
  /** The stream failed or was aborted; payload is a UTF-8 reason. Both directions are closed. */
  reset: 6,
  /** Flow control: payload is a u32 count of bytes the receiver has consumed on this stream. */
  ack: 7,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

const KNOWN_TYPES = new Set<number>(Object.values(FrameType));

export interface Frame {
  type: FrameType;
  streamId: number;
  payload: Buffer;
}

/** The byte stream does not follow the protocol; the channel cannot be resynchronised. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

export function encodeFrame(type: FrameType, streamId: number, payload: Buffer = EMPTY): Buffer {
  const frame = Buffer.allocUnsafe(HEADER_BYTES + payload.length);
  frame.writeUInt32BE(5 + payload.length, 0);
  frame.writeUInt8(type, 4);
  frame.writeUInt32BE(streamId >>> 0, 5);
  payload.copy(frame, HEADER_BYTES);
  return frame;
}

export function encodeControl(message: ControlMessage): Buffer {
  return encodeFrame(FrameType.control, 0, Buffer.from(JSON.stringify(message), 'utf8'));
}

export function encodeAck(streamId: number, bytes: number): Buffer {
  const payload = Buffer.allocUnsafe(4);
  payload.writeUInt32BE(bytes >>> 0, 0);
  return encodeFrame(FrameType.ack, streamId, payload);
}

const EMPTY = Buffer.alloc(0);

/**
 * Turns a byte stream cut at arbitrary points back into frames. Throws ProtocolError on a frame
 * that cannot be valid (bad length or unknown type); after that the decoder must not be fed again.
 */
export class FrameDecoder {
  /** Pieces of an incomplete frame (kept as views: copied once, when the frame completes). */
  private parts: Buffer[] = [];
  private partsLength = 0;

  /** Bytes received so far that do not yet form a whole frame (for diagnostics). */
  get buffered(): Buffer {
    return Buffer.concat(this.parts);
  }

  push(chunk: Buffer): Frame[] {
    const frames: Frame[] = [];
    let buf = chunk;
    if (this.partsLength > 0) {
      // Complete the pending frame first; at most one copy of it.
      let head = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts);
      if (head.length < HEADER_BYTES) {
        const take = Math.min(HEADER_BYTES - head.length, buf.length);
        head = Buffer.concat([head, buf.subarray(0, take)]);
        buf = buf.subarray(take);
        if (head.length < HEADER_BYTES) {
          this.check(head);
          this.parts = [head];
          this.partsLength = head.length;
          return frames;
        }
      }
      const total = 4 + this.check(head);
      const missing = total - head.length;
      if (buf.length < missing) {
        this.parts = [head, buf];
        this.partsLength = head.length + buf.length;
        return frames;
      }
      const whole = Buffer.concat([head, buf.subarray(0, missing)], total);
      buf = buf.subarray(missing);
      this.parts = [];
      this.partsLength = 0;
      frames.push(this.frame(whole));
    }
    while (buf.length > 0) {
      if (buf.length < HEADER_BYTES) {
        this.check(buf);
        break;
      }
      const total = 4 + this.check(buf);
      if (buf.length < total) break;
      frames.push(this.frame(buf.subarray(0, total)));
      buf = buf.subarray(total);
    }
    if (buf.length > 0) {
      this.parts = [buf];
      this.partsLength = buf.length;
    }
    return frames;
  }

  /** Validates as much of the header as is present; returns the length field when known. */
  private check(buf: Buffer): number {
    if (buf.length < 4) return 0;
    const length = buf.readUInt32BE(0);
    if (length < 5 || length > MAX_FRAME_BYTES) {
      throw new ProtocolError(`malformed frame: length ${length} is outside 5..${MAX_FRAME_BYTES}`);
    }
    if (buf.length >= 5 && !KNOWN_TYPES.has(buf.readUInt8(4))) {
      throw new ProtocolError(`malformed frame: unknown type ${buf.readUInt8(4)}`);
    }
    return length;
  }

  private frame(whole: Buffer): Frame {
    const type = whole.readUInt8(4) as FrameType;
    const streamId = whole.readUInt32BE(5);
    if (type === FrameType.control && streamId !== 0) {
      throw new ProtocolError(`malformed frame: control frame on stream ${streamId}`);
    }
    if (type === FrameType.ack && whole.length !== 13) throw new ProtocolError('malformed frame: ack without a u32 count');
    return { type, streamId, payload: whole.subarray(HEADER_BYTES) };
  }
}

/** Splits a buffer into chunks of at most MAX_CHUNK_BYTES (without copying). */
export function chunk(buf: Buffer, size = MAX_CHUNK_BYTES): Buffer[] {
  if (buf.length <= size) return [buf];
  const parts: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) parts.push(buf.subarray(i, i + size));
  return parts;
}

// ---------------------------------------------------------------------------------------------
// Control messages (JSON on stream 0)

export interface WireError {
  kind: string;
  message: string;
}

export interface WireSpawn {
  argv: string[];
  cwd?: string;
  env?: Record<string, string>;
  pty?: { cols: number; rows: number };
  timeoutMs?: number;
  maxOutputBytes?: number;
  /** Grace between SIGTERM and SIGKILL when a tree is killed (default 2000 ms). */
  killGraceMs?: number;
}

export interface WireExit {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  truncated: boolean;
  durationMs: number;
  outputBytes: number;
}

export interface WireFileEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  mode: number;
}

export type WatchBackend = 'auto' | 'inotify' | 'fs' | 'poll';

/** Requests the host sends; `stream` is a host-allocated (odd) stream id where the op needs one. */
export type Request =
  | { op: 'spawn'; stream: number; spawn: WireSpawn }
  | { op: 'kill'; stream: number; signal: string }
  | { op: 'resize'; stream: number; cols: number; rows: number }
  | { op: 'readFile'; stream: number; path: string; maxBytes: number }
  | { op: 'writeFile'; stream: number; path: string; mode?: number }
  | { op: 'list'; path: string }
  | { op: 'watch'; watchId: number; path: string; debounceMs: number; ignore: string[]; backend: WatchBackend }
  | { op: 'unwatch'; watchId: number }
  | { op: 'listen'; listenerId: number; port: number }
  | { op: 'unlisten'; listenerId: number }
  | { op: 'connect'; stream: number; port: number }
  | { op: 'ping' };

export type ControlMessage =
  | { t: 'hello'; version: string; node: string; uid: number; pid: number; pty: boolean }
  | ({ t: 'req'; id: number } & Request)
  | { t: 'res'; id: number; ok: true; value?: unknown }
  | { t: 'res'; id: number; ok: false; error: WireError }
  | { t: 'exit'; stream: number; info: WireExit }
  | { t: 'watch'; watchId: number; paths: string[] }
  | { t: 'watchError'; watchId: number; message: string }
  | { t: 'accept'; listenerId: number; stream: number };

export function decodeControl(payload: Buffer): ControlMessage {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new ProtocolError('malformed control frame: not JSON');
  }
  if (typeof value !== 'object' || value === null || typeof (value as { t?: unknown }).t !== 'string') {
    throw new ProtocolError('malformed control frame: no message type');
  }
  return value as ControlMessage;
}
