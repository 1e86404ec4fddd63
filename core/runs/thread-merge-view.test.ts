import { createHash } from 'node:crypto';
import { readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { newRunId } from '../../contracts/ids';
import { cleanupTemps, collectLocal, gitRepo, tempDir, type LocalSandbox, testGit } from '../../test/support/workspace-fixtures';
import { AuditLog } from '../audit/audit-log';
import type { AuditRecord } from '../audit/audit-records';
import { hydrate } from '../workspace/hydrate';
import { HostRepo } from '../workspace/host-repo';
import { LocalShell, localLayout } from '../workspace/local-shell';
import { overlaySnapshot } from '../workspace/overlay-snapshot';
import { snapshotProject } from '../workspace/snapshot';
import { collectThreadResult, overlayOf } from '../workspace/thread-result';
import { applyRunResult, loadRunResult, mergeViewOfRun, resolveRunConflict, resultPaths, storeRunResult } from './run-apply';
import type { StoredRun } from './run-record';
import { RunStore } from './run-store';

/*
 * The merge view of a follow-up turn with scope 'thread' (docs/architecture.md §11 "Resolving a
 * conflict in place", §15): base and result are the thread's, from the run's own host store.
 */

afterAll(cleanupTemps);

let home: string;
beforeEach(() => {
  home = tempDir('airlock-threadmerge-');
});
afterEach(async () => {
  await rm(home, { recursive: true, force: true });
});

const BASE = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n';
const TURN1 = BASE.replace('two\n', 'two (turn 1)\n');
const TURN2 = TURN1.replace('eight\n', 'eight (turn 2)\n');
const MINE = BASE.replace('two\n', 'two (mine)\n');
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

/** A run record, its sandbox hydrated from `snapshot` into the run's own object store, sealed once collected. */
async function turn(store: RunStore, projectDir: string, thread: StoredRun['thread'] | undefined, overlay: Awaited<ReturnType<typeof overlayOf>> | undefined, edit: (sb: LocalSandbox) => Promise<void>) {
  const id = newRunId();
  const now = new Date().toISOString();
  await store.create({ id, kind: 'agent', task: `turn ${thread?.turn ?? 1}`, projectDir, agent: 'builtin', provider: 'anthropic', model: 'm', status: 'done', createdAt: now, updatedAt: now, isolation: 'container', network: 'none', sandbox: { driver: 'docker' }, ...(thread ? { thread } : {}) });
  const shell = new LocalShell(process.env);
  const layout = await localLayout(tempDir('airlock-sbx-'));
  const read = await snapshotProject(testGit, projectDir);
  // A follow-up starts from the previous result laid over the project, as hydrateStep does.
  const snapshot = overlay ? overlaySnapshot(read, overlay) : read;
  const repo = await HostRepo.create(testGit, resultPaths(store, id).objects);
  const hydrated = await hydrate(shell, snapshot, { layout, hostRepo: repo });
  const sb: LocalSandbox = { shell, layout, snapshot, hydrated, repo, at: (rel) => path.join(layout.workDir, rel) };
  await edit(sb);
  return { id, sb };
}

async function seal(store: RunStore, id: string): Promise<void> {
  const log = await AuditLog.open(store.paths(id).audit);
  await log.append('lifecycle', { from: null, to: 'done' });
  await log.seal();
  await store.update(id, { audit: { count: log.count, head: log.head } });
}

/** A 2-turn thread on a project whose c.txt the user then changes where turn 1 did. */
async function twoTurnThread() {
  const projectDir = gitRepo({ 'c.txt': BASE });
  const store = new RunStore({ git: testGit, home });
  const first = await turn(store, projectDir, undefined, undefined, (sb) => writeFile(sb.at('c.txt'), TURN1));
  const c1 = await collectLocal(first.sb);
  await storeRunResult(store, first.id, c1);
  await seal(store, first.id);

  const previous = await loadRunResult(store, first.id, 'thread');
  const second = await turn(store, projectDir, { rootRunId: first.id, parentRunId: first.id, turn: 2, conversation: 'fresh' }, await overlayOf(previous), async (sb) => {
    // The sandbox starts from turn 1's result.
    expect(await readFile(sb.at('c.txt'), 'utf8')).toBe(TURN1);
    await writeFile(sb.at('c.txt'), TURN2);
  });
  const c2 = await collectLocal(second.sb);
  const total = await collectThreadResult(second.sb.repo, c2.result, previous);
  await storeRunResult(store, second.id, c2, total);
  await seal(store, second.id);
  await writeFile(path.join(projectDir, 'c.txt'), MINE);
  return { projectDir, store, run: await store.get(second.id), total };
}

async function applyRecords(file: string): Promise<AuditRecord<'apply'>[]> {
  return (await readFile(file, 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as AuditRecord<'apply'>);
}

describe('merge view with scope thread', () => {
  it("shows the thread's base and total, refuses a save after the file changed or against another scope's view, and logs the scope", async () => {
    const { projectDir, store, run, total } = await twoTurnThread();
    const file = path.join(projectDir, 'c.txt');
    // The whole thread does not apply: the user changed line two, which turn 1 changed too.
    const applied = await applyRunResult({ store, run, scope: 'thread', mode: 'working-tree', reviewedSha256: total.result.patchSha256 });
    expect(applied.conflicts.map((c) => c.path)).toEqual(['c.txt']);

    const view = await mergeViewOfRun({ store, run, path: 'c.txt', scope: 'thread' });
    expect(view.scope).toBe('thread');
    // Base: the file as the thread's first turn read it; theirs: the total of both turns.
    expect(view.base).toBe(BASE);
    expect(view.theirs).toBe(TURN2);
    expect(view.ours).toBe(MINE);
    expect([view.baseSha256, view.theirsSha256, view.oursSha256]).toEqual([sha(BASE), sha(TURN2), sha(MINE)]);
    expect(view.regions).toEqual([
      { kind: 'clean', text: 'one\n' },
      { kind: 'conflict', ours: 'two (mine)\n', base: 'two\n', theirs: 'two (turn 1)\n' },
      { kind: 'clean', text: 'three\nfour\nfive\nsix\nseven\neight (turn 2)\n' },
    ]);
    // The same file per turn: base is turn 1's result, and the user's edit does not overlap turn 2's.
    const perTurn = await mergeViewOfRun({ store, run, path: 'c.txt', scope: 'turn' });
    expect(perTurn).toMatchObject({ scope: 'turn', base: TURN1, theirs: TURN2, baseSha256: sha(TURN1), conflicts: 0 });

    const resolved = 'one\ntwo (mine, turn 1)\nthree\nfour\nfive\nsix\nseven\neight (turn 2)\n';
    // The user edits the file again after opening the view: refused, nothing written, nothing logged.
    await writeFile(file, `${MINE}more\n`);
    await expect(resolveRunConflict({ store, run, path: 'c.txt', scope: 'thread', content: resolved, oursSha256: view.oursSha256, theirsSha256: view.theirsSha256 })).rejects.toMatchObject({ kind: 'CONFLICT', message: expect.stringContaining('changed again') });
    expect(await readFile(file, 'utf8')).toBe(`${MINE}more\n`);

    const again = await mergeViewOfRun({ store, run, path: 'c.txt', scope: 'thread' });
    expect(again.ours).toBe(`${MINE}more\n`);
    // Saved under the other scope than the view showed: refused.
    await expect(resolveRunConflict({ store, run, path: 'c.txt', scope: 'turn', content: resolved, oursSha256: again.oursSha256, theirsSha256: sha(BASE) })).rejects.toMatchObject({ kind: 'CONFLICT', message: expect.stringContaining('another result') });
    expect(await readFile(file, 'utf8')).toBe(`${MINE}more\n`);

    const done = await resolveRunConflict({ store, run, path: 'c.txt', scope: 'thread', content: resolved, oursSha256: again.oursSha256, theirsSha256: again.theirsSha256 });
    expect(done).toEqual({ path: 'c.txt', sha256: sha(resolved) });
    expect(await readFile(file, 'utf8')).toBe(resolved);

    const recs = await applyRecords(store.paths(run.id).applyLog);
    // The refused apply, then the one resolution: the refused saves left no record.
    expect(recs.map((r) => r.data.mode)).toEqual(['working-tree', 'resolve']);
    expect(recs[0]!.data.scope).toBe('thread');
    expect(recs[1]!.data).toEqual({
      mode: 'resolve',
      scope: 'thread',
      target: projectDir,
      applied: ['c.txt'],
      refused: [],
      patchSha256: sha(resolved),
      resolved: { path: 'c.txt', replacedSha256: sha(`${MINE}more\n`), writtenSha256: sha(resolved), baseSha256: sha(BASE), theirsSha256: sha(TURN2) },
    });
    expect((await store.get(run.id)).applyLog).toEqual({ count: 2, head: recs[1]!.hash });

    // A turn-scope resolution says so too.
    const turnView = await mergeViewOfRun({ store, run, path: 'c.txt', scope: 'turn' });
    await resolveRunConflict({ store, run, path: 'c.txt', content: TURN2, oursSha256: turnView.oursSha256, theirsSha256: turnView.theirsSha256 });
    expect((await applyRecords(store.paths(run.id).applyLog)).at(-1)!.data).toMatchObject({ mode: 'resolve', scope: 'turn', resolved: { baseSha256: sha(TURN1), theirsSha256: sha(TURN2) } });
  });

  it("never passes a follow-up's own change off as the thread's: a missing total is an error", async () => {
    const { store, run } = await twoTurnThread();
    await rm(resultPaths(store, run.id).threadResult);
    await expect(mergeViewOfRun({ store, run, path: 'c.txt', scope: 'thread' })).rejects.toMatchObject({ kind: 'NOT_FOUND', message: expect.stringContaining('thread total') });
    await expect(resolveRunConflict({ store, run, path: 'c.txt', scope: 'thread', content: 'x\n', oursSha256: sha(MINE) })).rejects.toMatchObject({ kind: 'NOT_FOUND' });
    // The project's file is untouched.
    expect(await readFile(path.join(run.projectDir, 'c.txt'), 'utf8')).toBe(MINE);
  });
});
