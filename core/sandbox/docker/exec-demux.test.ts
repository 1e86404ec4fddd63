import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ExecDemuxer } from './exec-demux';

function frame(kind: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header[0] = kind;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
}

async function readAll(demux: ExecDemuxer): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of demux.stdout) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

describe('ExecDemuxer', () => {
  it('gives back stdout and stderr whole and apart, however the stream is cut', async () => {
    const out = Buffer.from(Array.from({ length: 5000 }, (_, i) => i % 251));
    const wire = Buffer.concat([
      frame(1, out.subarray(0, 3000)),
      frame(2, Buffer.from('warn: é\n')),
      frame(1, Buffer.alloc(0)),
      frame(1, out.subarray(3000)),
    ]);
    for (const size of [1, 3, 7, 8, 9, 64, 4096, wire.length]) {
      const source = new PassThrough();
      const stderr: Buffer[] = [];
      const demux = new ExecDemuxer(source, (c) => stderr.push(Buffer.from(c)));
      const done = readAll(demux);
      for (let i = 0; i < wire.length; i += size) source.write(wire.subarray(i, i + size));
      source.end();
      expect((await done).equals(out), `cut every ${size} bytes`).toBe(true);
      expect(Buffer.concat(stderr).toString('utf8')).toBe('warn: é\n');
    }
  });

  it('pauses the socket while stdout is not read, and resumes when it is', async () => {
    const source = new PassThrough();
    const demux = new ExecDemuxer(source, () => undefined);
    source.write(frame(1, Buffer.alloc(64 * 1024, 1)));
    await new Promise((r) => setImmediate(r));
    expect(source.isPaused()).toBe(true);
    demux.stdout.read();
    await new Promise((r) => setImmediate(r));
    expect(source.isPaused()).toBe(false);
    source.end();
  });
});
