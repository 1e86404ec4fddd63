import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { checkStoredValue, issueText } from '../common/stored-json';

/**
 * What a line of an audit log or an apply log must be before its chain is checked: the envelope
 * `{ seq, ts, type, data, prev, hash }` (docs/architecture.md §5, stored files). The schema only says
 * the line is a record; whether it is *this run's untouched* record is the hash chain's job — a
 * schema-valid but altered record still fails `verifyAuditLog` with "hash mismatch".
 */
export const StoredAuditRecord = z.object({
  seq: z.number().int().nonnegative(),
  ts: z.string().min(1),
  type: z.string().min(1),
  /** Every record type's data is an object (audit-records.ts); its fields are covered by the hash. */
  data: z.record(z.string(), z.unknown()),
  prev: z.string(),
  hash: z.string(),
});
export type StoredAuditRecord = z.infer<typeof StoredAuditRecord>;

const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'not a SHA-256 (64 hex digits)');

/**
 * The data of an apply log's `apply` record, as apply reads it back (a resolution saved in a merge
 * view is trusted on the next apply: see `resolutionsOf`). Mirrors `AuditRecordData['apply']`.
 */
export const StoredApplyData = z.object({
  mode: z.enum(['working-tree', 'branch', 'patch', 'resolve']),
  scope: z.enum(['turn', 'thread']).optional(),
  target: z.string(),
  branch: z.string().optional(),
  commit: z.string().optional(),
  applied: z.array(z.string()),
  refused: z.array(z.object({ path: z.string(), reason: z.string() })),
  held: z.array(z.string()).optional(),
  unchanged: z.array(z.string()).optional(),
  patchSha256: Sha256Hex,
  selection: z.array(z.object({ path: z.string(), hunks: z.array(z.number().int()).optional(), lines: z.array(z.string()).optional() })).optional(),
  resolved: z
    .object({ path: z.string().min(1), replacedSha256: z.string(), writtenSha256: Sha256Hex, baseSha256: z.string(), theirsSha256: z.string() })
    .optional(),
  approval: z.object({ via: z.literal('mcp'), client: z.string(), by: z.enum(['user', 'server-flag']), requestId: z.string().optional() }).optional(),
});
export type StoredApplyData = z.infer<typeof StoredApplyData>;

/** A line that is JSON but not an audit record: the first wrong field, for a verify reason. */
export function auditRecordProblem(value: unknown): string | undefined {
  const parsed = StoredAuditRecord.safeParse(value);
  return parsed.success ? undefined : `not an audit record: ${issueText(parsed.error)}`;
}

/**
 * The lines of one append-only log file (audit or apply log), parsed with `schema`. A torn last
 * line (no trailing newline: a crash mid-write) is not damage and is left out — `airlock audit
 * verify` reports it, and the next `AuditLog.open` cuts it off and records that. Any other line
 * that is not JSON, or not `schema`, is an error naming the file, the line (1-based) and the field.
 */
export function parseLogLines<T>(schema: z.ZodType<T>, file: string, text: string, fix: string): T[] {
  const lines = text.split('\n');
  lines.pop(); // '' after the last newline, or a torn last line
  return lines.map((line, i) => {
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      throw new AirlockError('INVALID_INPUT', `${file} is damaged: line ${i + 1} is not valid JSON; ${fix}`);
    }
    return checkStoredValue(schema, file, raw, fix, `line ${i + 1}`);
  });
}
