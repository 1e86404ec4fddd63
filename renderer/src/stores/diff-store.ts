import { create } from 'zustand';
import type { ChangedFile, FileDiff } from '../../../contracts';
import { api, errorMessage } from '../api';

interface DiffState {
  files: Record<string, ChangedFile[] | undefined>;
  /** `${runId}\0${path}` → diff */
  diffs: Record<string, FileDiff | { error: string } | undefined>;
  load(runId: string): Promise<void>;
  loadFile(runId: string, path: string): Promise<void>;
  /** `diffs:onDidChange`: refetch what is loaded for that run (debounced by the caller). */
  invalidate(runId: string): Promise<void>;
}

export const diffKey = (runId: string, path: string) => `${runId}\0${path}`;

/** Changed files and diffs: event ⇒ invalidate ⇒ refetch (docs/architecture.md §5). */
export const useDiffStore = create<DiffState>()((set, get) => ({
  files: {},
  diffs: {},
  async load(runId) {
    const { files } = await api().call('diffs:list', { runId });
    set((s) => ({ files: { ...s.files, [runId]: files } }));
  },
  async loadFile(runId, path) {
    try {
      const diff = await api().call('diffs:file', { runId, path });
      set((s) => ({ diffs: { ...s.diffs, [diffKey(runId, path)]: diff } }));
    } catch (err) {
      set((s) => ({ diffs: { ...s.diffs, [diffKey(runId, path)]: { error: errorMessage(err) } } }));
    }
  },
  async invalidate(runId) {
    if (!get().files[runId]) return;
    await get().load(runId);
    const loaded = Object.keys(get().diffs).filter((k) => k.startsWith(`${runId}\0`));
    await Promise.all(loaded.map((k) => get().loadFile(runId, k.slice(runId.length + 1))));
  },
}));
