import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { LimitError } from '../common/limit-error';
import type { CollectedResult } from '../workspace/collect';
import type { WorkspaceShell } from '../workspace/workspace-shell';
import { Checkpointer, checkpointPaths, type CheckpointerOptions } from './checkpoints';
import type { RunStore } from './run-store';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

const BASE = '0'.repeat(40);

/** A result of `files` changed files with a patch of `bytes` bytes, as a collect would give. */
function collected(commit: string, files: number, bytes: number): CollectedResult {
  const changes = Array.from({ length: files }, (_, i) => ({
    path: `f${i}.txt`, status: 'added' as const, binary: false, additions: 1, deletions: 0, size: 2, oldSize: 0, modeChanged: false, tooLarge: false,
    oldOid: '0'.repeat(40), newOid: `${i}`.padStart(40, 'a'), section: { offset: 0, length: 0, sha256: 'a'.repeat(64) },
  }));
  return { result: { version: 2, baseCommit: BASE, resultCommit: commit, patchSha256: commit.slice(0, 1).repeat(64), changes, skipped: [] }, patch: Buffer.alloc(bytes, 0x61) };
}

async function setup(opts: Partial<CheckpointerOptions> & { results: CollectedResult[]; scanSays?: () => boolean }) {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-cp-'));
  dirs.push(dir);
  const store = { paths: () => ({ artifacts: dir }) } as unknown as RunStore;
  const notes: string[] = [];
  let collects = 0;
  const shell: WorkspaceShell = { run: async () => ({ exitCode: 0, stdout: Buffer.from(opts.scanSays?.() === false ? '' : 'changed\n'), stderr: Buffer.alloc(0), truncated: false, timedOut: false }) } as unknown as WorkspaceShell;
  const cp = new Checkpointer({
    store, runId: 'r', shell, baseCommit: BASE, tracksDeps: false,
    audit: { append: async (_t: string, d: { message?: string }) => void notes.push(String(d.message)) } as unknown as CheckpointerOptions['audit'],
    collect: async () => opts.results[Math.min(collects++, opts.results.length - 1)] as CollectedResult,
    ...opts,
  });
  const index = async () => JSON.parse(await readFile(checkpointPaths(store, 'r').index, 'utf8')) as { checkpoints: Array<{ n: number; final?: boolean; files: number }>; limited?: { reason: string } };
  return { cp, notes, index, collects: () => collects };
}

describe('Checkpointer', () => {
  it('takes a checkpoint per changed turn, none for the first request or an unchanged tree, and the result last', async () => {
    const { cp, index, collects } = await setup({ results: [collected('1'.repeat(40), 1, 10), collected('1'.repeat(40), 1, 10), collected('2'.repeat(40), 2, 10)] });
    for (let i = 0; i < 4; i++) await cp.turnEnded();
    // Request 1 only places the marker; requests 2–4 look (the second finds the same tree).
    expect(collects()).toBe(3);
    await cp.finish(collected('3'.repeat(40), 3, 10));
    const i = await index();
    expect(i.checkpoints.map((c) => [c.n, c.files, c.final === true])).toEqual([[1, 1, false], [2, 2, false], [3, 3, true]]);
  });

  it('a final result equal to the last checkpoint marks it as the result', async () => {
    const { cp, index } = await setup({ results: [collected('1'.repeat(40), 1, 10)] });
    await cp.turnEnded();
    await cp.turnEnded();
    await cp.finish(collected('1'.repeat(40), 1, 10));
    expect((await index()).checkpoints.map((c) => [c.n, c.final === true])).toEqual([[1, true]]);
  });

  it('collects nothing when neither the change feed nor the scan saw a change', async () => {
    const { cp, collects } = await setup({ results: [collected('1'.repeat(40), 1, 10)], scanSays: () => false });
    await cp.turnEnded();
    await cp.turnEnded();
    expect(collects()).toBe(0);
    cp.markChanged();
    await cp.turnEnded();
    expect(collects()).toBe(1);
  });

  it('stops at the count bound, says so, and still records the result last', async () => {
    const results = Array.from({ length: 10 }, (_, k) => collected(String(k + 1).repeat(40).slice(0, 40), k + 1, 10));
    const { cp, index, notes } = await setup({ results, maxCheckpoints: 3 });
    for (let i = 0; i < 8; i++) await cp.turnEnded();
    await cp.finish(collected('f'.repeat(40), 9, 10));
    const i = await index();
    expect(i.checkpoints.map((c) => c.n)).toEqual([1, 2, 3, 4]);
    expect(i.checkpoints.at(-1)?.final).toBe(true);
    expect(i.limited).toMatchObject({ reason: 'count' });
    expect(notes.some((n) => /count bound/.test(n))).toBe(true);
  });

  it('stops at the bytes bound (patch bytes together)', async () => {
    const results = Array.from({ length: 5 }, (_, k) => collected(String(k + 1).repeat(40).slice(0, 40), 1, 400));
    const { cp, index } = await setup({ results, maxBytes: 1000 });
    for (let i = 0; i < 6; i++) await cp.turnEnded();
    const i = await index();
    expect(i.checkpoints.map((c) => c.n)).toEqual([1, 2]);
    expect(i.limited).toMatchObject({ reason: 'bytes' });
  });

  // Issue 39: a limit is a typed error, never recovered from the words of a message.
  it('stops at the result cap by its typed error; a failure whose words mention a cap is a note, and later turns are checkpointed', async () => {
    let calls = 0;
    const failing = async (): Promise<CollectedResult> => {
      calls++;
      if (calls === 1) throw new AirlockError('SANDBOX_FAILED', 'the helper said: output cap reached while listing');
      if (calls === 2) return collected('1'.repeat(40), 1, 10);
      throw new LimitError('SANDBOX_FAILED', 'result-bytes', 100, 'The changed files exceed the 100-byte result cap.');
    };
    const { cp, notes, index } = await setup({ results: [], collect: failing });
    for (let i = 0; i < 5; i++) await cp.turnEnded();
    const i = await index();
    expect(i.checkpoints.map((c) => c.n)).toEqual([1]);
    expect(i.limited).toMatchObject({ reason: 'bytes' });
    expect(notes.some((n) => /not taken: the helper said: output cap reached/.test(n))).toBe(true);
    // Limited: no collect after the cap was reached.
    expect(calls).toBe(3);
  });
});
