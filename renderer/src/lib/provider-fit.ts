import type { AgentKind, ProviderInfo } from '../../../contracts';

/**
 * Which providers the New run form offers for an agent. A subscription credential serves only its
 * vendor's client (`ProviderInfo.credential.agent`: the Claude subscription only Claude Code, the
 * ChatGPT sign-in only Codex); API keys serve every agent. The core refuses anything else at Start
 * (FORBIDDEN, docs/architecture.md §6); the form does not offer what would be refused.
 */
export function servesAgent(provider: Pick<ProviderInfo, 'credential'>, agent: AgentKind): boolean {
  return !provider.credential || provider.credential.agent === agent;
}

/** A provider a run can use as it stands: it has its key or sign-in, or needs none. */
export function isUsable(provider: Pick<ProviderInfo, 'hasKey' | 'requiresKey'>): boolean {
  return provider.hasKey || !provider.requiresKey;
}

/**
 * The provider the form should hold for `agent`: the current one while it fits (or is unknown to the
 * list), else the first fitting one that is usable, else the first fitting one; undefined when none fits.
 */
export function fittingProvider(providers: readonly ProviderInfo[], agent: AgentKind, currentId: string): ProviderInfo | undefined {
  const current = providers.find((p) => p.id === currentId);
  if (current && servesAgent(current, agent)) return current;
  const fitting = providers.filter((p) => servesAgent(p, agent));
  return fitting.find(isUsable) ?? fitting[0];
}

/** An agent's name in the UI (one label map: `option-labels.ts`). */
export { AGENT_LABELS as AGENT_LABEL } from './option-labels';
