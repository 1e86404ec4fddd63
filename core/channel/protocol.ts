/**
 * Wire format of the channel between the host and the in-sandbox helper (docs/architecture.md §4).
 *
 * Every frame is `u32 length | u8 type | u32 stream id | payload`, big-endian, where `length`
 * counts the type, stream id and payload (so it is always >= 5). Stream 0 carries JSON control
 * messages; other streams carry raw bytes (process stdio, TCP connections, file contents).
 * Stream ids opened by the host are odd, those opened by the helper are even, so both sides can
 * open streams without coordinating.
 *
 * This module is imported by both sides: it must stay free of dependencies and run on Node 18. Each
 * control message is defined once below as a guard (guards.ts): its type is inferred from it, the host
 * checks everything the helper sends with it, and the helper everything the host sends.
 */
import { array, bool, dict, GuardError, int, literal, nullable, num, object, oneOf, optional, refine, str, tagged, unknownValue, type Guard, type Infer, type InferShape } from './guards';

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
// Control messages (JSON on stream 0), each defined once: the guard is the type and the check.

/** Paths in one watch batch (the helper splits larger ones; the host refuses larger ones). */
export const WATCH_BATCH_PATHS = 5000;
/** Longest error or watch-error text the host keeps (a longer one is cut, not refused). */
const MAX_MESSAGE_CHARS = 4000;

/** A stream id the host opened (odd). */
const hostStream = refine(int({ min: 1, max: 0xffffffff }), 'an odd stream id (the host opens odd streams)', (n) => n % 2 === 1);
/** A stream id the helper opened (even, never 0: stream 0 is the control stream). */
const helperStream = refine(int({ min: 2, max: 0xffffffff }), 'an even stream id (the helper opens even streams)', (n) => n % 2 === 0);
const handle = int({ min: 0 });
const port = int({ min: 0, max: 65535 });

/**
 * Forwarded connections into one host service (docs/architecture.md §4): the host's cap per service
 * is at most this, and the helper holds a connection past the cap waiting (paused, unread) for at
 * most ACCEPT_WAIT_MS, at most MAX_WAITING_CONNECTIONS of them per service, before it refuses it.
 */
export const MAX_SERVICE_CONNECTIONS = 1024;
export const ACCEPT_WAIT_MS = 60_000;
export const MAX_WAITING_CONNECTIONS = 1024;
/**
 * A service exposed with `closeIdle` (the egress proxy): while connections wait at its cap, the
 * helper closes its longest-idle connection whose server spoke last and which carried no bytes either
 * way for this long, as a busy server closes idle keep-alive sockets (docs/architecture.md §4).
 */
export const IDLE_CLOSE_MS = 5_000;

export const wireError = object({ kind: str({ max: 64 }), message: str({ max: MAX_MESSAGE_CHARS, clip: true }) });
export type WireError = Infer<typeof wireError>;

export const wireSpawn = object({
  /** The program, then its arguments. */
  argv: refine(array(str({ max: 1024 * 1024 }), { min: 1 }), 'a non-empty array of strings whose first (the program) is not empty', (a) => a[0] !== ''),
  cwd: optional(str()),
  /** Added to a clean base (PATH, HOME, LANG, TERM); the helper's own environment is never passed on. */
  env: optional(dict(str({ max: 1024 * 1024 }))),
  /** Run in a pseudo-terminal (needs node-pty in the image); stderr then arrives on stdout. */
  pty: optional(object({ cols: num({ min: 1 }), rows: num({ min: 1 }) })),
  /** Kill the whole command tree after this long; the exit then says `timedOut: true`. */
  timeoutMs: optional(num()),
  /** Forward at most this many bytes of stdout+stderr, then a truncation marker; the rest is drained. */
  maxOutputBytes: optional(num()),
  /** Grace between SIGTERM and SIGKILL when a tree is killed (default 2000 ms). */
  killGraceMs: optional(num()),
  /**
   * Whose user the command runs as where the helper is split from the agent (docs/architecture.md
   * §2.3): `agent` (default) or `helper`, for Airlock's own commands that write /airlock. Only the
   * host's workspace code asks for `helper`; argv from an agent or an MCP client never does.
   */
  as: optional(oneOf(['agent', 'helper'])),
});
export type WireSpawn = Infer<typeof wireSpawn>;

export const wireExit = object({
  exitCode: nullable(int()),
  signal: nullable(str({ max: 32 })),
  timedOut: bool,
  truncated: bool,
  durationMs: num(),
  /** Bytes the command wrote to stdout+stderr, including any dropped after the cap. */
  outputBytes: num(),
});
export type WireExit = Infer<typeof wireExit>;

export const wireFileEntry = object({
  name: str(),
  type: oneOf(['file', 'dir', 'symlink', 'other']),
  size: num(),
  mode: int({ min: 0, max: 0o7777 }),
});
export type WireFileEntry = Infer<typeof wireFileEntry>;

export const watchBackend = oneOf(['auto', 'inotify', 'fs', 'poll']);
export type WatchBackend = Infer<typeof watchBackend>;

/** Nothing but "done": any object (its keys are dropped). */
const done = object({});

/**
 * Requests the host sends, by `op`: what each carries besides `op`, and what its response's `value`
 * is. `stream` is a host-allocated (odd) stream id where the op needs one.
 */
const ops = {
  spawn: { request: { stream: hostStream, spawn: wireSpawn }, result: object({ pid: int({ min: 1 }) }) },
  kill: { request: { stream: hostStream, signal: str({ max: 32 }) }, result: done },
  resize: { request: { stream: hostStream, cols: num({ min: 1 }), rows: num({ min: 1 }) }, result: done },
  readFile: { request: { stream: hostStream, path: str({ min: 1 }), maxBytes: num() }, result: object({ size: num({ min: 0 }) }) },
  writeFile: { request: { stream: hostStream, path: str({ min: 1 }), mode: optional(int({ min: 0, max: 0o7777 })) }, result: done },
  list: { request: { path: str({ min: 1 }) }, result: array(wireFileEntry) },
  watch: {
    request: { watchId: handle, path: str({ min: 1 }), debounceMs: num(), ignore: array(str(), { max: 10_000 }), backend: watchBackend },
    result: object({ backend: str({ max: 32 }) }),
  },
  unwatch: { request: { watchId: handle }, result: done },
  /**
   * `maxConnections`: the host's cap for this service; the helper makes connections past it wait (§4).
   * `closeIdle`: while some wait, the helper closes this service's idle connections (IDLE_CLOSE_MS).
   */
  listen: {
    request: { listenerId: handle, port, maxConnections: optional(int({ min: 1, max: MAX_SERVICE_CONNECTIONS })), closeIdle: optional(bool) },
    result: object({ port: int({ min: 1, max: 65535 }) }),
  },
  unlisten: { request: { listenerId: handle }, result: done },
  connect: { request: { stream: hostStream, port: int({ min: 1, max: 65535 }) }, result: done },
  ping: { request: {}, result: done },
  /**
   * What the helper holds open: forwarded TCP streams, its routing table of streams, streams its mux
   * keeps state for; and how many idle connections it closed for waiting ones since it started (§4).
   */
  stats: { request: {}, result: object({ streams: int({ min: 0 }), sinks: int({ min: 0 }), mux: int({ min: 0 }), closedIdle: int({ min: 0 }) }) },
};
type Ops = typeof ops;
export type RequestOp = keyof Ops;

/** A request the host sends (without the envelope's `t` and `id`). */
export type Request = { [Op in RequestOp]: InferShape<{ op: Guard<Op> } & Ops[Op]['request']> }[RequestOp];
/** What the helper answers to a request of `op` (the response's `value`). */
export type ResultOf<Op extends RequestOp> = Infer<Ops[Op]['result']>;

export const request = tagged(
  'op',
  Object.fromEntries(Object.entries(ops).map(([op, d]) => [op, object({ op: literal(op), ...d.request })])) as { [Op in RequestOp]: Guard<Extract<Request, { op: Op }>> },
);

/** The guard for the response value of a request of `op`. */
export function resultGuard<Op extends RequestOp>(op: Op): Guard<ResultOf<Op>> {
  return ops[op].result as Guard<ResultOf<Op>>;
}

/** The envelope of a request: `{t: 'req', id, ...request}`. */
export const requestEnvelope = object({ t: literal('req'), id: int({ min: 1 }) });
export type RequestMessage = Infer<typeof requestEnvelope> & Request;

export const helloMessage = object({
  t: literal('hello'),
  version: str({ max: 64 }),
  node: str({ max: 64 }),
  /** The helper's own uid: 0 where it is split from the agent (docs/architecture.md §2.3). */
  uid: int(),
  /** The uid the agent's commands run as; never 0 in a sandbox Airlock accepts. */
  agentUid: int(),
  pid: int({ min: 1 }),
  pty: bool,
});

/** Messages the helper sends; the host refuses anything else (the channel closes). */
export const helperMessage = tagged('t', {
  hello: helloMessage,
  res: refine(
    object({ t: literal('res'), id: int({ min: 1 }), ok: bool, value: optional(unknownValue), error: optional(wireError) }),
    'a response with an error when ok is false',
    (m) => m.ok || m.error !== undefined,
  ),
  exit: object({ t: literal('exit'), stream: hostStream, info: wireExit }),
  watch: object({ t: literal('watch'), watchId: handle, paths: array(str(), { max: WATCH_BATCH_PATHS }) }),
  watchError: object({ t: literal('watchError'), watchId: handle, message: str({ max: MAX_MESSAGE_CHARS, clip: true }) }),
  accept: object({ t: literal('accept'), listenerId: handle, stream: helperStream }),
  /** The helper reset `count` connections to a listener that waited too long (or found the queue full) at its cap. */
  refused: object({ t: literal('refused'), listenerId: handle, count: int({ min: 1, max: MAX_WAITING_CONNECTIONS }) }),
});
export type HelperMessage = Infer<typeof helperMessage>;

/** Every control message, either way. */
export type ControlMessage = HelperMessage | RequestMessage;

/** A control frame parsed as JSON: an object with a string `t`, nothing else checked yet. */
export type RawControl = { t: string } & Record<string, unknown>;

/**
 * Checks `raw` with `g`; a mismatch is a ProtocolError that names the message and the field
 * (`malformed exit from the sandbox helper: info.durationMs: expected a finite number, got a string of 3 characters`).
 */
export function checkMessage<T>(g: Guard<T>, raw: unknown, what: string): T {
  try {
    return g.check(raw);
  } catch (err) {
    if (err instanceof GuardError) throw new ProtocolError(`malformed ${what}: ${err.message}`);
    throw err;
  }
}

export function decodeControl(payload: Buffer): RawControl {
  let value: unknown;
  try {
    value = JSON.parse(payload.toString('utf8'));
  } catch {
    throw new ProtocolError('malformed control frame: not JSON');
  }
  if (typeof value !== 'object' || value === null || typeof (value as { t?: unknown }).t !== 'string') {
    throw new ProtocolError('malformed control frame: no message type');
  }
  return value as RawControl;
}
