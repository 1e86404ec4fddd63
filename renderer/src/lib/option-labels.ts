import { AgentKind, ApprovalMode, Isolation, NetworkPolicy } from '../../../contracts';

/** Labels of the contract enums the forms offer; a new enum value fails the type check until it has one. */
export const AGENT_LABELS: Record<AgentKind, string> = { builtin: 'Built-in agent', 'claude-code': 'Claude Code', codex: 'Codex CLI', custom: 'Custom command' };
export const APPROVAL_LABELS: Record<ApprovalMode, string> = { auto: 'Run freely', ask: 'Ask before each command' };
export const ISOLATION_LABELS: Record<Isolation, string> = { container: 'Container', gvisor: 'gVisor container', vm: 'Virtual machine' };
export const NETWORK_LABELS: Record<NetworkPolicy, string> = { none: 'No network (model only)', allowlist: 'Allow-listed domains', open: 'Open internet' };

/** A contract enum as the form's options, in the enum's order, and its parser for a chosen value. */
export interface EnumOptions<T extends string> {
  options: ReadonlyArray<{ value: T; label: string }>;
  /** The chosen `<option>`'s value as the enum's type (checked, not cast). */
  parse(value: string): T;
}

function enumOptions<T extends string>(schema: { options: readonly T[]; parse(v: unknown): T }, labels: Record<T, string>): EnumOptions<T> {
  return { options: schema.options.map((value) => ({ value, label: labels[value] })), parse: (v) => schema.parse(v) };
}

export const AGENT_OPTIONS = enumOptions(AgentKind, AGENT_LABELS);
export const APPROVAL_OPTIONS = enumOptions(ApprovalMode, APPROVAL_LABELS);
export const ISOLATION_OPTIONS = enumOptions(Isolation, ISOLATION_LABELS);
export const NETWORK_OPTIONS = enumOptions(NetworkPolicy, NETWORK_LABELS);
