import { MAX_RAW_OUTPUT_BYTES, RAW_OUTPUT_HEADER, rawOutputHeader, type AgentEvent } from '../../../contracts/agent-events';

let secret = '';
let secretBytes: Buffer | undefined;

/** Any occurrence of this string in an emitted event is replaced by [REDACTED] (the run token). */
export function setRedaction(value: string): void {
  secret = value.length >= 8 ? value : '';
  secretBytes = secret ? Buffer.from(secret) : undefined;
}

export function redact(text: string): string {
  return secret && text.includes(secret) ? text.split(secret).join('[REDACTED]') : text;
}

/** Writes one event as one JSON line on stdout: the agent's only output channel. */
export function emit(event: AgentEvent): void {
  process.stdout.write(`${redact(JSON.stringify(event))}\n`);
}

/**
 * Writes a chunk of command output as raw records (contracts/agent-events.ts): no JSON, no UTF-8
 * decoding here — the host decodes. Ids a header cannot carry fall back to JSON events.
 */
export function emitOutput(id: string, stream: 'stdout' | 'stderr', chunk: Buffer): void {
  if (!RAW_OUTPUT_HEADER.test(rawOutputHeader(id, stream, 0).slice(0, -1))) {
    emit({ type: 'command_output', id, stream, data: chunk.toString('utf8') });
    return;
  }
  // The token is ASCII, so a latin1 round trip rewrites it and leaves every other byte as it was.
  const data = secretBytes && chunk.includes(secretBytes) ? Buffer.from(redact(chunk.toString('latin1')), 'latin1') : chunk;
  for (let off = 0; off < data.length; off += MAX_RAW_OUTPUT_BYTES) {
    const part = data.subarray(off, off + MAX_RAW_OUTPUT_BYTES);
    process.stdout.write(Buffer.concat([Buffer.from(rawOutputHeader(id, stream, part.length)), part]));
  }
}
