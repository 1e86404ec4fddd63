import { appendFile, mkdir, mkdtemp, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { newRunId } from '../../contracts/ids';
import { RunEvent, RunRecord } from '../../contracts/runs';
import { toRunRecordView, toRunSummary, type StoredRunInput } from './run-record';
import { RunStore } from './run-store';
import { testGit } from '../../test/support/workspace-fixtures';

let home: string;
let store: RunStore;

beforeEach(async () => {
  home = await mkdtemp(path.join(os.tmpdir(), 'airlock-runs-'));
  store = new RunStore({ git: testGit, home });
});
afterEach(async () => {
  await store.close();
  await rm(home, { recursive: true, force: true });
});

function input(id: string, createdAt: string, extra: Partial<StoredRunInput> = {}): StoredRunInput {
  return {
    id,
    kind: 'agent',
    task: 'fix the bug',
    projectDir: '/tmp/project',
    agent: 'builtin',
    provider: 'anthropic',
    model: 'claude-test',
    status: 'queued',
    createdAt,
    updatedAt: createdAt,
    isolation: 'container', network: 'none', sandbox: { driver: 'docker' },
    ...extra,
  };
}

describe('RunStore', () => {
  it('creates, reads, updates and fills defaults', async () => {
    const id = newRunId();
    const created = await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    expect(created.usage).toEqual({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 0 });
    expect(created.changedFiles).toEqual([]);
    const updated = await store.update(id, { status: 'running', startedAt: '2026-01-01T00:00:01.000Z' });
    expect(updated.status).toBe('running');
    expect(updated.updatedAt).not.toBe('2026-01-01T00:00:00.000Z');
    const viaFn = await store.update(id, (r) => ({ ...r, usage: { ...r.usage, inputTokens: r.usage.inputTokens + 5 } }));
    expect(viaFn.usage.inputTokens).toBe(5);
    expect(await store.get(id)).toEqual(viaFn);
    expect(JSON.parse(await readFile(store.paths(id).record, 'utf8')).status).toBe('running');
  });

  it('keeps unknown fields of newer records', async () => {
    const id = newRunId();
    await store.create({ ...input(id, '2026-01-01T00:00:00.000Z'), futureField: { x: 1 } } as StoredRunInput);
    expect((await store.get(id)) as Record<string, unknown>).toMatchObject({ futureField: { x: 1 } });
  });

  it('reads a record written before the schema followed the contract, and serves it in the contract\'s shape', async () => {
    const id = newRunId();
    const legacy = {
      id, task: 't', projectDir: '/p', agent: 'builtin', provider: 'anthropic', model: 'm', status: 'done', approval: 'auto',
      createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z', endedAt: '2026-01-01T00:01:00.000Z',
      isolation: { kind: 'qemu', network: 'none', image: 'airlock-sandbox:abc', sandboxId: 'vm-1' },
      limits: { timeoutSec: 600 },
      usage: { inputTokens: 10, outputTokens: 5, costUsd: 0.01, modelCalls: 2 },
      changedFiles: [{ path: 'a.ts', kind: 'modified', binary: false, additions: 1, deletions: 0 }],
      excluded: [{ path: '.env', reason: 'environment file' }],
      wipe: { removed: ['vm-1'], leftovers: [], durationMs: 40, verifiedAt: '2026-01-01T00:01:01.000Z' },
    };
    await mkdir(store.paths(id).dir, { recursive: true });
    await writeFile(store.paths(id).record, JSON.stringify(legacy));
    const run = await store.get(id);
    expect(run).toMatchObject({
      isolation: 'vm', network: 'none', sandbox: { driver: 'qemu', image: 'airlock-sandbox:abc', id: 'vm-1' },
      usage: { inputTokens: 10, outputTokens: 5, cacheReadTokens: 0, cacheWriteTokens: 0, requests: 2 },
      changedFiles: [{ path: 'a.ts', status: 'modified', binary: false, additions: 1, deletions: 0 }],
      excludedFiles: [{ path: '.env', reason: 'environment file' }],
      wipe: { verified: true, removed: ['vm-1'], leftovers: [], at: '2026-01-01T00:01:01.000Z' },
      startedAt: null,
    });
    const view = toRunRecordView(run);
    expect(RunRecord.parse(view)).toEqual(view);
    expect(view).toMatchObject({ changedFiles: 1, isolation: 'vm', usage: { requests: 2 } });
    // Host-only fields stay on the host.
    expect(view).not.toHaveProperty('sandbox');
    expect(view).not.toHaveProperty('owner');
    expect(toRunSummary(run)).not.toHaveProperty('excludedFiles');
  });

  // Issue 39: runs are of a kind (run-spec.ts); records written before the kind existed still load, as the kind they were.
  it('reads a record written before runs had a kind: a session by its pretend agent `mcp`, everything else an agent run', async () => {
    const old = (id: string, extra: Record<string, unknown>) => ({
      id, task: 't', projectDir: '/p', provider: 'anthropic', model: 'm', status: 'done', approval: 'auto',
      createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z', isolation: 'container', network: 'none', sandbox: { driver: 'docker' }, ...extra,
    });
    const agentRun = newRunId();
    const session = newRunId();
    for (const [id, raw] of [[agentRun, old(agentRun, { agent: 'claude-code' })], [session, old(session, { agent: 'mcp', mcpClient: 'claude-desktop 1.0', provider: 'none', model: '' })]] as const) {
      await mkdir(store.paths(id).dir, { recursive: true });
      await writeFile(store.paths(id).record, JSON.stringify(raw));
    }
    expect(await store.get(agentRun)).toMatchObject({ kind: 'agent', agent: 'claude-code' });
    expect(await store.get(session)).toMatchObject({ kind: 'session', agent: 'mcp', mcpClient: 'claude-desktop 1.0' });
    // Rewritten by this Airlock, the kind is stored, and a list reads both.
    await store.update(session, { phase: 'x' });
    expect(JSON.parse(await readFile(store.paths(session).record, 'utf8'))).toMatchObject({ kind: 'session' });
    expect((await store.list()).runs.map((r) => [r.id, r.kind]).sort()).toEqual([[agentRun, 'agent'], [session, 'session']].sort());
  });

  it('refuses a record of an unknown kind rather than running it as an agent run', async () => {
    const id = newRunId();
    await expect(store.create({ ...input(id, '2026-01-01T00:00:00.000Z'), kind: 'robot' } as unknown as StoredRunInput)).rejects.toThrow();
  });

  it('serialises concurrent updates to one run', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    await Promise.all(Array.from({ length: 20 }, () => store.update(id, (r) => ({ ...r, usage: { ...r.usage, requests: r.usage.requests + 1 } }))));
    expect((await store.get(id)).usage.requests).toBe(20);
  });

  it('rejects a duplicate id, a bad record, a bad id, and reports a missing run', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    await expect(store.create(input(id, '2026-01-01T00:00:00.000Z'))).rejects.toMatchObject({ kind: 'CONFLICT' });
    await expect(store.create({ ...input(newRunId(), 'x'), status: 'bogus' as never })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    expect(() => store.paths('../../etc')).toThrow(/not a run id/);
    await expect(store.get(newRunId())).rejects.toMatchObject({ kind: 'NOT_FOUND' });
  });

  it('lists newest first and flags unreadable folders instead of throwing', async () => {
    const a = 'r-aaaaaaaa-00000001';
    const b = 'r-aaaaaaab-00000002';
    const c = 'r-aaaaaaac-00000003';
    await store.create(input(a, '2026-01-01T00:00:00.000Z'));
    await store.create(input(b, '2026-01-02T00:00:00.000Z'));
    await store.create(input(c, '2026-01-03T00:00:00.000Z'));
    // c: damaged record and damaged backup; a stray folder; an empty run folder.
    await writeFile(store.paths(c).record, '{"id": "r-aaa');
    await mkdir(path.join(store.root, 'not-a-run'));
    await mkdir(path.join(store.root, 'r-aaaaaaad-00000004'));
    const { runs, unreadable } = await store.list();
    expect(runs.map((r) => r.id)).toEqual([b, a]);
    expect(unreadable.map((u) => u.runId).sort()).toEqual(['not-a-run', 'r-aaaaaaad-00000004', c].sort());
    expect(unreadable.find((u) => u.runId === c)?.reason).toMatch(/damaged/);
    await expect(store.get(c)).rejects.toMatchObject({ kind: 'INTERNAL' });
  });

  it('falls back to the previous record when run.json is torn', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    await store.update(id, { status: 'running' });
    await store.update(id, { status: 'collecting' });
    await truncate(store.paths(id).record, 30);
    const rec = await store.get(id);
    expect(rec.status).toBe('running');
    // The next update works from what could be read and leaves a whole record.
    await store.update(id, { status: 'done' });
    expect((await store.get(id)).status).toBe('done');
  });

  it('deletes a run', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    store.appendEvents(id, [{ type: 'x' }]);
    await store.delete(id);
    await expect(store.get(id)).rejects.toMatchObject({ kind: 'NOT_FOUND' });
    await expect(store.delete(id)).rejects.toMatchObject({ kind: 'NOT_FOUND' });
    expect((await store.list()).runs).toEqual([]);
  });
});

describe('RunStore events', () => {
  it('appends buffered events and replays them in order', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    for (let i = 0; i < 100; i++) store.appendEvents(id, [{ type: 'command_output', id: 'c1', stream: 'stdout', data: `line ${i}\n` }]);
    store.appendEvents(id, [{ type: 'finished', summary: 'ok' }, { type: 'usage', inputTokens: 1, outputTokens: 2 }]);
    const seen: unknown[] = [];
    for await (const e of store.readEvents(id)) seen.push(e);
    expect(seen).toHaveLength(102);
    expect(seen[0]).toEqual({ type: 'command_output', id: 'c1', stream: 'stdout', data: 'line 0\n' });
    expect(seen[101]).toEqual({ type: 'usage', inputTokens: 1, outputTokens: 2 });
  });

  // Issue 12, attack 3: events come from the sandbox's output; faster than the disk, they are dropped, not queued without bound.
  it('queues at most 64 MiB of events for the disk, dropping the rest', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    const data = 'x'.repeat(1000);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.message);
    process.on('warning', onWarning);
    try {
      // 100 MB in one go: nothing can reach the disk before the loop ends.
      for (let i = 0; i < 100_000; i++) store.appendEvents(id, [{ type: 'assistant_text', delta: data }]);
      await store.flushEvents(id);
      let n = 0;
      for await (const _ of store.readEvents(id)) n += 1;
      expect(n).toBeGreaterThan(60_000);
      expect(n).toBeLessThan(70_000);
      await vi.waitFor(() => expect(warnings.some((w) => /faster than they can be written/.test(w))).toBe(true));
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('flushes on the size threshold without an explicit flush', async () => {
    const small = new RunStore({ git: testGit, home, eventFlushBytes: 10, eventFlushMs: 60_000 });
    const id = newRunId();
    await small.create(input(id, '2026-01-01T00:00:00.000Z'));
    small.appendEvents(id, [{ data: 'x'.repeat(20) }]);
    await small.flushEvents(id);
    expect(await readFile(small.paths(id).events, 'utf8')).toContain('x'.repeat(20));
  });

  it('keeps order while writes are in flight, and closes its files', async () => {
    const small = new RunStore({ git: testGit, home, eventFlushBytes: 10, eventFlushMs: 1 });
    const id = newRunId();
    await small.create(input(id, '2026-01-01T00:00:00.000Z'));
    for (let i = 0; i < 500; i++) {
      small.appendEvents(id, [{ n: i }]);
      if (i % 37 === 0) await new Promise((r) => setImmediate(r));
    }
    await small.close();
    const seen: number[] = [];
    for await (const e of small.readEvents<{ n: number }>(id)) seen.push(e.n);
    expect(seen).toEqual(Array.from({ length: 500 }, (_, i) => i));
    await small.close();
  });

  it('reads an absent event log as empty', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    const seen: unknown[] = [];
    for await (const e of store.readEvents(id)) seen.push(e);
    expect(seen).toEqual([]);
  });

  it('survives a torn event line: skips it on read and keeps later appends whole', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    store.appendEvents(id, [{ n: 1 }, { n: 2 }]);
    await store.flushEvents(id);
    // A crash mid-write: half a line at the end.
    await appendFile(store.paths(id).events, '{"n":3,"da');
    const fresh = new RunStore({ git: testGit, home });
    fresh.appendEvents(id, [{ n: 4 }]);
    const skipped: number[] = [];
    const seen: unknown[] = [];
    for await (const e of fresh.readEvents(id, { onSkipped: (n) => skipped.push(n) })) seen.push(e);
    expect(seen).toEqual([{ n: 1 }, { n: 2 }, { n: 4 }]);
    expect(skipped).toEqual([3]);
  });
  it('names the file, line and field of an event line that parses but is not an event (damage, not a torn write)', async () => {
    const id = newRunId();
    await store.create(input(id, '2026-01-01T00:00:00.000Z'));
    const at = '2026-01-01T00:00:01.000Z';
    store.appendEvents(id, [{ runId: id, seq: 1, at, event: { type: 'assistant_text', delta: 'hi' } }]);
    await store.flushEvents(id);
    await appendFile(store.paths(id).events, `${JSON.stringify({ runId: id, seq: 'two', at, event: { type: 'assistant_text', delta: 'x' } })}\n`);
    const seen: RunEvent[] = [];
    const read = async (): Promise<void> => {
      for await (const e of store.readEvents(id, { schema: RunEvent })) seen.push(e);
    };
    await expect(read()).rejects.toThrow(new RegExp(`${store.paths(id).events.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is damaged: line 2, field seq`));
    expect(seen.map((e) => e.seq)).toEqual([1]);
  });
});

describe('RunStore events after an empty flush', () => {
  it('keeps writing events appended after a flush with nothing buffered (a read mid-run)', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-store-flush-'));
    const store = new RunStore({ git: testGit, home });
    try {
      const id = newRunId();
      const now = new Date().toISOString();
      await store.create({ id, kind: 'agent', task: 't', projectDir: '/p', agent: 'builtin', provider: 'anthropic', model: 'm', status: 'running', createdAt: now, updatedAt: now, isolation: 'container', network: 'none', sandbox: { driver: 'docker' } });
      store.appendEvents(id, [{ seq: 0 }]);
      await store.flushEvents(id);
      for await (const _ of store.readEvents(id)) void _; // a reader flushes an empty buffer
      await store.flushEvents(id);
      store.appendEvents(id, [{ seq: 1 }, { seq: 2 }]);
      await store.flushEvents(id);
      const seqs: number[] = [];
      for await (const e of store.readEvents<{ seq: number }>(id)) seqs.push(e.seq);
      expect(seqs).toEqual([0, 1, 2]);
    } finally {
      await store.close();
      await rm(home, { recursive: true, force: true });
    }
  });
});
