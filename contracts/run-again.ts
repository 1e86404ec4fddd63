import type { RunRecord, StartRunInput } from './runs';

/**
 * The start input that repeats a past run: the same project, task, agent, provider and model,
 * approval mode, isolation, network policy (with its allow-list, gateway rules, secret names and
 * approval mode) and limits. The UI's "Run again" fills
 * the New run form with it; `airlock run --again <runId>` starts it, with any flags given on top.
 */
export function runAgainInput(run: RunRecord): StartRunInput {
  return {
    projectDir: run.projectDir,
    task: run.task,
    // An MCP session had no agent of its own: running its task again takes the default one.
    agent: run.agent === 'mcp' ? 'builtin' : run.agent,
    ...(run.customCommand ? { customCommand: run.customCommand } : {}),
    provider: run.provider,
    model: run.model,
    approval: run.approval,
    isolation: run.isolation,
    network: run.network,
    ...(run.allowlist?.length ? { allowlist: [...run.allowlist] } : {}),
    ...(run.egressRules?.length ? { egressRules: [...run.egressRules] } : {}),
    ...(run.secrets?.length ? { secrets: [...run.secrets] } : {}),
    ...(run.networkApprovals ? { networkApprovals: run.networkApprovals } : {}),
    ...(run.internalHosts?.length ? { internalHosts: [...run.internalHosts] } : {}),
    ...(run.gitHistory !== undefined ? { gitHistory: run.gitHistory } : {}),
    ...(run.environment && run.environment.kind !== 'airlock' ? { environment: run.environment.name } : {}),
    limits: {
      timeoutSec: run.limits.timeoutSec,
      ...(run.limits.budgetTokens !== undefined ? { budgetTokens: run.limits.budgetTokens } : {}),
      ...(run.limits.budgetUsd !== undefined ? { budgetUsd: run.limits.budgetUsd } : {}),
    },
  };
}
