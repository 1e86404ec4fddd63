import { describe, expect, it } from 'vitest';
import { TerminalRecordReader } from './terminal-stream';

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
