import { z } from 'zod';
import { AirlockError } from './errors';

/** Run ids are sortable by creation time: `r-<base36 ms>-<8 hex>`. */
export const RunId = z.string().regex(/^r-[0-9a-z]+-[0-9a-f]{8}$/, 'not a run id');
export type RunId = z.infer<typeof RunId>;

/** A new run id (the one place that builds them); `now` only for tests of ordering. */
export function newRunId(now: number = Date.now()): RunId {
  const rand = Array.from(crypto.getRandomValues(new Uint8Array(4)), (b) => b.toString(16).padStart(2, '0')).join('');
  return `r-${now.toString(36)}-${rand}`;
}

/** `value` as a run id, or an actionable INVALID_INPUT (ids name folders on disk: no path tricks). */
export function requireRunId(value: string): RunId {
  if (RunId.safeParse(value).success) return value;
  throw new AirlockError('INVALID_INPUT', `'${value.slice(0, 80)}' is not a run id (expected r-<time>-<8 hex>, as 'airlock runs' shows).`);
}

/** Attempt group ids (docs/architecture.md §18), shaped like run ids: `g-<base36 ms>-<8 hex>`. */
export const AttemptGroupId = z.string().regex(/^g-[0-9a-z]+-[0-9a-f]{8}$/, 'not an attempt group id');
export type AttemptGroupId = z.infer<typeof AttemptGroupId>;

/** A new attempt group id. */
export function newAttemptGroupId(now: number = Date.now()): AttemptGroupId {
  return `g${newRunId(now).slice(1)}`;
}

/** `value` as an attempt group id, or an actionable INVALID_INPUT (ids name files on disk). */
export function requireAttemptGroupId(value: string): AttemptGroupId {
  if (AttemptGroupId.safeParse(value).success) return value;
  throw new AirlockError('INVALID_INPUT', `'${value.slice(0, 80)}' is not an attempt group id (expected g-<time>-<8 hex>, as 'airlock run --attempts' printed).`);
}

/** Provider ids: lowercase letters, digits and dashes (`anthropic`, `openai`, `ollama`, …). */
export const ProviderId = z.string().regex(/^[a-z][a-z0-9-]{0,39}$/, 'provider ids are lowercase letters, digits and dashes');
export type ProviderId = z.infer<typeof ProviderId>;
