import { MAX_RAW_OUTPUT_BYTES, RAW_OUTPUT_HEADER, rawOutputHeader, type AgentEvent } from '../../../contracts/agent-events';
import { redactBytes } from '../../../core/common/utf8';

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
 * Writes command output as one raw record (contracts/agent-events.ts): no JSON, no decoding, no
 * copy — the header and the parts go out in one writev. Ids a header cannot carry fall back to JSON.
 */
export function emitOutput(id: string, stream: 'stdout' | 'stderr', parts: Buffer[]): void {
  if (!RAW_OUTPUT_HEADER.test(rawOutputHeader(id, stream, 0).slice(0, -1))) {
    emit({ type: 'command_output', id, stream, data: Buffer.concat(parts).toString('utf8') });
    return;
  }
  const clean = parts.map((p) => redactBytes(p, secretBytes));
  let batch: Buffer[] = [];
  let size = 0;
  const send = () => {
    if (!size) return;
    process.stdout.cork();
    process.stdout.write(rawOutputHeader(id, stream, size));
    for (const b of batch) process.stdout.write(b);
    process.stdout.uncork();
    batch = [];
    size = 0;
  };
  for (let part of clean) {
    while (part.length) {
      const take = part.subarray(0, MAX_RAW_OUTPUT_BYTES - size);
      batch.push(take);
      size += take.length;
      part = part.subarray(take.length);
      if (size === MAX_RAW_OUTPUT_BYTES) send();
    }
  }
  send();
}
