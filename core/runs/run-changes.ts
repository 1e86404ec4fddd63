import type { ChangeScope, ChangedFile, FileDiff } from '../../contracts/diffs';
import { AirlockError } from '../../contracts/errors';
import { fileDiff, listChanges, type FileChange } from '../workspace/changes';
import { wholeFileOnly } from '../workspace/partial';
import { classifyRisky, diffOf, loadLegacyResult, loadRunResult, type LoadedResult } from './run-apply';
import { toChangedFile } from './run-record';
import type { RunService } from './run-service';
import type { RunStore } from './run-store';

/**
 * A run's changes for review (`diffs:list`, `diffs:file`). While the sandbox exists: its own
 * listing, a hint for the live view only (apply is refused until the run ends). After: the result
 * the host derived at collect (docs/architecture.md §11). Risky files (what runs on the user's
 * machine later) come first.
 */
export class RunChanges {
  constructor(
    private readonly runs: Pick<RunService, 'sandboxOf'>,
    private readonly store: RunStore,
  ) {}

  /** The changed files, risky first, and the digest of the result patch once there is one. */
  async list(runId: string, scope: ChangeScope = 'turn', checkpoint?: number): Promise<{ files: ChangedFile[]; patchSha256?: string }> {
    const { files, stored } = await this.changes(runId, scope, checkpoint);
    const risky = new Map(classifyRisky(files, stored?.patch).map((r) => [r.path, r.reason] as const));
    const views = files.map((f) => toChangedFile(f, risky.get(f.path)));
    return { files: [...views.filter((f) => f.risky), ...views.filter((f) => !f.risky)], ...(stored ? { patchSha256: stored.result.patchSha256 } : {}) };
  }

  async file(runId: string, file: string, scope: ChangeScope = 'turn', checkpoint?: number): Promise<FileDiff> {
    const { files, stored } = await this.changes(runId, scope, checkpoint);
    const change = files.find((c) => c.path === file);
    if (!change) throw new AirlockError('NOT_FOUND', `${file} did not change in run ${runId}.`);
    const base = { path: change.path, ...(change.oldPath ? { oldPath: change.oldPath } : {}), status: toChangedFile(change).status, binary: change.binary, tooLarge: change.tooLarge, oldSize: change.oldSize, newSize: change.size };
    const sandbox = checkpoint === undefined ? this.runs.sandboxOf(runId) : undefined;
    const whole = sandbox || !stored ? 'hunks and lines can be picked once the run has ended' : wholeFileOnly(change);
    const view = { ...base, ...(whole ? { wholeFileOnly: whole } : {}) };
    if (change.binary || change.tooLarge) return { ...view, diff: '' };
    if (sandbox) return { ...view, diff: (await fileDiff(sandbox.channel, file, { ...(change.oldPath ? { oldPath: change.oldPath } : {}) })).diff };
    return { ...view, diff: diffOf(stored ?? (await this.storedResult(runId, scope, checkpoint)), file) ?? '' };
  }

  /** The result the host derived at the end of the run (patch, listing, object store). */
  async storedResult(runId: string, scope: ChangeScope = 'turn', checkpoint?: number): Promise<LoadedResult> {
    if (checkpoint !== undefined) return loadRunResult(this.store, runId, scope, checkpoint);
    try {
      return await loadRunResult(this.store, runId, scope);
    } catch (err) {
      const run = await this.store.get(runId);
      if (err instanceof AirlockError && err.kind === 'NOT_FOUND') throw new AirlockError('NOT_FOUND', `Run ${runId} has no result patch (status ${run.status}); a run's patch is collected when the agent stops.`);
      throw err;
    }
  }

  /** While the run is live, its own listing (a hint) whatever the scope; after, the stored result of the scope. */
  private async changes(runId: string, scope: ChangeScope, checkpoint?: number): Promise<{ files: FileChange[]; stored?: LoadedResult }> {
    // A checkpoint is stored the moment it is taken: shown from the host's copy, also while the run is live.
    if (checkpoint !== undefined) {
      const stored = await loadRunResult(this.store, runId, scope, checkpoint);
      return { files: stored.result.changes, stored };
    }
    const sandbox = this.runs.sandboxOf(runId);
    if (sandbox) {
      try {
        return { files: await listChanges(sandbox.channel) };
      } catch {
        // The sandbox went away between the check and the call: fall back to what was collected.
      }
    }
    try {
      const stored = await loadRunResult(this.store, runId, scope);
      return { files: stored.result.changes, stored };
    } catch (err) {
      await this.store.get(runId); // NOT_FOUND for an unknown run
      // A run from an older Airlock: its list is shown for reading, with no digest to apply by.
      const legacy = await loadLegacyResult(this.store, runId);
      if (legacy) return { files: legacy.files };
      if (err instanceof AirlockError && err.kind === 'INVALID_INPUT') throw err;
      return { files: [] };
    }
  }
}
