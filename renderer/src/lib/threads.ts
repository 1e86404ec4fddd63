import type { RunSummary } from '../../../contracts';

/** A run as History lists it: in its thread, under the thread's first run (docs/architecture.md §15). */
export interface ThreadRow {
  run: RunSummary;
  /** 0 for a first run; its follow-ups are 1. */
  depth: number;
  /** On a first run: how many follow-ups its thread has. */
  followUps: number;
  /**
   * A fork: a follow-up that branches the thread — from a checkpoint inside its parent turn, or as a
   * second (third…) follow-up to the same turn; the other branch stays as it is.
   */
  fork?: { parentRunId: string; checkpoint?: number };
}

/**
 * Runs in list order, each thread's follow-ups right under its first run, by turn then start. A
 * follow-up whose first run is not in the list (deleted, or past the page) stands on its own.
 */
export function threadRows(runs: RunSummary[]): ThreadRow[] {
  const ids = new Set(runs.map((r) => r.id));
  const rootOf = (r: RunSummary) => (r.thread && ids.has(r.thread.rootRunId) ? r.thread.rootRunId : undefined);
  const byRoot = new Map<string, RunSummary[]>();
  for (const r of runs) {
    const root = rootOf(r);
    if (root) byRoot.set(root, [...(byRoot.get(root) ?? []), r]);
  }
  const rows: ThreadRow[] = [];
  for (const r of runs) {
    if (rootOf(r)) continue;
    const followUps = (byRoot.get(r.id) ?? []).sort((a, b) => (a.thread?.turn ?? 0) - (b.thread?.turn ?? 0) || a.createdAt.localeCompare(b.createdAt));
    rows.push({ run: r, depth: 0, followUps: followUps.length });
    for (const f of followUps) rows.push({ run: f, depth: 1, followUps: 0, ...forkOf(f, followUps) });
  }
  return rows;
}

/** Whether a follow-up branches its thread (see {@link ThreadRow.fork}): `siblings` are its thread's follow-ups. */
function forkOf(run: RunSummary, siblings: readonly RunSummary[]): Pick<ThreadRow, 'fork'> {
  const t = run.thread;
  if (!t) return {};
  const earlier = siblings.some((s) => s !== run && s.thread?.parentRunId === t.parentRunId && s.thread.checkpoint === undefined && s.createdAt < run.createdAt);
  if (t.checkpoint === undefined && !earlier) return {};
  return { fork: { parentRunId: t.parentRunId, ...(t.checkpoint !== undefined ? { checkpoint: t.checkpoint } : {}) } };
}
