import { appendFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openApplyLog } from './apply-log';
import { AuditLog, hashAuditRecord, verifyAuditLog } from './audit-log';
import { readRunLogs } from './audit-reader';
import type { AuditRecord } from './audit-records';

let dir: string;
let audit: string;
let applyLog: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-auditschema-'));
  audit = path.join(dir, 'audit.jsonl');
  applyLog = path.join(dir, 'apply.jsonl');
  const log = await AuditLog.open(audit);
  await log.append('lifecycle', { from: null, to: 'queued' });
  await log.append('note', { message: 'hello' });
  await log.seal();
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function lines(file: string): Promise<string[]> {
  return (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
}

describe('stored audit records', () => {
  it('reads both logs with their schema: a record that is not one is an error naming the log, the line and the field', async () => {
    const ls = await lines(audit);
    const second = JSON.parse(ls[1]!) as Record<string, unknown>;
    delete second.seq;
    ls[1] = JSON.stringify(second);
    await writeFile(audit, `${ls.join('\n')}\n`);
    await expect(readRunLogs({ audit, applyLog }, 0, 100)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${audit} is damaged: line 2, field seq:`) });
    // The verifier names the field too, at the same record.
    expect(await verifyAuditLog(audit)).toEqual({ ok: false, index: 1, reason: expect.stringContaining('not an audit record: field seq') });

    ls[1] = '{"seq": 1, "ts": "x", "type": "note", "data": "a string", "prev": "", "hash": ""}';
    await writeFile(audit, `${ls.join('\n')}\n`);
    await expect(readRunLogs({ audit, applyLog }, 0, 100)).rejects.toMatchObject({ message: expect.stringContaining('line 2, field data:') });
    ls[1] = 'not json';
    await writeFile(audit, `${ls.join('\n')}\n`);
    await expect(readRunLogs({ audit, applyLog }, 0, 100)).rejects.toMatchObject({ message: expect.stringContaining(`${audit} is damaged: line 2 is not valid JSON`) });
  });

  it('leaves out a torn last line (a crash mid-write) in each log, which verify still reports', async () => {
    const apply = await openApplyLog(audit, applyLog);
    await apply.append('apply', { mode: 'patch', target: 'download', applied: ['a'], refused: [], patchSha256: 'ab'.repeat(32) });
    await apply.close();
    await appendFile(audit, '{"seq": 3, "ts"');
    await appendFile(applyLog, '{"seq":');
    const page = await readRunLogs({ audit, applyLog }, 0, 100);
    expect(page.records.map((r) => r.type)).toEqual(['lifecycle', 'note', 'sealed', 'apply']);
    expect(page.total).toBe(4);
    expect(page.records[3]!.index).toBe(3);
    expect(await verifyAuditLog(audit)).toMatchObject({ ok: false, reason: expect.stringContaining('torn last line') });
  });

  it('still catches tampering: a record altered into another schema-valid record breaks the chain', async () => {
    const ls = await lines(audit);
    const rec = JSON.parse(ls[1]!) as AuditRecord<'note'>;
    ls[1] = JSON.stringify({ ...rec, data: { message: 'something else' } });
    await writeFile(audit, `${ls.join('\n')}\n`);
    // The reader shows it (it is a record) …
    expect((await readRunLogs({ audit, applyLog }, 0, 100)).records[1]!.data).toEqual({ message: 'something else' });
    // … the verifier does not accept it, re-hashed or not.
    expect(await verifyAuditLog(audit)).toEqual({ ok: false, index: 1, reason: expect.stringContaining('hash mismatch') });
    const rehashed = { ...rec, data: { message: 'something else' } };
    ls[1] = JSON.stringify({ ...rehashed, hash: hashAuditRecord(rehashed) });
    await writeFile(audit, `${ls.join('\n')}\n`);
    expect(await verifyAuditLog(audit)).toEqual({ ok: false, index: 2, reason: expect.stringContaining('chain broken') });
  });
});
