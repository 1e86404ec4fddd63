/**
 * A scripted, lying helper for tests: the host's ChannelClient talks to it over in-memory streams,
 * and the test decides every frame it sends back (floods, overruns, bogus frames).
 */
import { PassThrough } from 'node:stream';
import type { ChannelStream } from '../../sandbox/driver';
import { decodeControl, encodeControl, encodeFrame, FrameDecoder, FrameType, PROTOCOL_VERSION, request, requestEnvelope, type ControlMessage } from '../protocol';

export interface FakeHelper {
  stream: ChannelStream;
  /** Requests the host sent, in order. */
  requests: Array<Extract<ControlMessage, { t: 'req' }>>;
  /** Bytes the host acknowledged, per stream. */
  acked: Map<number, number>;
  /** Streams the host reset. */
  resets: Map<number, string>;
  /** Streams the host ended (half-closed). */
  ends: Set<number>;
  /** Sends raw bytes to the host. */
  sendRaw(bytes: Buffer): void;
  send(message: ControlMessage): void;
  /** Sends `bytes` on a stream as frames of at most 64 KiB, ignoring flow control. */
  sendData(streamId: number, bytes: Buffer, type?: FrameType): void;
  /** The first request with this op (waits for it). */
  request<Op extends string>(op: Op, timeoutMs?: number): Promise<Extract<ControlMessage, { t: 'req' }> & { op: Op }>;
}

export function startFakeHelper(): FakeHelper {
  const fromHelper = new PassThrough({ highWaterMark: 1024 * 1024 });
  const toHelper = new PassThrough();
  const decoder = new FrameDecoder();
  const requests: FakeHelper['requests'] = [];
  const acked = new Map<number, number>();
  const resets = new Map<number, string>();
  const ends = new Set<number>();
  toHelper.on('data', (chunk: Buffer) => {
    for (const f of decoder.push(chunk)) {
      if (f.type === FrameType.control) {
        const m = decodeControl(f.payload);
        // Checked as the real helper checks it: a test fails if the host ever sends a malformed request.
        if (m.t === 'req') requests.push({ ...requestEnvelope.check(m), ...request.check(m) });
      } else if (f.type === FrameType.ack) {
        acked.set(f.streamId, (acked.get(f.streamId) ?? 0) + f.payload.readUInt32BE(0));
      } else if (f.type === FrameType.reset) {
        resets.set(f.streamId, f.payload.toString('utf8'));
      } else if (f.type === FrameType.end) {
        ends.add(f.streamId);
      }
    }
  });
  const helper: FakeHelper = {
    stream: { readable: fromHelper, writable: toHelper, close: () => fromHelper.end() },
    requests,
    acked,
    resets,
    ends,
    sendRaw: (bytes) => void fromHelper.write(bytes),
    send: (message) => void fromHelper.write(encodeControl(message)),
    sendData(streamId, bytes, type = FrameType.stdout) {
      for (let off = 0; off < bytes.length; off += 64 * 1024) fromHelper.write(encodeFrame(type, streamId, bytes.subarray(off, off + 64 * 1024)));
    },
    async request(op, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const found = requests.find((r) => r.op === op);
        if (found) return found as never;
        if (Date.now() > until) throw new Error(`the host sent no ${op} request`);
        await new Promise((r) => setImmediate(r));
      }
    },
  };
  helper.send({ t: 'hello', version: PROTOCOL_VERSION, node: 'v18', uid: 1000, agentUid: 1000, pid: 1, pty: false });
  return helper;
}
