import type { AttemptSpec } from './attempts';
import { DEFAULT_GIT_HISTORY, type StartRunInput } from './runs';

/** One shell word: bare when it is plainly safe, else single-quoted (a `'` inside closes, escapes, reopens). */
export function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The `airlock run` command line that starts the same run (or attempt group) as the New run form:
 * the app shows it, so what the app can do the CLI can too and the user can script it. Only settings
 * that differ from the CLI's own defaults appear, except the agent, provider and model.
 */
export function cliCommandFor(input: StartRunInput, attempts?: readonly AttemptSpec[]): string {
  const out: string[] = ['airlock', 'run', input.projectDir || 'PROJECT', '--task', input.task.trim() ? input.task : '…'];
  const flag = (name: string, value?: string | number) => out.push(`--${name}`, ...(value === undefined ? [] : [String(value)]));
  const agent = input.agent ?? 'builtin';
  if (!attempts?.length) {
    flag('agent', agent);
    if (agent === 'custom' && input.customCommand) flag('custom-command', input.customCommand);
  }
  flag('provider', input.provider);
  flag('model', input.model);
  if (input.approval === 'ask') flag('approve-commands');
  if (input.isolation && input.isolation !== 'container') flag('isolation', input.isolation);
  if (input.network && input.network !== 'none') flag('network', input.network);
  if (input.network === 'allowlist') {
    for (const a of input.allowlist ?? []) flag('allow', a);
    for (const r of input.egressRules ?? []) flag('rule', r);
    for (const s of input.secrets ?? []) flag('secret', s);
    for (const h of input.internalHosts ?? []) flag('internal-host', h);
    if (input.networkApprovals === 'deny') flag('network-approvals', 'deny');
  }
  for (const m of input.mcpServers ?? []) flag('mcp', m);
  if (input.environment) flag('environment', input.environment);
  if (input.trustEnvironment) flag('trust-environment');
  if (input.gitHistory !== undefined && input.gitHistory !== DEFAULT_GIT_HISTORY) flag('git-history', input.gitHistory);
  const limits = input.limits;
  if (limits?.timeoutSec !== undefined && limits.timeoutSec !== 1800) flag('timeout', limits.timeoutSec);
  if (limits?.budgetTokens !== undefined) flag('budget-tokens', limits.budgetTokens);
  if (limits?.budgetUsd !== undefined) flag('budget-usd', limits.budgetUsd);
  if (input.check) {
    flag('check', input.check.command);
    if (input.check.timeoutSec !== undefined) flag('check-timeout', input.check.timeoutSec);
  }
  if (attempts?.length) flag('attempts', attempts.map((a) => `${a.agent}${a.provider || a.model ? `:${a.provider ? `${a.provider}/` : ''}${a.model ?? ''}` : ''}`).join(','));
  return out.map(shellWord).join(' ');
}
