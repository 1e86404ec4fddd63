import { z } from 'zod';
import type { FileChange } from './changes';
import type { StoredResult } from './collect';

/** One changed file as `result.json` keeps it (`FileChange`). */
export const FileChangeSchema = z.looseObject({
  path: z.string().min(1),
  oldPath: z.string().optional(),
  status: z.enum(['added', 'modified', 'deleted', 'renamed']),
  binary: z.boolean(),
  additions: z.number().int().nonnegative(),
  deletions: z.number().int().nonnegative(),
  size: z.number().nonnegative(),
  oldSize: z.number().nonnegative(),
  oldMode: z.string().optional(),
  newMode: z.string().optional(),
  modeChanged: z.boolean(),
  tooLarge: z.boolean(),
  oldOid: z.string(),
  newOid: z.string(),
}) satisfies z.ZodType<FileChange>;

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex');
const Commit = z.string().regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, 'a git commit id');

/**
 * `result.json`: what apply trusts (docs/architecture.md §11), parsed before anything acts on it.
 * Loose: fields a newer Airlock adds are kept as they are, not dropped.
 */
export const StoredResultSchema = z.looseObject({
  version: z.literal(2),
  baseCommit: Commit,
  resultCommit: Commit,
  headCommit: Commit.optional(),
  patchSha256: Sha256,
  changes: z.array(
    FileChangeSchema.extend({
      warnings: z.array(z.string()).optional(),
      section: z.object({ offset: z.number().int().nonnegative(), length: z.number().int().nonnegative(), sha256: Sha256 }),
    }),
  ),
  skipped: z.array(z.object({ path: z.string(), reason: z.string() })),
}) satisfies z.ZodType<StoredResult>;
