import { readFile } from 'node:fs/promises';
import type { AuditRecordView } from '../../contracts/audit';
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

/** A page of a run's audit records, the apply log's after the audit log's (seq counts on). */
export async function readRunLogs(logs: Pick<RunLogs, 'audit' | 'applyLog'>, offset: number, limit: number): Promise<{ records: AuditRecordView[]; total: number }> {
  let text = '';
  for (const file of [logs.audit, logs.applyLog]) {
    try {
      const part = await readFile(file, 'utf8');
      text += part === '' || part.endsWith('\n') ? part : `${part}\n`;
    } catch {
      // no log (yet)
    }
  }
  const lines = text.split('\n').filter(Boolean);
  const records: AuditRecordView[] = [];
  for (const line of lines.slice(offset, offset + limit)) {
    try {
      const r = JSON.parse(line) as { seq: number; ts: string; type: string; data: Record<string, unknown>; hash: string };
      records.push({ index: r.seq, at: r.ts, type: r.type, data: r.data, hash: r.hash });
    } catch {
      // A torn line is reported by verify; reading skips it.
    }
  }
  return { records, total: lines.length };
}
