import { readFile } from 'node:fs/promises';
import type { AuditRecordView } from '../../contracts/audit';
import { parseLogLines, StoredAuditRecord } from './audit-record-schema';
import { verifyAuditLog, type AuditExpectation, type AuditVerifyResult } from './audit-log';

/** Where a run's two logs are, and the anchors its record keeps of them. */
export interface RunLogs {
  audit: string;
  applyLog: string;
  anchors?: { audit?: { count: number; head: string }; applyLog?: { count: number; head: string } };
}

/**
 * Verifies a run's audit log and its apply log (which continues the chain after the seal) against
 * the anchors in the run record, which catch a log cut at a record boundary. The CLI and the UI
 * both verify through here.
 */
export function verifyRunLogs(logs: RunLogs): Promise<AuditVerifyResult> {
  const expect: AuditExpectation = { applyLog: logs.applyLog, ...(logs.anchors?.applyLog ? { applyAnchor: logs.anchors.applyLog } : {}) };
  const audit = logs.anchors?.audit;
  if (audit && audit.count > 0) {
    expect.minCount = audit.count;
    expect.head = audit.head;
    expect.headIndex = audit.count - 1;
  }
  return verifyAuditLog(logs.audit, expect);
}

/**
 * A page of a run's audit records, the apply log's after the audit log's (seq counts on). Each line
 * is read with `StoredAuditRecord`: a torn last line (a crash mid-write) is left out, as
 * `airlock audit verify` reports it; any other line that is not a record is INVALID_INPUT naming the
 * log, the line and the field. Whether the records are untouched is `verifyRunLogs`' question.
 */
export async function readRunLogs(logs: Pick<RunLogs, 'audit' | 'applyLog'>, offset: number, limit: number): Promise<{ records: AuditRecordView[]; total: number }> {
  const all: StoredAuditRecord[] = [];
  for (const file of [logs.audit, logs.applyLog]) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue; // no log (yet)
      throw err;
    }
    all.push(...parseLogLines(StoredAuditRecord, file, text, "it is kept as evidence; check the run with 'airlock audit verify'."));
  }
  const records = all.slice(offset, offset + limit).map((r) => ({ index: r.seq, at: r.ts, type: r.type, data: r.data, hash: r.hash }));
  return { records, total: all.length };
}
