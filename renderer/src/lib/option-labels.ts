import { AgentKind, ApprovalMode, EngineSetting, GitHistory, Isolation, NetworkAllowScope, NetworkPolicy, ThemeSetting, VmAccelSetting } from '../../../contracts';

/** Labels of the contract enums the forms offer; a new enum value fails the type check until it has one. */
export const AGENT_LABELS: Record<AgentKind, string> = { builtin: 'Built-in agent', 'claude-code': 'Claude Code', codex: 'Codex CLI', custom: 'Custom command' };
export const APPROVAL_LABELS: Record<ApprovalMode, string> = { auto: 'Run freely', ask: 'Ask before each command' };
export const ISOLATION_LABELS: Record<Isolation, string> = { container: 'Container', gvisor: 'gVisor container', vm: 'Virtual machine' };
export const NETWORK_LABELS: Record<NetworkPolicy, string> = { none: 'No network (model only)', allowlist: 'Allow-listed domains', open: 'Open internet' };
export const ENGINE_LABELS: Record<EngineSetting, string> = { auto: 'Auto', docker: 'Docker', podman: 'Podman' };
export const VM_ACCEL_LABELS: Record<VmAccelSetting, string> = { auto: 'Auto', kvm: 'KVM (Linux)', hvf: 'HVF (macOS)', tcg: 'TCG (software emulation)' };
/** How long a host let through mid-run stays allowed. */
export const ALLOW_SCOPE_LABELS: Record<NetworkAllowScope, string> = { once: 'once', run: 'this run', project: 'this project' };
export const THEME_LABELS: Record<ThemeSetting, string> = { system: 'System', light: 'Light', dark: 'Dark' };

/** The Settings form's git history: none, a number of commits (typed beside it), or all. */
export type GitMode = 'none' | 'commits' | 'all';
export const GIT_MODE_LABELS: Record<GitMode, string> = { none: 'None: one commit of the checked-out files', commits: 'The last commits', all: 'All of it' };

/** Choices as a form's options, in the given order, and the parser of a chosen `<option>`'s value. */
export interface EnumOptions<T extends string> {
  options: ReadonlyArray<{ value: T; label: string }>;
  /** The chosen value as the choice's type (checked, not cast); throws on a value not offered. */
  parse(value: string): T;
}

function enumOptions<T extends string>(values: readonly T[], labels: Record<T, string>): EnumOptions<T> {
  return {
    options: values.map((value) => ({ value, label: labels[value] })),
    parse: (v) => {
      const chosen = values.find((x) => x === v);
      if (chosen === undefined) throw new Error(`'${v}' is not one of ${values.join(', ')}`);
      return chosen;
    },
  };
}

export const AGENT_OPTIONS = enumOptions(AgentKind.options, AGENT_LABELS);
export const APPROVAL_OPTIONS = enumOptions(ApprovalMode.options, APPROVAL_LABELS);
export const ISOLATION_OPTIONS = enumOptions(Isolation.options, ISOLATION_LABELS);
export const NETWORK_OPTIONS = enumOptions(NetworkPolicy.options, NETWORK_LABELS);
export const ENGINE_OPTIONS = enumOptions(EngineSetting.options, ENGINE_LABELS);
export const VM_ACCEL_OPTIONS = enumOptions(VmAccelSetting.options, VM_ACCEL_LABELS);
export const THEME_OPTIONS = enumOptions(ThemeSetting.options, THEME_LABELS);
export const ALLOW_SCOPE_OPTIONS = enumOptions(NetworkAllowScope.options, ALLOW_SCOPE_LABELS);
export const GIT_MODE_OPTIONS = enumOptions<GitMode>(['none', 'commits', 'all'], GIT_MODE_LABELS);

/**
 * The New run form's git history choices: none, the last 10 and 50 commits (and the setting's own
 * number), or all; `parse` reads a chosen value back through the contract's schema.
 */
export function gitHistoryOptions(setting: GitHistory | undefined): { options: Array<{ value: string; label: string }>; parse(value: string): GitHistory } {
  const counts = [...new Set([10, 50, ...(typeof setting === 'number' ? [setting] : [])])].sort((a, b) => a - b);
  return {
    options: [
      { value: 'none', label: GIT_MODE_LABELS.none },
      ...counts.map((n) => ({ value: String(n), label: `Last ${n} commits` })),
      { value: 'all', label: GIT_MODE_LABELS.all },
    ],
    parse: (v) => GitHistory.parse(/^\d+$/.test(v) ? Number(v) : v),
  };
}
