import type { AgentEvent } from '../../../contracts/agent-events';

let secrets: string[] = [];

/** Any occurrence of these strings in an emitted event is replaced by [REDACTED] (the run's tokens). */
export function setRedaction(...values: string[]): void {
  secrets = values.filter((v) => v.length >= 8);
}

export function redact(text: string): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join('[REDACTED]');
  return out;
}

/** Writes one event as one JSON line on stdout: the agent's only output channel. */
export function emit(event: AgentEvent): void {
  process.stdout.write(`${redact(JSON.stringify(event))}\n`);
}
