import type { PendingApproval, RunRecord as RunRecordView, RunSummary } from '../../contracts/runs';
import type { RunRecord } from './run-record';

/** Fields the run service keeps in the (loose) stored record beside the schema's own. */
export interface RunRecordExtras {
  phase?: string;
  pendingApproval?: PendingApproval;
  /** `<hostname>:<pid>` of the process driving the run; a crash leaves it dead. */
  owner?: string;
  patchPath?: string;
  allowlist?: string[];
}

export type StoredRun = RunRecord & RunRecordExtras;

/** What lists and status pushes show: the stored record in the contracts' shape. */
export function toRunSummary(run: StoredRun): RunSummary {
  return {
    id: run.id,
    task: run.task,
    projectDir: run.projectDir,
    agent: run.agent,
    provider: run.provider,
    model: run.model,
    status: run.status,
    ...(run.phase ? { phase: run.phase } : {}),
    createdAt: run.createdAt,
    startedAt: run.startedAt ?? null,
    endedAt: run.endedAt ?? null,
    usage: {
      inputTokens: run.usage.inputTokens,
      outputTokens: run.usage.outputTokens,
      cacheReadTokens: run.usage.cacheReadTokens,
      cacheWriteTokens: run.usage.cacheWriteTokens,
      ...(run.usage.costUsd !== undefined ? { costUsd: run.usage.costUsd } : {}),
      requests: run.usage.modelCalls,
    },
    changedFiles: run.changedFiles.length,
    ...(run.error ? { error: run.error } : {}),
    isolation: run.isolation.kind === 'docker' ? 'container' : 'vm',
    network: run.isolation.network,
    approval: run.approval,
    ...(run.pendingApproval ? { pendingApproval: run.pendingApproval } : {}),
  };
}

/** Everything about one run, in the contracts' shape. */
export function toRunRecordView(run: StoredRun): RunRecordView {
  return {
    ...toRunSummary(run),
    ...(run.customCommand ? { customCommand: run.customCommand } : {}),
    ...(run.allowlist ? { allowlist: run.allowlist } : {}),
    limits: {
      timeoutSec: run.limits.timeoutSec ?? 1800,
      ...(run.limits.budgetTokens !== undefined ? { budgetTokens: run.limits.budgetTokens } : {}),
      ...(run.limits.budgetUsd !== undefined ? { budgetUsd: run.limits.budgetUsd } : {}),
    },
    excludedFiles: run.excluded,
    ...(run.summary ? { summary: run.summary } : {}),
    ...(run.patchPath ? { patchPath: run.patchPath } : {}),
    ...(run.wipe ? { wipe: { verified: run.wipe.leftovers.length === 0, leftovers: run.wipe.leftovers, at: run.wipe.verifiedAt } } : {}),
  };
}
