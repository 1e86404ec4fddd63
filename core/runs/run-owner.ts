import os from 'node:os';
import { isFinalStatus } from '../../contracts/runs';
import { isProcessAlive } from '../common/process-alive';
import type { StoredRun } from './run-record';

/** `<hostname>:<pid>` of this process: written on every run it drives. */
export const OWNER = `${os.hostname()}:${process.pid}`;

/** Whether the process that drove a run is gone (so the run was interrupted). */
export function ownerIsGone(owner: string | undefined): boolean {
  if (!owner) return true;
  const [host, pidText] = owner.split(':');
  const pid = Number(pidText);
  if (host !== os.hostname()) return false; // another machine's run (shared home): leave it alone
  return pid === process.pid ? false : !isProcessAlive(pid);
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
