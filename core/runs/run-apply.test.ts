import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AuditLog, verifyAuditLog } from '../audit/audit-log';
import { sha256Hex } from '../common/sha256';
import type { AuditRecord, AuditRecordData } from '../audit/audit-records';
import { cleanupTemps, collectLocal, fingerprint, git, gitRepo, localSandbox, tempDir, testGit } from '../../test/support/workspace-fixtures';
import { applyRunResult, loadLegacyResult, loadRunResult, resultPaths, storeRunResult, writeRecordedPatch } from './run-apply';
import { openApplyLog } from '../audit/apply-log';
import { newRunId } from '../../contracts/ids';
import { RunStore } from './run-store';
import { toRunRecordView, toRunSummary } from './run-record';

afterAll(cleanupTemps);

let home: string;
beforeEach(() => {
  home = tempDir('airlock-runapply-');
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

const PROJECT = { 'src/a.ts': 'export const a = 1;\n', 'src/b.ts': 'export const b = 1;\n' };

/** A finished run on a real git project: result collected from a local sandbox, audit log sealed unless told otherwise. */
async function finishedRun(opts: { seal?: boolean } = {}) {
  const projectDir = gitRepo(PROJECT);
  const store = new RunStore({ git: testGit, home });
  const id = newRunId();
  const now = new Date().toISOString();
  const run = await store.create({ id, kind: 'agent', task: 't', projectDir, agent: 'builtin', provider: 'anthropic', model: 'm', status: 'done', createdAt: now, updatedAt: now, isolation: 'container', network: 'none', sandbox: { driver: 'docker' } });
  const paths = store.paths(id);
  const sb = await localSandbox(projectDir, undefined, resultPaths(store, id).objects);
  await writeFile(sb.at('src/a.ts'), 'export const a = 2;\n');
  await writeFile(sb.at('src/b.ts'), 'export const b = 2;\n');
  const collected = await collectLocal(sb);
  await storeRunResult(store, id, collected);
  const result = { patch: collected.patch, reviewedSha256: collected.result.patchSha256 };
  const log = await AuditLog.open(paths.audit);
  await log.append('lifecycle', { from: null, to: 'done' });
  if (opts.seal === false) await log.close();
  else await log.seal();
  await store.update(id, { audit: { count: log.count, head: log.head } });
  return { store, run, projectDir, patch: result.patch, reviewedSha256: result.reviewedSha256 };
}

async function applyRecords(file: string): Promise<AuditRecord<'apply'>[]> {
  return (await readFile(file, 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditRecord<'apply'>);
}

describe('applyRunResult', () => {
  it('records each apply in the apply log, anchored in run.json, with applied and refused files and the patch digest', async () => {
    const { store, run, projectDir, patch, reviewedSha256 } = await finishedRun();
    // The run keeps only the blobs apply needs (base and result of a.ts and b.ts), not the project.
    expect(git(home, ['--git-dir', resultPaths(store, run.id).objects, 'count-objects', '-v'])).toMatch(/^in-pack: 4$/m);
    // The user edits b.ts in an overlapping way: it is refused, a.ts is applied.
    await writeFile(path.join(projectDir, 'src/b.ts'), 'export const b = 3;\n');
    // Whole or nothing by default: nothing written, a.ts held back.
    const refused = await applyRunResult({ store, run, mode: 'working-tree', reviewedSha256 });
    expect(refused).toMatchObject({ applied: [], held: ['src/a.ts'], conflicts: [{ path: 'src/b.ts' }] });
    expect((await store.get(run.id)).applied).toBeUndefined();
    const first = await applyRunResult({ store, run, mode: 'working-tree', reviewedSha256, skipConflicts: true });
    expect(first.applied).toEqual(['src/a.ts']);
    expect(first.conflicts.map((c) => c.path)).toEqual(['src/b.ts']);
    const second = await applyRunResult({ store, run, mode: 'branch', branch: 'airlock/t', files: ['src/a.ts'], reviewedSha256 });
    // The branch commit's message defaults to the run's task.
    expect(git(projectDir, ['log', '-1', '--format=%s', 'airlock/t']).trim()).toBe('t');
    const third = await applyRunResult({ store, run, mode: 'branch', branch: 'airlock/t2', files: ['src/a.ts'], message: 'My own words', reviewedSha256 });
    expect(git(projectDir, ['log', '-1', '--format=%s', third.commit!]).trim()).toBe('My own words');

    const paths = store.paths(run.id);
    const recs = await applyRecords(paths.applyLog);
    expect(recs.map((r) => r.type)).toEqual(['apply', 'apply', 'apply', 'apply']);
    expect(recs.shift()!.data).toMatchObject({ applied: [], held: ['src/a.ts'] });
    expect(recs[0]!.data).toEqual({
      mode: 'working-tree',
      target: projectDir,
      applied: ['src/a.ts'],
      refused: [{ path: 'src/b.ts', reason: first.conflicts[0]!.reason }],
      patchSha256: sha256Hex(patch),
    });
    expect(recs[1]!.data).toMatchObject({ mode: 'branch', branch: 'airlock/t', applied: ['src/a.ts'], commit: second.commit });
    expect(recs[1]!.data.patchSha256).not.toBe(sha256Hex(patch)); // only a.ts's part
    const record = await store.get(run.id);
    expect(record.applyLog).toEqual({ count: 4, head: recs[2]!.hash });
    // History and Review read where the run was applied (the latest apply) from its summary.
    expect(toRunSummary(record).applied).toMatchObject({ target: projectDir, branch: 'airlock/t2', files: ['src/a.ts'] });
    expect(toRunRecordView(record).applied?.branch).toBe('airlock/t2');
    expect(await verifyAuditLog(paths.audit, { sealed: true, applyLog: paths.applyLog, applyAnchor: record.applyLog! })).toMatchObject({ ok: true, sealed: true, applies: 4 });
  });

  it('refuses, before touching the project, a run whose audit log is not sealed', async () => {
    const { store, run, projectDir, reviewedSha256 } = await finishedRun({ seal: false });
    const before = fingerprint(projectDir);
    await expect(applyRunResult({ store, run, mode: 'working-tree', reviewedSha256 })).rejects.toMatchObject({ kind: 'CONFLICT', message: expect.stringContaining('not intact and sealed') });
    expect(fingerprint(projectDir)).toBe(before);
    expect((await store.get(run.id)).applied).toBeUndefined();
  });
});

describe('a run collected by an older Airlock', () => {
  it('is never applied (its result was not derived on the host), but its whole patch can still be exported', async () => {
    const store = new RunStore({ git: testGit, home });
    const id = newRunId();
    const now = new Date().toISOString();
    const projectDir = gitRepo(PROJECT);
    const run = await store.create({ id, kind: 'agent', task: 't', projectDir, agent: 'builtin', provider: 'anthropic', model: 'm', status: 'done', createdAt: now, updatedAt: now, isolation: 'container', network: 'none', sandbox: { driver: 'docker' } });
    const paths = store.paths(id);
    await mkdir(paths.artifacts, { recursive: true });
    const legacyPatch = Buffer.from('diff --git a/src/a.ts b/src/a.ts\n--- a/src/a.ts\n+++ b/src/a.ts\n@@ -1 +1 @@\n-export const a = 1;\n+export const a = 9;\n');
    await writeFile(paths.patch, legacyPatch);
    await writeFile(path.join(paths.artifacts, 'baseline.json'), '{"commit":"x","files":[]}');
    await writeFile(path.join(paths.artifacts, 'changes.json'), JSON.stringify([{ path: 'src/a.ts', status: 'modified' }]));
    const log = await AuditLog.open(paths.audit);
    await log.seal();
    await store.update(id, { audit: { count: log.count, head: log.head } });
    const before = fingerprint(projectDir);
    await expect(applyRunResult({ store, run, mode: 'working-tree', reviewedSha256: sha256Hex(legacyPatch) })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('older Airlock') });
    expect(fingerprint(projectDir)).toBe(before);
    const dest = path.join(home, 'legacy.patch');
    await writeRecordedPatch({ store, runId: id, dest });
    expect((await readFile(dest)).equals(legacyPatch)).toBe(true);
  });
});

describe('writeRecordedPatch', () => {
  it('writes the patch and records it as a patch-mode apply', async () => {
    const { store, run, patch } = await finishedRun();
    const dest = path.join(os.tmpdir(), `airlock-runapply-${run.id}.patch`);
    try {
      await writeRecordedPatch({ store, runId: run.id, dest });
      expect((await readFile(dest)).equals(patch)).toBe(true);
      const [rec] = await applyRecords(store.paths(run.id).applyLog);
      expect(rec!.data).toEqual({ mode: 'patch', target: dest, applied: ['src/a.ts', 'src/b.ts'], refused: [], patchSha256: sha256Hex(patch) });
    } finally {
      await rm(dest, { force: true });
    }
  });

  it('refuses, without writing, when the audit log is not sealed', async () => {
    const { store, run } = await finishedRun({ seal: false });
    const dest = path.join(home, 'out.patch');
    await expect(writeRecordedPatch({ store, runId: run.id, dest })).rejects.toMatchObject({ kind: 'CONFLICT' });
    await expect(readFile(dest)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('a damaged result.json (what apply trusts)', () => {
  it('is refused naming the file and the field, before anything is applied; a missing one is still "no result"', async () => {
    const { store, run, projectDir, reviewedSha256 } = await finishedRun();
    const file = resultPaths(store, run.id).result;
    const good = JSON.parse(await readFile(file, 'utf8')) as { changes: Array<{ section: { sha256: string } }> };
    expect((await loadRunResult(store, run.id)).result.changes).toHaveLength(2);
    const before = fingerprint(projectDir);

    (good.changes[1] as { section: unknown }).section = { offset: 0, length: -4, sha256: 'x' };
    await writeFile(file, JSON.stringify(good));
    await expect(loadRunResult(store, run.id)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${file} is damaged: field changes.1.section.length:`) });
    await expect(applyRunResult({ store, run, reviewedSha256, mode: 'working-tree' })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(file) });
    expect(fingerprint(projectDir)).toEqual(before);

    await writeFile(file, '{"version": 2, "changes": [');
    await expect(loadRunResult(store, run.id)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringMatching(/is damaged: not valid JSON.*airlock patch/) });

    await rm(file);
    await expect(loadRunResult(store, run.id)).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });
});

describe('stored files apply reads back', () => {
  it('refuses to apply when the apply log holds an apply record that is not one, naming the log, the line and the field', async () => {
    const { store, run, projectDir, reviewedSha256 } = await finishedRun();
    const paths = store.paths(run.id);
    // Chained and hashed like any record (so the chain verifies), but a resolution without its digest.
    const log = await openApplyLog(paths.audit, paths.applyLog);
    await log.append('apply', { mode: 'resolve', scope: 'turn', target: projectDir, applied: ['src/a.ts'], refused: [], patchSha256: 'ab'.repeat(32), resolved: { path: 'src/a.ts' } } as unknown as AuditRecordData['apply']);
    await log.close();
    const before = fingerprint(projectDir);
    await expect(applyRunResult({ store, run, mode: 'working-tree', reviewedSha256 })).rejects.toMatchObject({
      kind: 'INVALID_INPUT',
      message: expect.stringContaining(`${paths.applyLog} is damaged: line 1, data, field resolved.replacedSha256`),
    });
    expect(fingerprint(projectDir)).toBe(before);
  });

  it("names a legacy run's damaged change list instead of showing no changes", async () => {
    const store = new RunStore({ git: testGit, home });
    const id = newRunId();
    const now = new Date().toISOString();
    await store.create({ id, kind: 'agent', task: 't', projectDir: gitRepo(PROJECT), agent: 'builtin', provider: 'anthropic', model: 'm', status: 'done', createdAt: now, updatedAt: now, isolation: 'container', network: 'none', sandbox: { driver: 'docker' } });
    const paths = store.paths(id);
    await mkdir(paths.artifacts, { recursive: true });
    await writeFile(paths.patch, 'diff --git a/x b/x\n');
    await writeFile(path.join(paths.artifacts, 'baseline.json'), '{}');
    const file = path.join(paths.artifacts, 'changes.json');
    await writeFile(file, JSON.stringify([{ path: 'src/a.ts', status: 'changed' }]));
    await expect(loadLegacyResult(store, id)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${file} is damaged: field 0.status`) });
    await writeFile(file, '[{"path": "src/a.ts"');
    await expect(loadLegacyResult(store, id)).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining(`${file} is damaged: not valid JSON`) });
  });
});
