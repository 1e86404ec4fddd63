import type { AuditRecordView, RunEvent } from '../../../contracts';
import { connectionsRefusedText } from '../../../contracts/format';

/**
 * Audit records in plain words (the audit view and the run report). The records are the host's
 * own account of the run (core/audit/audit-records.ts); fields are read defensively, since an old
 * log may lack some.
 */

type Data = Record<string, unknown>;

const str = (v: unknown): string => (typeof v === 'string' ? v : v === undefined || v === null ? '' : String(v));
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const strings = (v: unknown): string[] => list(v).map(str);

function some(items: string[], max = 5): string {
  return items.length <= max ? items.join(', ') : `${items.slice(0, max).join(', ')} and ${items.length - max} more`;
}

/** One audit record as a sentence. */
export function describeAuditRecord(r: Pick<AuditRecordView, 'type' | 'data'>): string {
  const d: Data = r.data;
  switch (r.type) {
    case 'run_created':
      return `Run created: ${str(d.agent)} agent, ${str(d.provider)}/${str(d.model)}, ${str(d.isolation)} isolation, network ${str(d.network)}, approval ${str(d.approval)}`;
    case 'lifecycle':
      return `${d.from ? `${str(d.from)} → ` : ''}${str(d.to)}${d.reason ? ` (${str(d.reason)})` : ''}`;
    case 'command':
    case 'command_claim': {
      const exit = d.timedOut ? 'timed out' : `exit ${d.exitCode === null ? 'killed' : str(d.exitCode)}`;
      return `${r.type === 'command' ? 'Ran' : 'The agent says it ran'} \`${str(d.command)}\` → ${exit}, ${num(d.outputBytes) ?? 0} bytes of output`;
    }
    case 'file_change':
      return `Files changed: ${some(list(d.changes).map((c) => `${str((c as Data).path)} (${str((c as Data).kind)})`))}`;
    case 'model_call': {
      const cost = num(d.costUsd);
      return `Model call ${str(d.provider)}/${str(d.model)}: HTTP ${str(d.status)}, ${num(d.inputTokens) ?? 0} in / ${num(d.outputTokens) ?? 0} out tokens${cost !== undefined ? `, $${cost.toFixed(4)}` : ''}`;
    }
    case 'side_door': {
      const parts = [strings(d.stripped).length ? `stripped ${some(strings(d.stripped))}` : '', strings(d.allowed).length ? `allowed ${some(strings(d.allowed))}` : '', d.refused ? `refused the call for ${str(d.refused)}` : ''];
      return `Provider-side tools: ${parts.filter(Boolean).join('; ')}`;
    }
    case 'approval':
      return `${d.approved ? 'Approved' : 'Denied'} (${str(d.by)}): \`${str(d.command)}\``;
    case 'excluded_files':
      return `Left out of the copy: ${some(list(d.files).map((f) => str((f as Data).path)))}`;
    case 'network':
      if (d.host) return `${d.allowed ? 'Allowed' : 'Blocked'} a connection to ${str(d.host)}${d.port ? `:${str(d.port)}` : ''}`;
      return `Network policy: ${str(d.policy)}${strings(d.allow).length ? ` (${some(strings(d.allow))})` : ''}`;
    case 'connections_refused':
      return connectionsRefusedText(str(d.service), num(d.limit) ?? 0, num(d.refused) ?? 0, d.ended === true);
    case 'wipe':
      return d.verified
        ? `Sandbox wiped and verified gone: ${some(strings(d.removed))}${d.pooledAs ? ` (this run's sandbox, started ahead in the warm pool as ${str(d.pooledAs)})` : ''}`
        : `Sandbox wipe left ${some(strings(d.leftovers))} behind`;
    case 'apply':
      return `Applied ${strings(d.applied).length} file(s) to ${str(d.target)}${d.branch ? ` on branch ${str(d.branch)}` : ''} (${str(d.mode)})${list(d.refused).length ? `; ${list(d.refused).length} refused` : ''}`;
    case 'error':
      return `Error: ${str(d.message)}`;
    case 'log_repaired':
      return `A torn last line (${str(d.droppedBytes)} bytes, from a crash mid-write) was cut off`;
    case 'sealed':
      return `Log sealed after ${str(d.count)} records`;
    case 'note':
      return str(d.message);
    default:
      return r.type;
  }
}

/** What the run report shows from the audit log: approvals and network attempts. */
export interface AuditHighlights {
  approvals: Array<{ at: string; command: string; approved: boolean; by: string }>;
  policy?: { policy: string; allow: string[] };
  attempts: Array<{ at: string; host: string; port?: number; allowed: boolean; reason?: string }>;
}

/**
 * Approvals and network attempts from the audit log; a blocked attempt takes its reason from the
 * host's `network_blocked` run event for the same host, when there is one.
 */
export function auditHighlights(records: readonly AuditRecordView[], events: readonly RunEvent[] = []): AuditHighlights {
  const reasons = new Map<string, string>();
  for (const e of events) if (e.event.type === 'network_blocked' && e.event.reason) reasons.set(e.event.host, e.event.reason);
  const out: AuditHighlights = { approvals: [], attempts: [] };
  for (const r of records) {
    const d: Data = r.data;
    if (r.type === 'approval') out.approvals.push({ at: r.at, command: str(d.command), approved: d.approved === true, by: str(d.by) });
    if (r.type === 'network' && !d.host) out.policy = { policy: str(d.policy), allow: strings(d.allow) };
    if (r.type === 'network' && d.host) {
      const host = str(d.host);
      const reason = d.allowed ? undefined : reasons.get(host);
      out.attempts.push({ at: r.at, host, ...(num(d.port) ? { port: num(d.port) } : {}), allowed: d.allowed === true, ...(reason ? { reason } : {}) });
    }
  }
  return out;
}
