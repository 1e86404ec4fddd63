import { describe, expect, it, vi } from 'vitest';
import { TerminalFlow } from '../terminal/terminal-flow';
import { TerminalRecordReader, openTerminalStream } from './terminal-stream';

/** The bytes `airlock serve` writes (core/host/terminal-stream.ts): a JSON line, then a data record's bytes. */
function records(): Uint8Array {
  const enc = new TextEncoder();
  const data = enc.encode('a\n{"kind":"gap"}\n€ ok\r\n');
  const parts = [
    enc.encode(`${JSON.stringify({ kind: 'data', terminalId: 'run:r-1', runId: 'r-1', seq: 4, end: data.length, bytes: data.length })}\n`),
    data,
    enc.encode(`${JSON.stringify({ kind: 'gap', terminalId: 'run:r-1', runId: 'r-1', fromSeq: 5, toSeq: 9, droppedBytes: 1000 })}\n`),
    enc.encode(`${JSON.stringify({ kind: 'exit', terminalId: 'run:r-1', runId: 'r-1', seq: 10, exitCode: 0 })}\n`),
  ];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

describe('TerminalRecordReader', () => {
  it('reads records cut at any byte, handing data on as bytes', () => {
    const bytes = records();
    for (const step of [1, 2, 3, 7, 64, bytes.length]) {
      const got: Array<Record<string, unknown>> = [];
      const reader = new TerminalRecordReader((c) => got.push(c as Record<string, unknown>));
      for (let i = 0; i < bytes.length; i += step) reader.push(bytes.subarray(i, i + step));
      expect(got.map((c) => c.kind)).toEqual(['data', 'gap', 'exit']);
      expect(got[0]).toMatchObject({ terminalId: 'run:r-1', seq: 4 });
      expect(got[0]).not.toHaveProperty('bytes');
      // Output that looks like a record stays output.
      expect(new TextDecoder().decode(got[0]!.data as Uint8Array)).toBe('a\n{"kind":"gap"}\n€ ok\r\n');
      expect(got[1]).toMatchObject({ droppedBytes: 1000 });
    }
  });
});

describe('openTerminalStream with flow control', () => {
  it('asks for flow control, and acknowledges what it received only once no view has output left to draw', async () => {
    const enc = new TextEncoder();
    const data = enc.encode('x'.repeat(1000));
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode(`${JSON.stringify({ kind: 'hello', stream: 's-1', window: 4096 })}\n`));
        c.enqueue(enc.encode(`${JSON.stringify({ kind: 'data', terminalId: 'run:r-1', runId: 'r-1', seq: 1, bytes: data.length })}\n`));
        c.enqueue(data);
      },
    });
    const urls: string[] = [];
    const fakeFetch = (async (url: string) => {
      urls.push(url);
      return new Response(body, { status: 200 });
    }) as unknown as typeof fetch;
    const flow = new TerminalFlow();
    const view = {};
    const acks: Array<[string, number]> = [];
    const chunks: unknown[] = [];
    const close = openTerminalStream((c) => {
      chunks.push(c);
      flow.setBusy(view, true); // a view took it and is drawing
    }, { url: 'http://127.0.0.1:1/api/terminal-stream', fetch: fakeFetch, flow: { state: flow, sendAck: (s, n) => acks.push([s, n]) } });
    await vi.waitFor(() => expect(chunks.length).toBeGreaterThanOrEqual(1), { interval: 1 });
    expect(urls[0]).toBe('http://127.0.0.1:1/api/terminal-stream?ack=1');
    expect(chunks).toHaveLength(1); // the hello record is the transport's, not a terminal's
    // One turn of the event loop lets every already-due read run: the busy view still holds the ack.
    await new Promise((r) => setTimeout(r, 0));
    expect(acks).toEqual([]);
    flow.setBusy(view, false);
    expect(acks).toEqual([['s-1', 1000]]);
    close();
  });
});
