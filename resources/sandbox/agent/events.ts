import { MAX_RAW_OUTPUT_BYTES, RAW_OUTPUT_HEADER, rawOutputHeader, type AgentEvent } from '../../../contracts/agent-events';
import { StreamRedactor } from '../../../core/common/stream-redactor';

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

/** A redactor for one stream of one command: it catches the run token even when cut across chunks. */
export function outputRedactor(): StreamRedactor {
  return new StreamRedactor(secretBytes ? [secretBytes] : []);
}

/**
 * Writes command output as one raw record (contracts/agent-events.ts): no JSON, no decoding, no
 * copy — the header and the parts go out in one writev. Ids a header cannot carry fall back to JSON.
 * The parts pass through the stream's `redactor`; with `end`, what it still holds goes out too.
 */
export function emitOutput(id: string, stream: 'stdout' | 'stderr', parts: Buffer[], redactor: StreamRedactor, end = false): void {
  const clean = parts.map((p) => redactor.push(p));
  if (end) clean.push(redactor.end());
  if (!clean.some((p) => p.length)) return;
  if (!RAW_OUTPUT_HEADER.test(rawOutputHeader(id, stream, 0).slice(0, -1))) {
    emit({ type: 'command_output', id, stream, data: Buffer.concat(clean).toString('utf8') });
    return;
  }
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
