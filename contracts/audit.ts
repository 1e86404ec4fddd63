import { z } from 'zod';
import { RunId } from './ids';

/** A run's hash-chained audit log: read it, verify it. */

export const AuditRecordView = z.object({
  index: z.number().int().nonnegative(),
  at: z.string(),
  type: z.string(),
  /** Record fields other than the chain (never a key; prompts only with transcripts on). */
  data: z.record(z.string(), z.unknown()),
  hash: z.string(),
});
export type AuditRecordView = z.infer<typeof AuditRecordView>;

export const AuditVerifyResult = z.object({
  runId: RunId,
  intact: z.boolean(),
  records: z.number().int().nonnegative(),
  /** Records in the run's apply log (what was applied after the seal), when it has one. */
  applies: z.number().int().nonnegative().optional(),
  /** The first record that breaks the chain, when not intact; `log: 'apply'` when it is in the apply log. */
  firstBroken: z.object({ index: z.number().int().nonnegative(), reason: z.string(), log: z.literal('apply').optional() }).optional(),
});
export type AuditVerifyResult = z.infer<typeof AuditVerifyResult>;

export const auditContracts = {
  'audit:verify': { input: z.strictObject({ runId: RunId }), output: AuditVerifyResult },
  'audit:read': {
    input: z.strictObject({ runId: RunId, offset: z.number().int().nonnegative().default(0), limit: z.number().int().positive().max(10_000).default(500) }),
    output: z.object({ records: z.array(AuditRecordView), total: z.number().int().nonnegative() }),
  },
} as const;
