import { appendFile, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog, verifyAuditLog } from './audit-log';
import { GENESIS_HASH } from './audit-records';
import { canonicalJson } from './canonical-json';

let dir: string;
let file: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-audit-'));
  file = path.join(dir, 'audit.jsonl');
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function writeSample(n = 5): Promise<void> {
  const log = await AuditLog.open(file);
  await log.append('lifecycle', { from: null, to: 'queued' });
  for (let i = 1; i < n; i++) {
    await log.append('command', {
      id: `c${i}`, command: `echo ${i}`, cwd: '/workspace', exitCode: 0, durationMs: i, timedOut: false, outputBytes: 2, outputSha256: 'ab'.repeat(32),
    });
  }
  await log.close();
}

async function lines(): Promise<string[]> {
  return (await readFile(file, 'utf8')).split('\n').filter((l) => l !== '');
}

async function writeLines(ls: string[]): Promise<void> {
  await writeFile(file, ls.map((l) => `${l}\n`).join(''));
}

describe('canonicalJson', () => {
  it('sorts keys at every depth and drops undefined members', () => {
    expect(canonicalJson({ b: 1, a: { d: [1, { z: 1, y: 2 }], c: undefined } })).toBe('{"a":{"d":[1,{"y":2,"z":1}]},"b":1}');
  });
});

describe('AuditLog', () => {
  it('chains records from the genesis hash and verifies intact', async () => {
    await writeSample(5);
    const recs = (await lines()).map((l) => JSON.parse(l));
    expect(recs).toHaveLength(5);
    expect(recs[0].prev).toBe(GENESIS_HASH);
    for (let i = 1; i < recs.length; i++) expect(recs[i].prev).toBe(recs[i - 1].hash);
    expect(recs.map((r) => r.seq)).toEqual([0, 1, 2, 3, 4]);
    expect(await verifyAuditLog(file)).toEqual({ ok: true, count: 5, head: recs[4].hash, sealed: false });
  });

  it('resumes the chain of an existing file', async () => {
    await writeSample(3);
    const log = await AuditLog.open(file);
    expect(log.count).toBe(3);
    const rec = await log.append('note', { message: 'resumed' });
    expect(rec.seq).toBe(3);
    await log.seal();
    const result = await verifyAuditLog(file, { sealed: true });
    expect(result).toMatchObject({ ok: true, count: 5, sealed: true });
  });

  it('serialises concurrent appends', async () => {
    const log = await AuditLog.open(file);
    await Promise.all(Array.from({ length: 50 }, (_, i) => log.append('note', { message: `n${i}` })));
    await log.close();
    expect(await verifyAuditLog(file)).toMatchObject({ ok: true, count: 50 });
    const msgs = (await lines()).map((l) => JSON.parse(l).data.message);
    expect(msgs).toEqual(Array.from({ length: 50 }, (_, i) => `n${i}`));
  });

  it('catches an edited record', async () => {
    await writeSample(5);
    const ls = await lines();
    const rec = JSON.parse(ls[2]!);
    rec.data.exitCode = 1;
    ls[2] = JSON.stringify(rec);
    await writeLines(ls);
    expect(await verifyAuditLog(file)).toEqual({ ok: false, index: 2, reason: expect.stringContaining('hash mismatch') });
  });

  it('catches an edited record whose hash was recomputed (the chain breaks at the next one)', async () => {
    await writeSample(5);
    const ls = await lines();
    const { hashAuditRecord } = await import('./audit-log');
    const rec = JSON.parse(ls[2]!);
    rec.data.command = 'rm -rf /';
    rec.hash = hashAuditRecord(rec);
    ls[2] = JSON.stringify(rec);
    await writeLines(ls);
    expect(await verifyAuditLog(file)).toEqual({ ok: false, index: 3, reason: expect.stringContaining('chain broken') });
  });

  it('catches a deleted record', async () => {
    await writeSample(5);
    const ls = await lines();
    ls.splice(1, 1);
    await writeLines(ls);
    expect(await verifyAuditLog(file)).toEqual({ ok: false, index: 1, reason: expect.stringContaining('sequence broken') });
  });

  it('catches reordered records', async () => {
    await writeSample(5);
    const ls = await lines();
    [ls[2], ls[3]] = [ls[3]!, ls[2]!];
    await writeLines(ls);
    expect(await verifyAuditLog(file)).toMatchObject({ ok: false, index: 2 });
  });

  it('catches truncation mid-record (torn last line)', async () => {
    await writeSample(5);
    const size = (await readFile(file)).length;
    await truncate(file, size - 10);
    expect(await verifyAuditLog(file)).toEqual({ ok: false, index: 4, reason: expect.stringContaining('torn last line') });
  });

  it('catches truncation at a record boundary against the seal and the run record anchor', async () => {
    const log = await AuditLog.open(file);
    await log.append('lifecycle', { from: null, to: 'queued' });
    await log.append('lifecycle', { from: 'queued', to: 'done' });
    const sealed = await log.seal();
    const ls = await lines();
    await writeLines(ls.slice(0, 2));
    expect(await verifyAuditLog(file, { sealed: true })).toEqual({ ok: false, index: 2, reason: expect.stringContaining('without its seal') });
    expect(await verifyAuditLog(file, { head: sealed.hash })).toMatchObject({ ok: false, reason: expect.stringContaining('head mismatch') });
    expect(await verifyAuditLog(file, { minCount: 3 })).toMatchObject({ ok: false, index: 2, reason: expect.stringContaining('truncated') });
  });

  it('catches records appended after the seal', async () => {
    const log = await AuditLog.open(file);
    await log.append('note', { message: 'a' });
    await log.seal();
    await expect(AuditLog.open(file).then((l) => l.append('note', { message: 'late' }))).rejects.toThrow(/sealed/);
  });

  it('catches a forged record appended after the seal by hand', async () => {
    const log = await AuditLog.open(file);
    await log.append('note', { message: 'a' });
    const sealed = await log.seal();
    const { hashAuditRecord } = await import('./audit-log');
    const body = { seq: 2, ts: new Date().toISOString(), type: 'note', data: { message: 'forged' }, prev: sealed.hash };
    await appendFile(file, `${JSON.stringify({ ...body, hash: hashAuditRecord(body as never) })}\n`);
    expect(await verifyAuditLog(file)).toMatchObject({ ok: false, index: 2, reason: expect.stringContaining('after the seal') });
  });

  it('repairs a torn last line on open and records the repair', async () => {
    await writeSample(3);
    await appendFile(file, '{"seq":3,"ts":"2026-');
    const log = await AuditLog.open(file);
    expect(log.count).toBe(4);
    await log.append('note', { message: 'after crash' });
    await log.close();
    const recs = (await lines()).map((l) => JSON.parse(l));
    expect(recs[3].type).toBe('log_repaired');
    expect(recs[3].data.droppedBytes).toBe(20);
    expect(await verifyAuditLog(file)).toMatchObject({ ok: true, count: 5 });
  });

  it('refuses to append to a log broken in the middle', async () => {
    await writeSample(4);
    const ls = await lines();
    ls.splice(1, 1);
    await writeLines(ls);
    await expect(AuditLog.open(file)).rejects.toMatchObject({ kind: 'CONFLICT' });
  });

  it('redacts configured secrets before hashing', async () => {
    const token = 'tok_' + 'f'.repeat(40);
    const log = await AuditLog.open(file, { secrets: [token] });
    await log.append('note', { message: `leaked ${token}`, nested: { argv: ['curl', `-H`, `x-api-key: ${token}`] } });
    await log.close();
    const text = await readFile(file, 'utf8');
    expect(text).not.toContain(token);
    expect(text).toContain('[REDACTED]');
    expect(await verifyAuditLog(file)).toMatchObject({ ok: true, count: 1 });
  });

  it('reports a missing file', async () => {
    expect(await verifyAuditLog(path.join(dir, 'nope.jsonl'))).toMatchObject({ ok: false, reason: expect.stringContaining('does not exist') });
  });
});
