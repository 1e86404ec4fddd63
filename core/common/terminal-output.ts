import type { TerminalChunk } from '../../contracts/terminals';

/** Terminal output inside the host: bytes cut at character boundaries (see TerminalData for the fields). */
export interface TerminalBytes {
  kind: 'bytes';
  terminalId: string;
  runId: string;
  seq: number;
  end?: number;
  bytes: Buffer;
}

/**
 * What a terminal emits inside the host. Output stays bytes all the way to a transport that
 * carries bytes (the browser's terminal stream); only text transports decode it (`toTerminalChunk`).
 */
export type TerminalOutput = TerminalBytes | Exclude<TerminalChunk, { kind: 'data' }>;

export function toTerminalChunk(o: TerminalOutput): TerminalChunk {
  if (o.kind !== 'bytes') return o;
  return { kind: 'data', terminalId: o.terminalId, runId: o.runId, seq: o.seq, ...(o.end !== undefined ? { end: o.end } : {}), data: o.bytes.toString('utf8') };
}
