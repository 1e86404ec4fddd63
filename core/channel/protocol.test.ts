import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Mux, type MuxHandlers } from './mux';
import {
  FrameDecoder,
  FrameType,
  MAX_CHUNK_BYTES,
  ProtocolError,
  type Frame,
  encodeControl,
  encodeFrame,
  decodeControl,
} from './protocol';

describe('frame codec', () => {
  /** Joins consecutive pieces of the same data frame stream, as a consumer sees them. */
  function collapse(frames: Frame[]): Array<[number, number, string]> {
    const out: Array<[number, number, string]> = [];
    for (const f of frames) {
      const last = out[out.length - 1];
      if (last && f.type !== FrameType.control && f.type !== FrameType.end && last[0] === f.type && last[1] === f.streamId) {
        last[2] += f.payload.toString();
      } else {
        out.push([f.type, f.streamId, f.payload.toString()]);
      }
    }
    return out;
  }

  it('decodes frames cut at every possible point', () => {
    const frames = Buffer.concat([
      encodeControl({ t: 'req', id: 1, op: 'ping' }),
      encodeFrame(FrameType.stdout, 3, Buffer.from('hello')),
      encodeFrame(FrameType.end, 3),
      encodeControl({ t: 'req', id: 2, op: 'ping' }),
    ]);
    for (let cut = 0; cut <= frames.length; cut++) {
      const decoder = new FrameDecoder();
      const out = [...decoder.push(frames.subarray(0, cut)), ...decoder.push(frames.subarray(cut))];
      expect(collapse(out)).toEqual([
        [FrameType.control, 0, JSON.stringify({ t: 'req', id: 1, op: 'ping' })],
        [FrameType.stdout, 3, 'hello'],
        [FrameType.end, 3, ''],
        [FrameType.control, 0, JSON.stringify({ t: 'req', id: 2, op: 'ping' })],
      ]);
    }
  });

  it('decodes one byte at a time; data arrives as uncopied pieces, control frames whole', () => {
    const frame = Buffer.concat([encodeFrame(FrameType.data, 0xfffffffe, Buffer.alloc(1000, 7)), encodeControl({ t: 'req', id: 9, op: 'ping' })]);
    const decoder = new FrameDecoder();
    const out: Frame[] = [];
    for (const byte of frame) out.push(...decoder.push(Buffer.from([byte])));
    const data = out.filter((f) => f.type === FrameType.data);
    expect(new Set(data.map((f) => f.streamId))).toEqual(new Set([0xfffffffe]));
    expect(Buffer.concat(data.map((f) => f.payload)).equals(Buffer.alloc(1000, 7))).toBe(true);
    const control = out.filter((f) => f.type === FrameType.control);
    expect(control.map((f) => f.payload.toString())).toEqual([JSON.stringify({ t: 'req', id: 9, op: 'ping' })]);
  });

  it('rejects a length that cannot be valid', () => {
    expect(() => new FrameDecoder().push(Buffer.from('garbage that is not a frame'))).toThrow(ProtocolError);
    expect(() => new FrameDecoder().push(Buffer.from([0, 0, 0, 2, 1, 0]))).toThrow(/length 2/);
  });

  it('rejects an unknown frame type before the payload arrives', () => {
    expect(() => new FrameDecoder().push(Buffer.from([0, 0, 0, 10, 99]))).toThrow(/unknown type 99/);
  });

  it('rejects a control frame that is not JSON', () => {
    expect(() => decodeControl(Buffer.from('{nope'))).toThrow(ProtocolError);
    expect(() => decodeControl(Buffer.from('[1]'))).toThrow(ProtocolError);
  });
});

function pair() {
  const aToB = new PassThrough();
  const bToA = new PassThrough();
  const received: Array<{ stream: number; bytes: number }> = [];
  const noop: MuxHandlers = { control() {}, data() {}, end() {}, reset() {}, closed() {} };
  const a = new Mux(bToA, aToB, noop, { window: 256 * 1024 });
  let b!: Mux;
  const handlers: MuxHandlers = {
    ...noop,
    data: (stream, _type, payload) => received.push({ stream, bytes: payload.length }),
  };
  b = new Mux(aToB, bToA, handlers, { window: 256 * 1024 });
  return { a, b, received };
}

describe('mux flow control', () => {
  it('chunks large writes and stops a sender when the receiver does not acknowledge', async () => {
    const { a, received } = pair();
    const sender = a.sender(1);
    const more = sender.write(Buffer.alloc(1024 * 1024));
    expect(more).toBe(false);
    await new Promise((r) => setImmediate(r));
    const total = received.reduce((n, r) => n + r.bytes, 0);
    // Only the window went out; the rest waits for credit.
    expect(total).toBe(256 * 1024);
    expect(Math.max(...received.map((r) => r.bytes))).toBeLessThanOrEqual(MAX_CHUNK_BYTES);
  });

  it('never sends past the window when writes do not divide it (the receiver would call that a violation)', async () => {
    const { a, b, received } = pair();
    // Writes of odd sizes: the last one that fits only in part must be cut at the window.
    const sender = a.sender(3);
    for (let i = 0; i < 8; i++) sender.write(Buffer.alloc(100_000));
    await new Promise((r) => setImmediate(r));
    expect(received.reduce((n, r) => n + r.bytes, 0)).toBe(256 * 1024);
    // A quarter window acknowledged: exactly that much more goes out, still within the window.
    b.consumed(3, 64 * 1024);
    await new Promise((r) => setImmediate(r));
    expect(received.reduce((n, r) => n + r.bytes, 0)).toBe(320 * 1024);
    expect(b.isClosed).toBe(false);
  });

  it('resumes the sender as the receiver acknowledges, delivering every byte in order', async () => {
    const aToB = new PassThrough();
    const bToA = new PassThrough();
    const noop: MuxHandlers = { control() {}, data() {}, end() {}, reset() {}, closed() {} };
    const a = new Mux(bToA, aToB, noop, { window: 64 * 1024 });
    const chunks: Buffer[] = [];
    let ended = false;
    const b: Mux = new Mux(aToB, bToA, {
      ...noop,
      data: (stream, _t, payload) => {
        chunks.push(Buffer.from(payload));
        b.consumed(stream, payload.length);
      },
      end: () => {
        ended = true;
      },
    }, { window: 64 * 1024 });
    const data = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < data.length; i++) data[i] = i % 251;
    const sender = a.sender(5);
    sender.write(data);
    sender.end();
    await new Promise<void>((resolve) => {
      const check = () => (ended ? resolve() : setTimeout(check, 5));
      check();
    });
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
  });

  it('closes with the decoder error on a malformed frame', async () => {
    const input = new PassThrough();
    const reasons: string[] = [];
    new Mux(input, new PassThrough(), { control() {}, data() {}, end() {}, reset() {}, closed: (r) => reasons.push(r) });
    input.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 1]));
    await new Promise((r) => setImmediate(r));
    expect(reasons).toEqual([expect.stringMatching(/malformed frame/)]);
  });
});
