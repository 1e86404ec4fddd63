import { create } from 'zustand';
import type { ChangedFile, FileDiff } from '../../../contracts';
import { api, errorMessage } from '../api';

interface DiffState {
  files: Record<string, ChangedFile[] | undefined>;
  /** Digest of the collected result whose files are shown (absent while a run is live); apply sends it back. */
  patchSha256: Record<string, string | undefined>;
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
  patchSha256: {},
  diffs: {},
  async load(runId) {
    const { files, patchSha256 } = await api().call('diffs:list', { runId });
    set((s) => ({ files: { ...s.files, [runId]: files }, patchSha256: { ...s.patchSha256, [runId]: patchSha256 } }));
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
