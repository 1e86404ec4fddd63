import { create } from 'zustand';
import type { ChangeScope, ChangedFile, ChannelInput, ChannelOutput, FileDiff } from '../../../contracts';
import { api, errorMessage } from '../api';

/**
 * Where a run's change is kept: its own by run id, a follow-up's whole-thread change beside it
 * (docs/architecture.md §15).
 */
export const viewKey = (runId: string, scope: ViewScope = 'turn') => (scope === 'turn' ? runId : `${runId}#${scope}`);

/**
 * Which change of a run a view shows: a follow-up's own or the thread's (§15), or one of the run's
 * checkpoints, `cp<N>` (docs/architecture.md §19).
 */
export type ViewScope = ChangeScope | `cp${number}`;

/** A view's scope as the diffs calls take it. */
export function scopeArgs(scope: ViewScope | undefined): { scope?: ChangeScope; checkpoint?: number } {
  if (!scope) return {};
  return scope === 'turn' || scope === 'thread' ? { scope } : { checkpoint: Number(scope.slice(2)) };
}

interface DiffState {
  /** By `viewKey`. */
  files: Record<string, ChangedFile[] | undefined>;
  /** Digest of the collected result whose files are shown (absent while a run is live); apply sends it back. */
  patchSha256: Record<string, string | undefined>;
  /** `${viewKey}\0${path}` → diff */
  diffs: Record<string, FileDiff | { error: string } | undefined>;
  load(runId: string, scope?: ViewScope): Promise<void>;
  loadFile(runId: string, path: string, scope?: ViewScope): Promise<void>;
  /** `diffs:onDidChange`: refetch what is loaded for that run (debounced by the caller). */
  invalidate(runId: string): Promise<void>;
  /** Reads the host answers afresh each time (not kept here): checkpoints, pictures, a merge view. */
  checkpoints(runId: string): Promise<ChannelOutput<'diffs:checkpoints'>>;
  images(input: ChannelInput<'diffs:images'>): Promise<ChannelOutput<'diffs:images'>>;
  mergeView(input: ChannelInput<'diffs:mergeView'>): Promise<ChannelOutput<'diffs:mergeView'>>;
  /** Saves a resolved conflict; the host writes only against the view's digests. */
  resolve(input: ChannelInput<'diffs:resolve'>): Promise<ChannelOutput<'diffs:resolve'>>;
  savePatch(input: ChannelInput<'diffs:savePatch'>): Promise<ChannelOutput<'diffs:savePatch'>>;
  exportPatch(input: ChannelInput<'diffs:exportPatch'>): Promise<ChannelOutput<'diffs:exportPatch'>>;
}

export const diffKey = (runId: string, path: string, scope?: ViewScope) => `${viewKey(runId, scope)}\0${path}`;

/** Changed files and diffs: event ⇒ invalidate ⇒ refetch (docs/architecture.md §5). */
export const useDiffStore = create<DiffState>()((set, get) => ({
  files: {},
  patchSha256: {},
  diffs: {},
  async load(runId, scope) {
    const { files, patchSha256 } = await api().call('diffs:list', { runId, ...scopeArgs(scope) });
    const key = viewKey(runId, scope);
    set((s) => ({ files: { ...s.files, [key]: files }, patchSha256: { ...s.patchSha256, [key]: patchSha256 } }));
  },
  async loadFile(runId, path, scope) {
    try {
      const diff = await api().call('diffs:file', { runId, path, ...scopeArgs(scope) });
      set((s) => ({ diffs: { ...s.diffs, [diffKey(runId, path, scope)]: diff } }));
    } catch (err) {
      set((s) => ({ diffs: { ...s.diffs, [diffKey(runId, path, scope)]: { error: errorMessage(err) } } }));
    }
  },
  async invalidate(runId) {
    if (!get().files[runId]) return;
    await get().load(runId);
    const loaded = Object.keys(get().diffs).filter((k) => k.startsWith(`${runId}\0`));
    await Promise.all(loaded.map((k) => get().loadFile(runId, k.slice(runId.length + 1))));
  },
  checkpoints: (runId) => api().call('diffs:checkpoints', { runId }),
  images: (input) => api().call('diffs:images', input),
  mergeView: (input) => api().call('diffs:mergeView', input),
  resolve: (input) => api().call('diffs:resolve', input),
  savePatch: (input) => api().call('diffs:savePatch', input),
  exportPatch: (input) => api().call('diffs:exportPatch', input),
}));
