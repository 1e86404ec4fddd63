/**
 * Wire format of the channel between the host and the in-sandbox helper (docs/architecture.md §4).
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

/** Frame types whose payload is a plain byte stream and may be delivered in pieces. */
const STREAMED_TYPES = new Set<number>([FrameType.stdout, FrameType.stderr, FrameType.data]);

export function encodeHeader(type: FrameType, streamId: number, payloadLength: number): Buffer {
  const header = Buffer.allocUnsafe(HEADER_BYTES);
  header.writeUInt32BE(5 + payloadLength, 0);
  header.writeUInt8(type, 4);
  header.writeUInt32BE(streamId >>> 0, 5);
  return header;
}

/**
 * Turns a byte stream cut at arbitrary points back into frames. Data frames (stdout, stderr, data)
 * come out as one or more pieces that are views into the input chunks — no copying on the hot
 * path; every other frame comes out whole. Throws ProtocolError on a frame that cannot be valid
 * (bad length or unknown type); after that the decoder must not be fed again.
 */
export class FrameDecoder {
  private readonly header = Buffer.alloc(HEADER_BYTES);
  private headerFill = 0;
  private current: { type: FrameType; streamId: number; remaining: number; parts: Buffer[] | null } | undefined;

  push(chunk: Buffer): Frame[] {
    const frames: Frame[] = [];
    let off = 0;
    while (off < chunk.length) {
      const cur = this.current;
      if (!cur) {
        const take = Math.min(HEADER_BYTES - this.headerFill, chunk.length - off);
        chunk.copy(this.header, this.headerFill, off, off + take);
        this.headerFill += take;
        off += take;
        this.check();
        if (this.headerFill < HEADER_BYTES) break;
        this.headerFill = 0;
        const remaining = this.header.readUInt32BE(0) - 5;
        const type = this.header.readUInt8(4) as FrameType;
        const streamId = this.header.readUInt32BE(5);
        if (type === FrameType.control && streamId !== 0) {
          throw new ProtocolError(`malformed frame: control frame on stream ${streamId}`);
        }
        if (type === FrameType.ack && remaining !== 4) throw new ProtocolError('malformed frame: ack without a u32 count');
        if (remaining === 0) {
          frames.push({ type, streamId, payload: EMPTY });
          continue;
        }
        this.current = { type, streamId, remaining, parts: STREAMED_TYPES.has(type) ? null : [] };
        continue;
      }
      const take = Math.min(cur.remaining, chunk.length - off);
      const piece = chunk.subarray(off, off + take);
      off += take;
      cur.remaining -= take;
      if (cur.parts === null) {
        frames.push({ type: cur.type, streamId: cur.streamId, payload: piece });
      } else {
        cur.parts.push(piece);
        if (cur.remaining === 0) {
          const payload = cur.parts.length === 1 ? cur.parts[0]! : Buffer.concat(cur.parts);
          frames.push({ type: cur.type, streamId: cur.streamId, payload });
        }
      }
      if (cur.remaining === 0) this.current = undefined;
    }
    return frames;
  }

  /** Validates as much of the pending header as has arrived. */
  private check(): void {
    if (this.headerFill < 4) return;
    const length = this.header.readUInt32BE(0);
    if (length < 5 || length > MAX_FRAME_BYTES) {
      throw new ProtocolError(`malformed frame: length ${length} is outside 5..${MAX_FRAME_BYTES}`);
    }
    if (this.headerFill >= 5 && !KNOWN_TYPES.has(this.header.readUInt8(4))) {
      throw new ProtocolError(`malformed frame: unknown type ${this.header.readUInt8(4)}`);
    }
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
  /** Added to a clean base (PATH, HOME, LANG, TERM); the helper's own environment is never passed on. */
  env?: Record<string, string>;
  /** Run in a pseudo-terminal (needs node-pty in the image); stderr then arrives on stdout. */
  pty?: { cols: number; rows: number };
  /** Kill the whole command tree after this long; the exit then says `timedOut: true`. */
  timeoutMs?: number;
  /** Forward at most this many bytes of stdout+stderr, then a truncation marker; the rest is drained. */
  maxOutputBytes?: number;
  /** Grace between SIGTERM and SIGKILL when a tree is killed (default 2000 ms). */
  killGraceMs?: number;
  /**
   * Whose user the command runs as where the helper is split from the agent (docs/architecture.md
   * §2.3): `agent` (default) or `helper`, for Airlock's own commands that write /airlock. Only the
   * host's workspace code asks for `helper`; argv from an agent or an MCP client never does.
   */
  as?: 'agent' | 'helper';
}

export interface WireExit {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  truncated: boolean;
  durationMs: number;
  /** Bytes the command wrote to stdout+stderr, including any dropped after the cap. */
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
  | { t: 'hello'; version: string; node: string; uid: number; agentUid: number; pid: number; pty: boolean }
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
