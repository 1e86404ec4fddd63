import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { ChangedFile, FileDiff } from '../../contracts/diffs';
import { AirlockError } from '../../contracts/errors';
import { fileDiff, listChanges, type FileChange } from '../workspace/changes';
import { classifyRisky, patchByFile } from './run-apply';
import { toChangedFile } from './run-record';
import type { RunService } from './run-service';
import type { RunStore } from './run-store';

/**
 * A run's changes for review (`diffs:list`, `diffs:file`): live from the sandbox while it exists,
 * else as collected at the end. Risky files (what runs on the user's machine later) come first.
 */
export class RunChanges {
  constructor(
    private readonly runs: Pick<RunService, 'sandboxOf'>,
    private readonly store: RunStore,
  ) {}

  async list(runId: string): Promise<ChangedFile[]> {
    const files = await this.changes(runId);
    const live = this.runs.sandboxOf(runId) !== undefined;
    const patch = live ? undefined : await this.storedPatch(runId).catch(() => undefined);
    const risky = new Map(classifyRisky(files, patch).map((r) => [r.path, r.reason] as const));
    const views = files.map((f) => toChangedFile(f, risky.get(f.path)));
    return [...views.filter((f) => f.risky), ...views.filter((f) => !f.risky)];
  }

  async file(runId: string, file: string): Promise<FileDiff> {
    const change = (await this.changes(runId)).find((c) => c.path === file);
    if (!change) throw new AirlockError('NOT_FOUND', `${file} did not change in run ${runId}.`);
    const base = { path: change.path, ...(change.oldPath ? { oldPath: change.oldPath } : {}), status: toChangedFile(change).status, binary: change.binary, tooLarge: change.tooLarge, oldSize: change.oldSize, newSize: change.size };
    if (change.binary || change.tooLarge) return { ...base, diff: '' };
    const sandbox = this.runs.sandboxOf(runId);
    if (sandbox) return { ...base, diff: (await fileDiff(sandbox.channel, file, { ...(change.oldPath ? { oldPath: change.oldPath } : {}) })).diff };
    return { ...base, diff: patchByFile(await this.storedPatch(runId)).get(file) ?? '' };
  }

  /** The patch collected at the end of the run. */
  async storedPatch(runId: string): Promise<Buffer> {
    try {
      return await readFile(this.store.paths(runId).patch);
    } catch {
      const run = await this.store.get(runId);
      throw new AirlockError('NOT_FOUND', `Run ${runId} has no result patch (status ${run.status}); a run's patch is collected when the agent stops.`);
    }
  }

  private async changes(runId: string): Promise<FileChange[]> {
    const sandbox = this.runs.sandboxOf(runId);
    if (sandbox) {
      try {
        return await listChanges(sandbox.channel);
      } catch {
        // The sandbox went away between the check and the call: fall back to what was collected.
      }
    }
    try {
      return JSON.parse(await readFile(path.join(this.store.paths(runId).artifacts, 'changes.json'), 'utf8')) as FileChange[];
    } catch {
      await this.store.get(runId); // NOT_FOUND for an unknown run
      return [];
    }
  }
}
