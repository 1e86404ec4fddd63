import type { AttemptSpec, GitHistory, StartRunInput } from '../../../contracts';
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
  if (d.attempts.length === 1) return 'Add a second attempt to compare, or remove the attempt.';
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
    ...(d.network === 'allowlist' ? gatewayOf(d) : {}),
    ...(d.check.trim() ? { check: { command: d.check.trim() } } : {}),
    // A custom command is not pointed at the gateway: it gets no MCP servers.
    ...(d.agent !== 'custom' && d.mcpServers?.length ? { mcpServers: [...d.mcpServers] } : {}),
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

/** The gateway settings of an allow-list run: rules one per line, the secrets ticked, the approval mode. */
function gatewayOf(d: NewRunDraft): Pick<StartRunInput, 'egressRules' | 'secrets' | 'networkApprovals'> {
  const rules = d.egressRules.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  return {
    ...(rules.length ? { egressRules: rules } : {}),
    ...(d.secrets.length ? { secrets: [...d.secrets] } : {}),
    ...(d.networkApprovals === 'deny' ? { networkApprovals: 'deny' as const } : {}),
  };
}

/** The draft's attempts as the group takes them, or undefined for a single run (fewer than two rows). */
export function attemptsOf(d: NewRunDraft): AttemptSpec[] | undefined {
  if (d.attempts.length < 2) return undefined;
  return d.attempts.map((a) => ({ agent: a.agent, ...(a.provider ? { provider: a.provider } : {}), ...(a.model.trim() ? { model: a.model.trim() } : {}) }));
}
