import type { z } from 'zod';
import { AirlockError } from '../../contracts/errors';

/**
 * Parses a file Airlock wrote and reads back with its schema. A damaged copy is an error that names
 * the file and the first wrong field, and says what to do (`fix`) — never a crash on a missing
 * property later, and never a silent default.
 */
export function parseStoredJson<T>(schema: z.ZodType<T>, file: string, text: string, fix: string): T {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new AirlockError('INVALID_INPUT', `${file} is damaged: not valid JSON (${(err as Error).message}); ${fix}`);
  }
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new AirlockError('INVALID_INPUT', `${file} is damaged: field ${issue?.path.join('.') || '(top level)'}: ${issue?.message ?? 'invalid'}; ${fix}`);
}
