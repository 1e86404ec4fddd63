import { describe, expect, it } from 'vitest';
import type { AuditRecordView, RunEvent } from '../../../contracts';
import { auditHighlights, describeAuditRecord } from './audit-summary';

const rec = (index: number, type: string, data: Record<string, unknown>): AuditRecordView => ({ index, at: `2026-11-30T23:00:0${index}Z`, type, data, hash: 'h'.repeat(64) });

describe('audit records in words', () => {
  it('says what each record means', () => {
    expect(describeAuditRecord(rec(0, 'wipe', { removed: ['container abc', 'volume def'], leftovers: [], verified: true }))).toBe('Sandbox wiped and verified gone: container abc, volume def');
    expect(describeAuditRecord(rec(1, 'wipe', { removed: [], leftovers: ['volume x'], verified: false }))).toBe('Sandbox wipe left volume x behind');
    expect(describeAuditRecord(rec(2, 'approval', { command: 'rm -rf build', approved: false, by: 'user' }))).toBe('Denied (user): `rm -rf build`');
    expect(describeAuditRecord(rec(3, 'network', { policy: 'allowlist', host: 'evil.test', port: 443, allowed: false }))).toBe('Blocked a connection to evil.test:443');
    expect(describeAuditRecord(rec(4, 'network', { policy: 'allowlist', allow: ['registry.npmjs.org'] }))).toBe('Network policy: allowlist (registry.npmjs.org)');
    expect(describeAuditRecord(rec(5, 'lifecycle', { from: 'running', to: 'failed', reason: 'budget' }))).toBe('running → failed (budget)');
    expect(describeAuditRecord(rec(6, 'model_call', { provider: 'anthropic', model: 'm', status: 200, inputTokens: 10, outputTokens: 5, costUsd: 0.001 }))).toBe('Model call anthropic/m: HTTP 200, 10 in / 5 out tokens, $0.0010');
    expect(describeAuditRecord(rec(7, 'excluded_files', { files: [{ path: '.env', reason: 'env' }] }))).toBe('Left out of the copy: .env');
    expect(describeAuditRecord(rec(8, 'something_new', {}))).toBe('something_new');
  });

  it('picks approvals and network attempts, with a blocked host\'s reason from the host\'s event', () => {
    const events: RunEvent[] = [{ runId: 'r-1', seq: 3, at: 'x', event: { type: 'network_blocked', host: 'evil.test', port: 443, method: 'CONNECT', reason: 'not on the allow-list' } }];
    const h = auditHighlights([
      rec(0, 'network', { policy: 'allowlist', allow: ['ok.test'] }),
      rec(1, 'approval', { command: 'ls', approved: true, by: 'user' }),
      rec(2, 'network', { policy: 'allowlist', host: 'ok.test', port: 443, allowed: true }),
      rec(3, 'network', { policy: 'allowlist', host: 'evil.test', port: 443, allowed: false }),
    ], events);
    expect(h.policy).toEqual({ policy: 'allowlist', allow: ['ok.test'] });
    expect(h.approvals).toEqual([{ at: '2026-11-30T23:00:01Z', command: 'ls', approved: true, by: 'user' }]);
    expect(h.attempts).toEqual([
      { at: '2026-11-30T23:00:02Z', host: 'ok.test', port: 443, allowed: true },
      { at: '2026-11-30T23:00:03Z', host: 'evil.test', port: 443, allowed: false, reason: 'not on the allow-list' },
    ]);
  });
});
