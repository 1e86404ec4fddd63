import type { AgentEvent } from '../../../contracts/agent-events';

let secret = '';

/** Any occurrence of this string in an emitted event is replaced by [REDACTED] (the run token). */
export function setRedaction(value: string): void {
  secret = value.length >= 8 ? value : '';
}

export function redact(text: string): string {
  return secret && text.includes(secret) ? text.split(secret).join('[REDACTED]') : text;
}

/** Writes one event as one JSON line on stdout: the agent's only output channel. */
export function emit(event: AgentEvent): void {
  process.stdout.write(`${redact(JSON.stringify(event))}\n`);
}
