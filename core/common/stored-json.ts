import type { z } from 'zod';
import { AirlockError } from '../../contracts/errors';

/** The first problem zod found, as `field a.b: message` (what a damaged-file error names). */
export function issueText(error: z.ZodError): string {
  const issue = error.issues[0];
  return `field ${issue?.path.join('.') || '(top level)'}: ${issue?.message ?? 'invalid'}`;
}

/**
 * Checks a value read from a stored file against its schema; damage is an error naming the file
 * (and `where` in it, e.g. `line 3`), the first wrong field, and what to do (`fix`).
 */
export function checkStoredValue<T>(schema: z.ZodType<T>, file: string, raw: unknown, fix: string, where?: string): T {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  throw new AirlockError('INVALID_INPUT', `${file} is damaged: ${where ? `${where}, ` : ''}${issueText(parsed.error)}; ${fix}`);
}

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
  return checkStoredValue(schema, file, raw, fix);
}
