import { create } from 'zustand';
import { isFinalStatus, type ChannelInput, type ChannelOutput, type ContinueRunInput, type RunEvent, type RunRecord, type RunSummary, type StartRunInput } from '../../../contracts';
import { api } from '../api';

/** Events kept in memory per run for the transcript; command output lives in the terminal instead. */
export const MAX_EVENTS_PER_RUN = 5000;

export interface RunLive {
  events: RunEvent[];
  lastSeq: number;
  record?: RunRecord;
  replaying: boolean;
}

interface RunsState {
  runs: Record<string, RunSummary>;
  /** Run ids, newest first. */
  order: string[];
  live: Record<string, RunLive>;
  loaded: boolean;
  load(): Promise<void>;
  start(input: StartRunInput): Promise<RunSummary>;
  /** A follow-up turn of a finished run (or a fork, from an earlier turn), docs/architecture.md §15. */
  continueRun(input: ContinueRunInput): Promise<RunSummary>;
  /** Loads a run's record and replays its stored events (history, or a reload mid-run). */
  open(runId: string): Promise<void>;
  cancel(runId: string): Promise<void>;
  approve(runId: string, requestId: string, approved: boolean): Promise<void>;
  remove(runId: string): Promise<void>;
  /** The run's published preview ports (a terminal link to loopback opens only for one of them). */
  previewPorts(runId: string): Promise<ChannelOutput<'runs:previewPorts'>>;
  /** The run's whole record (wipe proof, exclusions, limits, environment). */
  record(runId: string): Promise<RunRecord>;
  /** Answers a waiting network question; `answered: false` when it is no longer waiting. */
  answerNetwork(input: ChannelInput<'runs:answerNetwork'>): Promise<ChannelOutput<'runs:answerNetwork'>>;
  /** Answers a waiting MCP tool question; `answered: false` when it is no longer waiting. */
  answerMcp(input: ChannelInput<'runs:answerMcp'>): Promise<ChannelOutput<'runs:answerMcp'>>;
  applyStatus(summary: RunSummary): void;
  applyEvent(event: RunEvent): void;
}

const keep = (e: RunEvent) => e.event.type !== 'command_output';

/** Merges events by seq: live pushes and a replay from disk may arrive in either order. */
function appendEvents(live: RunLive | undefined, events: RunEvent[]): RunLive {
  const base = live ?? { events: [], lastSeq: -1, replaying: false };
  if (!events.length) return base;
  const lastSeq = Math.max(base.lastSeq, ...events.map((e) => e.seq));
  let merged: RunEvent[];
  if (events.every((e) => e.seq > base.lastSeq)) {
    merged = base.events.concat(events.filter(keep)); // the common case: appended in order
  } else {
    const bySeq = new Map(base.events.map((e) => [e.seq, e]));
    for (const e of events) if (keep(e)) bySeq.set(e.seq, e);
    merged = [...bySeq.values()].sort((a, b) => a.seq - b.seq);
  }
  return { ...base, events: merged.length > MAX_EVENTS_PER_RUN ? merged.slice(-MAX_EVENTS_PER_RUN) : merged, lastSeq };
}

/** Runs: summaries for lists, live state (events, record) for the runs being looked at. */
export const useRunsStore = create<RunsState>()((set, get) => {
  /** A run just queued here: listed, and its events kept from the first one. */
  const watchNew = (summary: RunSummary): RunSummary => {
    get().applyStatus(summary);
    set((s) => ({ live: { ...s.live, [summary.id]: s.live[summary.id] ?? { events: [], lastSeq: -1, replaying: false } } }));
    return summary;
  };
  return {
    runs: {},
    order: [],
    live: {},
    loaded: false,
    async load() {
      const list = await api().call('runs:list', {});
      set((s) => ({ runs: { ...s.runs, ...Object.fromEntries(list.map((r) => [r.id, r])) }, order: list.map((r) => r.id), loaded: true }));
    },
    async start(input) {
      return watchNew(await api().call('runs:start', input));
    },
    async continueRun(input) {
      return watchNew(await api().call('runs:continue', input));
    },
    async open(runId) {
      set((s) => ({ live: { ...s.live, [runId]: { ...(s.live[runId] ?? { events: [], lastSeq: -1 }), replaying: true } } }));
      const record = await api().call('runs:get', { runId });
      get().applyStatus(record);
      let after = -1;
      for (;;) {
        const page = await api().call('runs:events', { runId, afterSeq: after, limit: 1000 });
        set((s) => ({ live: { ...s.live, [runId]: appendEvents(s.live[runId], page.events) } }));
        if (page.done || page.events.length === 0) break;
        after = page.nextSeq;
      }
      set((s) => ({ live: { ...s.live, [runId]: { ...(s.live[runId] as RunLive), record, replaying: false } } }));
    },
    async cancel(runId) {
      get().applyStatus(await api().call('runs:cancel', { runId }));
    },
    async approve(runId, requestId, approved) {
      await api().call('runs:approve', { runId, requestId, approved });
      const run = get().runs[runId];
      if (run?.pendingApproval?.requestId === requestId) get().applyStatus({ ...run, pendingApproval: undefined });
    },
    previewPorts: (runId) => api().call('runs:previewPorts', { runId }),
    record: (runId) => api().call('runs:get', { runId }),
    answerNetwork: (input) => api().call('runs:answerNetwork', input),
    answerMcp: (input) => api().call('runs:answerMcp', input),
    async remove(runId) {
      await api().call('runs:delete', { runId });
      set((s) => {
        const { [runId]: _r, ...runs } = s.runs;
        const { [runId]: _l, ...live } = s.live;
        return { runs, live, order: s.order.filter((id) => id !== runId) };
      });
    },
    applyStatus(summary) {
      set((s) => ({
        runs: { ...s.runs, [summary.id]: { ...s.runs[summary.id], ...summary } },
        order: s.order.includes(summary.id) ? s.order : [summary.id, ...s.order],
      }));
      // A run being looked at has just ended: its kept record (summary, wipe proof…) was read while it
      // ran; read the final one, so Review's commit message is the agent's summary from the start.
      const kept = get().live[summary.id]?.record;
      if (kept && !isFinalStatus(kept.status) && isFinalStatus(summary.status)) {
        void api().call('runs:get', { runId: summary.id }).then((record) => {
          set((s) => (s.live[summary.id] ? { live: { ...s.live, [summary.id]: { ...(s.live[summary.id] as RunLive), record } } } : s));
          // A failed read keeps the record read while it ran: Review then starts from the task, as before.
        }, () => undefined);
      }
    },
    applyEvent(event) {
      const live = get().live[event.runId];
      if (!live) return; // nobody is looking at this run; it replays from disk when opened
      if (!keep(event)) return; // command output belongs to the terminal, not to React state
      set((s) => ({ live: { ...s.live, [event.runId]: appendEvents(s.live[event.runId], [event]) } }));
    },
  };
});
