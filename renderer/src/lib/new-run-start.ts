import type { GitHistory, StartRunInput } from '../../../contracts';
import type { NewRunDraft } from '../stores/new-run-form-store';

/**
 * Why Start run is disabled, in words (shown beside it), or undefined when it can start. A folder
 * known not to exist blocks Start at its field, before a run is made.
 */
export function startBlockedReason(d: NewRunDraft, known: { folderProblem?: string; noneUsable: boolean; vmBlocked: boolean }): string | undefined {
  if (!d.projectDir.trim()) return 'Choose a project folder.';
  if (known.folderProblem) return 'Fix the project folder (see its field).';
  if (!d.task.trim()) return 'Describe the task.';
  if (!d.provider) return known.noneUsable ? 'Add a provider key first (Keys & providers).' : 'Choose a provider.';
  if (!d.model.trim()) return 'Enter a model id.';
  if (known.vmBlocked && d.isolation === 'vm') return 'Virtual machine isolation is not available here; choose another isolation.';
  return undefined;
}

/** What Start run sends for the draft: numbers from their text, the allow-list only for that policy. */
export function startInputOf(d: NewRunDraft, gitHistory: GitHistory): StartRunInput {
  return {
    projectDir: d.projectDir.trim(),
    task: d.task,
    agent: d.agent,
    customCommand: d.agent === 'custom' ? d.customCommand : undefined,
    provider: d.provider,
    model: d.model.trim(),
    approval: d.approval,
    isolation: d.isolation,
    network: d.network,
    allowlist: d.network === 'allowlist' ? d.allowlist.split(/[\s,]+/).filter(Boolean) : undefined,
    ...(d.network === 'allowlist' && d.internalHosts?.trim() ? { internalHosts: d.internalHosts.split(/[\s,]+/).filter(Boolean) } : {}),
    gitHistory,
    ...(d.environment ? { environment: d.environment } : {}),
    ...(d.trustEnvironment ? { trustEnvironment: true } : {}),
    limits: {
      timeoutSec: Math.max(10, Math.round(Number(d.timeoutMin || '30') * 60)),
      budgetTokens: d.budgetTokens ? Number(d.budgetTokens) : undefined,
      budgetUsd: d.budgetUsd ? Number(d.budgetUsd) : undefined,
    },
  };
}
