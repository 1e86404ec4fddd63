import { isFinalStatus } from '../../contracts/runs';
import { ownerStatus } from '../common/process-alive';
import type { StoredRun } from './run-record';

/** Whether the process that drove a run is gone (so the run was interrupted); another machine's run (shared home) is left alone. */
export function ownerIsGone(owner: string | undefined): boolean {
  return ownerStatus(owner) === 'gone';
}

/**
 * A run as a reader should see it: one left unfinished by a process that is gone (killed, crashed)
 * reads as `interrupted`, without waiting for the next `run`/`serve` to recover it. Only the view
 * changes: recovery (core/runs/run-service.ts) persists the status, seals the audit log and reaps the
 * sandbox, which a reader must not do (it may be a second process racing the recovering one).
 */
export function asRead(run: StoredRun): StoredRun {
  if (isFinalStatus(run.status) || !ownerIsGone(run.owner)) return run;
  const { phase: _phase, pendingApproval: _pending, ...rest } = run;
  return {
    ...rest,
    status: 'interrupted',
    error: {
      kind: 'CANCELLED',
      message: 'The Airlock process driving this run stopped before it finished. Its sandbox is removed and its log sealed the next time Airlock starts; the diff saved so far (if any) is kept.',
    },
  };
}
