import { create } from 'zustand';
import { MAX_SHELLS_PER_RUN, type ChannelOutput } from '../../../contracts';
import { api } from '../api';

export interface ShellTab {
  terminalId: string;
  /** "Shell 1", "Shell 2", … numbered per run in the order they were opened. */
  label: string;
  exited: boolean;
}

interface RunShells {
  tabs: ShellTab[];
  opened: number;
}

interface ShellsState {
  byRun: Record<string, RunShells>;
  /** Opens a shell in the run's sandbox and returns its tab; refuses past the cap with a clear error. */
  open(runId: string, size?: { cols: number; rows: number }): Promise<ShellTab>;
  /** Ends the shell (its PTY and bash in the sandbox) and removes its tab. */
  close(runId: string, terminalId: string): Promise<void>;
  markExited(runId: string, terminalId: string): void;
  /** A terminal's output kept on the host, from `offset` (any terminal: a run's agent or a shell). */
  replay(terminalId: string, offset: number): Promise<ChannelOutput<'terminals:replay'>>;
  /** Keystrokes to an interactive terminal. */
  write(terminalId: string, data: string): Promise<void>;
  resize(terminalId: string, cols: number, rows: number): Promise<void>;
}

/** Shells still running in a run (exited ones keep their tab, to read, but do not count). */
function liveShells(shells: RunShells | undefined): number {
  return shells?.tabs.filter((t) => !t.exited).length ?? 0;
}

const SHELL_CAP_MESSAGE = `${MAX_SHELLS_PER_RUN} shells are open, the most one run can have. Close one (× on its tab) to open another.`;

/**
 * A run's interactive shells, kept across screens so a shell is not lost (nor left running unseen)
 * when the user looks elsewhere and comes back.
 */
export const useShellsStore = create<ShellsState>()((set, get) => ({
  byRun: {},
  async open(runId, size) {
    // Said here without asking; the host enforces the same cap (`CONFLICT`) whoever asks.
    if (liveShells(get().byRun[runId]) >= MAX_SHELLS_PER_RUN) throw new Error(SHELL_CAP_MESSAGE);
    const { terminalId } = await api().call('runs:openShell', { runId, ...size });
    let tab!: ShellTab;
    set((s) => {
      const run = s.byRun[runId] ?? { tabs: [], opened: 0 };
      tab = { terminalId, label: `Shell ${run.opened + 1}`, exited: false };
      return { byRun: { ...s.byRun, [runId]: { tabs: [...run.tabs, tab], opened: run.opened + 1 } } };
    });
    return tab;
  },
  async close(runId, terminalId) {
    const run = get().byRun[runId];
    const tab = run?.tabs.find((t) => t.terminalId === terminalId);
    if (!run || !tab) return;
    set((s) => ({ byRun: { ...s.byRun, [runId]: { ...run, tabs: run.tabs.filter((t) => t !== tab) } } }));
    if (!tab.exited) await api().call('terminals:close', { terminalId });
  },
  markExited(runId, terminalId) {
    const run = get().byRun[runId];
    if (!run?.tabs.some((t) => t.terminalId === terminalId && !t.exited)) return;
    set((s) => ({ byRun: { ...s.byRun, [runId]: { ...run, tabs: run.tabs.map((t) => (t.terminalId === terminalId ? { ...t, exited: true } : t)) } } }));
  },
  replay: (terminalId, offset) => api().call('terminals:replay', { terminalId, offset }),
  async write(terminalId, data) {
    await api().call('terminals:write', { terminalId, data });
  },
  async resize(terminalId, cols, rows) {
    await api().call('terminals:resize', { terminalId, cols, rows });
  },
}));
