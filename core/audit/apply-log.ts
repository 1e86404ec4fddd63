import { AirlockError } from '../../contracts/errors';
import { AuditLog, verifyAuditLog, type AuditLogOptions } from './audit-log';

/**
 * Opens a run's apply log for appending: a second file that continues the audit log's chain after
 * its `sealed` record, so what was applied to the user's project is hash-chained too while the
 * audit log itself stays sealed. Refused (CONFLICT) when the audit log is not intact and sealed —
 * there would be nothing trustworthy to anchor to — or when the apply log does not continue from
 * this run's seal.
 *
 * ```ts
 * const log = await openApplyLog(paths.audit, paths.applyLog);
 * await log.append('apply', { mode: 'working-tree', target, applied, refused, patchSha256 });
 * await log.close();
 * ```
 */
export async function openApplyLog(auditFile: string, applyFile: string, options: Omit<AuditLogOptions, 'chainStart'> = {}): Promise<AuditLog> {
  const audit = await verifyAuditLog(auditFile, { sealed: true });
  if (!audit.ok) {
    throw new AirlockError(
      'CONFLICT',
      `Refusing to apply: the run's audit log is not intact and sealed (record ${audit.index}: ${audit.reason}), so the apply could not be recorded in its chain. Check it with 'airlock audit verify'.`,
    );
  }
  // The seal is the last record: seq count-1, hash = head.
  return AuditLog.open(applyFile, { ...options, chainStart: { seq: audit.count, prev: audit.head } });
}
