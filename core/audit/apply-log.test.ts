import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openApplyLog } from './apply-log';
import { AuditLog, hashAuditRecord, verifyAuditLog } from './audit-log';
import type { AuditRecord, AuditRecordData } from './audit-records';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-applylog-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A run folder with an audit log of a few records, sealed unless told otherwise. */
async function runDir(name: string, opts: { seal?: boolean } = {}): Promise<{ audit: string; applyLog: string }> {
  const audit = path.join(dir, name, 'audit.jsonl');
  const log = await AuditLog.open(audit);
  await log.append('lifecycle', { from: null, to: 'queued' });
  await log.append('note', { message: name });
  await log.append('lifecycle', { from: 'queued', to: 'done' });
  if (opts.seal === false) await log.close();
  else await log.seal();
  return { audit, applyLog: path.join(dir, name, 'apply.jsonl') };
}

const APPLY: AuditRecordData['apply'] = {
  mode: 'working-tree',
  target: '/p',
  applied: ['src/a.ts'],
  refused: [{ path: 'src/b.ts', reason: 'changed in the project since the run started' }],
  patchSha256: 'ab'.repeat(32),
};

async function appendApplies(run: { audit: string; applyLog: string }, n = 2): Promise<{ count: number; head: string }> {
  for (let i = 0; i < n; i++) {
    const log = await openApplyLog(run.audit, run.applyLog);
    await log.append('apply', i === 0 ? APPLY : { ...APPLY, mode: 'branch', branch: 'airlock/x', refused: [] });
    await log.close();
    if (i === n - 1) return { count: log.count, head: log.head };
  }
  throw new Error('n must be > 0');
}

async function lines(file: string): Promise<string[]> {
  return (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
}

describe('apply log', () => {
  it('continues the chain from the seal; two applies verify, and the audit log stays sealed as it was', async () => {
    const run = await runDir('a');
    const auditBefore = await readFile(run.audit, 'utf8');
    const anchor = await appendApplies(run);
    expect(anchor.count).toBe(2);
    const seal = JSON.parse((await lines(run.audit))[3]!) as AuditRecord;
    const recs = (await lines(run.applyLog)).map((l) => JSON.parse(l) as AuditRecord<'apply'>);
    expect(recs.map((r) => r.seq)).toEqual([seal.seq + 1, seal.seq + 2]);
    expect(recs[0]!.prev).toBe(seal.hash);
    expect(recs[0]!.data).toEqual(APPLY);
    expect(recs[1]!.data).toMatchObject({ mode: 'branch', branch: 'airlock/x' });
    expect(await readFile(run.audit, 'utf8')).toBe(auditBefore);
    expect(await verifyAuditLog(run.audit, { sealed: true, applyLog: run.applyLog, applyAnchor: anchor })).toEqual({ ok: true, count: 4, head: seal.hash, sealed: true, applies: 2 });
  });

  it('verifies without `applies` when the run has no apply log', async () => {
    const run = await runDir('a');
    expect(await verifyAuditLog(run.audit, { applyLog: run.applyLog })).toEqual({ ok: true, count: 4, head: expect.any(String), sealed: true });
  });

  it('fails on an edited apply record, naming it', async () => {
    const run = await runDir('a');
    await appendApplies(run);
    const ls = await lines(run.applyLog);
    ls[1] = ls[1]!.replace('airlock/x', 'airlock/y');
    await writeFile(run.applyLog, ls.map((l) => `${l}\n`).join(''));
    const result = await verifyAuditLog(run.audit, { applyLog: run.applyLog });
    expect(result).toEqual({ ok: false, index: 1, log: 'apply', reason: expect.stringContaining('apply log record 1 (seq 5): hash mismatch') });
    await expect(openApplyLog(run.audit, run.applyLog)).rejects.toMatchObject({ kind: 'CONFLICT' });
  });

  it("fails on an apply log anchored to another run's seal, and will not append to it", async () => {
    const a = await runDir('a');
    const b = await runDir('b');
    await appendApplies(b);
    await writeFile(a.applyLog, await readFile(b.applyLog));
    const result = await verifyAuditLog(a.audit, { applyLog: a.applyLog });
    expect(result).toMatchObject({ ok: false, index: 0, log: 'apply', reason: expect.stringContaining("not anchored to this run's seal") });
    await expect(openApplyLog(a.audit, a.applyLog)).rejects.toMatchObject({ kind: 'CONFLICT' });
  });

  it('fails on a re-anchored log: records rehashed onto a made-up prev', async () => {
    const run = await runDir('a');
    const seal = JSON.parse((await lines(run.audit))[3]!) as AuditRecord;
    const body = { seq: seal.seq + 1, ts: new Date().toISOString(), type: 'apply' as const, data: APPLY, prev: 'cd'.repeat(32) };
    await writeFile(run.applyLog, `${JSON.stringify({ ...body, hash: hashAuditRecord(body) })}\n`);
    expect(await verifyAuditLog(run.audit, { applyLog: run.applyLog })).toMatchObject({ ok: false, log: 'apply', reason: expect.stringContaining('not anchored') });
  });

  it('fails on a record that is not an apply (a forged seal, say), even when correctly chained', async () => {
    const run = await runDir('a');
    const seal = JSON.parse((await lines(run.audit))[3]!) as AuditRecord;
    const body = { seq: seal.seq + 1, ts: new Date().toISOString(), type: 'sealed' as const, data: { count: 5 }, prev: seal.hash };
    await writeFile(run.applyLog, `${JSON.stringify({ ...body, hash: hashAuditRecord(body) })}\n`);
    expect(await verifyAuditLog(run.audit, { applyLog: run.applyLog })).toMatchObject({ ok: false, index: 0, log: 'apply', reason: expect.stringContaining("'sealed' record does not belong") });
  });

  it('catches a truncated apply log: torn, cut at a record boundary, or deleted', async () => {
    const run = await runDir('a');
    const anchor = await appendApplies(run);
    const ls = await lines(run.applyLog);
    await writeFile(run.applyLog, `${ls[0]}\n${ls[1]!.slice(0, 40)}`);
    expect(await verifyAuditLog(run.audit, { applyLog: run.applyLog, applyAnchor: anchor })).toMatchObject({ ok: false, index: 1, log: 'apply', reason: expect.stringContaining('torn last line') });
    await writeFile(run.applyLog, `${ls[0]}\n`);
    expect(await verifyAuditLog(run.audit, { applyLog: run.applyLog, applyAnchor: anchor })).toMatchObject({ ok: false, index: 1, log: 'apply', reason: expect.stringContaining('apply log truncated') });
    await rm(run.applyLog);
    expect(await verifyAuditLog(run.audit, { applyLog: run.applyLog, applyAnchor: anchor })).toMatchObject({ ok: false, log: 'apply', reason: expect.stringContaining('does not exist') });
  });

  it('refuses to open when the audit log is not sealed, and an apply log next to an unsealed audit log fails verification', async () => {
    const a = await runDir('a', { seal: false });
    await expect(openApplyLog(a.audit, a.applyLog)).rejects.toMatchObject({ kind: 'CONFLICT', message: expect.stringContaining('not intact and sealed') });
    const b = await runDir('b');
    await appendApplies(b);
    await writeFile(a.applyLog, await readFile(b.applyLog));
    expect(await verifyAuditLog(a.audit, { applyLog: a.applyLog })).toMatchObject({ ok: false, index: 0, log: 'apply', reason: expect.stringContaining('no seal record') });
  });
});
