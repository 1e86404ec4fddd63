import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { auditCommand } from '../cli/commands/audit';
import { CliUsageError } from '../cli/args';
import { captureIo } from '../../test/support/cli-io';
import { newRunId } from '../../contracts/ids';
import { RunStore } from '../runs/run-store';
import { openApplyLog } from './apply-log';
import { AuditLog } from './audit-log';
import { testGit } from '../../test/support/workspace-fixtures';

let home: string;
beforeEach(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-auditcli-'));
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const { io, out, err } = captureIo({ AIRLOCK_HOME: home });
  const code = await auditCommand.run(args, io);
  return { code, out: out(), err: err() };
}

async function makeRun(): Promise<{ id: string; store: RunStore }> {
  const store = new RunStore({ git: testGit, home });
  const id = newRunId();
  const now = new Date().toISOString();
  await store.create({ id, kind: 'agent', task: 't', projectDir: '/p', agent: 'builtin', provider: 'anthropic', model: 'm', status: 'done', createdAt: now, updatedAt: now, isolation: 'container', network: 'none', sandbox: { driver: 'docker' } });
  const log = await AuditLog.open(store.paths(id).audit);
  await log.append('lifecycle', { from: null, to: 'queued' });
  await log.append('lifecycle', { from: 'queued', to: 'done' });
  await store.update(id, { audit: { count: log.count, head: log.head } });
  await log.close();
  return { id, store };
}

describe('airlock audit verify', () => {
  it('prints intact and exits 0', async () => {
    const { id } = await makeRun();
    const r = await runCli(['verify', id]);
    expect(r).toMatchObject({ code: 0 });
    expect(r.out).toContain('intact (2 records)');
    expect(r.out).toContain('no seal record');
  });

  it('prints the first broken record and exits 1', async () => {
    const { id, store } = await makeRun();
    const file = store.paths(id).audit;
    const lines = (await readFile(file, 'utf8')).split('\n');
    lines[0] = lines[0]!.replace('queued', 'running');
    await writeFile(file, lines.join('\n'));
    const r = await runCli(['verify', id]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('BROKEN at record 0: hash mismatch');
    const j = await runCli(['verify', id, '--json']);
    expect(JSON.parse(j.out)).toMatchObject({ ok: false, index: 0 });
  });

  it('catches a log cut at a record boundary through the run record anchor', async () => {
    const { id, store } = await makeRun();
    const file = store.paths(id).audit;
    const lines = (await readFile(file, 'utf8')).split('\n');
    await writeFile(file, `${lines[0]}\n`);
    const r = await runCli(['verify', id]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('truncated');
  });

  it("checks the apply log too: intact, then an edited apply record named with the apply log's file", async () => {
    const { id, store } = await makeRun();
    const paths = store.paths(id);
    await (await AuditLog.open(paths.audit)).seal();
    const log = await openApplyLog(paths.audit, paths.applyLog);
    await log.append('apply', { mode: 'working-tree', target: '/p', applied: ['a.ts'], refused: [], patchSha256: 'ab'.repeat(32) });
    await log.close();
    await store.update(id, { applyLog: { count: log.count, head: log.head } });
    const ok = await runCli(['verify', id]);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain('apply log: intact (1 record, chained from the seal)');
    await writeFile(paths.applyLog, (await readFile(paths.applyLog, 'utf8')).replace('a.ts', 'b.ts'));
    const r = await runCli(['verify', id]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('apply log of');
    expect(r.out).toContain('BROKEN at record 0: apply log record 0');
    expect(r.out).toContain(`file: ${paths.applyLog}`);
    expect(JSON.parse((await runCli(['verify', id, '--json'])).out)).toMatchObject({ ok: false, log: 'apply', file: paths.applyLog });
  });

  it('usage errors and unknown runs', async () => {
    await expect(runCli(['check'])).rejects.toBeInstanceOf(CliUsageError);
    await expect(runCli(['verify', 'nope'])).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(runCli(['verify', newRunId()])).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });
});
