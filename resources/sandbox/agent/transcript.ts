import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The conversation in the provider's wire format, kept in a file so a follow-up turn can continue
 * it (docs/architecture.md §15): the host carries the file out of this sandbox and into the next
 * one, as opaque bytes with the run token removed. Rewritten whole after every step.
 */
export interface Transcript {
  version: 1;
  format: 'anthropic' | 'openai';
  messages: Array<Record<string, unknown>>;
}

const ROLES = { anthropic: ['user', 'assistant'], openai: ['system', 'user', 'assistant', 'tool'] } as const;

/** The messages of an earlier turn; an error says why the file cannot be continued. */
export function loadTranscript(file: string, format: Transcript['format']): Array<Record<string, unknown>> {
  const t = JSON.parse(readFileSync(file, 'utf8')) as Partial<Transcript>;
  if (t.version !== 1) throw new Error('unknown transcript version');
  if (t.format !== format) throw new Error(`the transcript is in the ${t.format} format, this turn speaks ${format}`);
  if (!Array.isArray(t.messages)) throw new Error('the transcript has no messages');
  const roles: readonly string[] = ROLES[format];
  for (const m of t.messages) {
    if (!m || typeof m !== 'object' || Array.isArray(m) || !roles.includes(String((m as { role?: unknown }).role))) throw new Error('the transcript holds a message of an unknown shape');
  }
  return t.messages;
}

/** Writes the transcript atomically (a turn stopped mid-write leaves the previous one). */
export function saveTranscript(file: string, format: Transcript['format'], messages: Array<Record<string, unknown>>): void {
  const t: Transcript = { version: 1, format, messages };
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(`${file}.tmp`, JSON.stringify(t));
  renameSync(`${file}.tmp`, file);
}
