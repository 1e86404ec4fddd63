import { useEffect, useState } from 'react';
import type { AgentKind, ProviderInfo } from '../../../contracts';
import { AGENT_LABELS } from '../lib/option-labels';
import { fittingProvider, isUsable, servesAgent } from '../lib/provider-fit';

/** The last automatic switch of provider, said under the field until the next choice. */
export interface ProviderSwitch {
  from: string;
  /** The agent the old provider's credential serves alone. */
  servesOnly?: string;
  to?: string;
}

/** The New run form's provider for its agent: what it offers, and the switch it made itself. */
export interface ProviderChoice {
  /** Only providers that serve the chosen agent (a subscription serves only its vendor's CLI). */
  offered: ProviderInfo[];
  chosen: ProviderInfo | undefined;
  /** No offered provider has its key or sign-in. */
  noneUsable: boolean;
  switched: ProviderSwitch | undefined;
  /** The user chose (agent or provider): the note of the last automatic switch goes. */
  clearSwitched(): void;
}

/**
 * Keeps the form's provider fitting its agent (lib/provider-fit.ts): nothing chosen yet takes the
 * first usable one; one that does not serve the agent is switched, and the form says so; one the
 * list does not know (removed since) stays as typed, and Start says what is wrong.
 */
export function useProviderChoice({ providers, agent, provider, model, set }: {
  providers: ProviderInfo[];
  agent: AgentKind;
  provider: string;
  model: string;
  set(patch: { provider?: string; model?: string }): void;
}): ProviderChoice {
  const [switched, setSwitched] = useState<ProviderSwitch>();
  useEffect(() => {
    if (!providers.length) return;
    const current = providers.find((p) => p.id === provider);
    if (provider && !current) return;
    if (current && servesAgent(current, agent)) return;
    const next = fittingProvider(providers, agent, provider);
    if (current) {
      const only = AGENT_LABELS_BY_ID.get(current.credential?.agent ?? '');
      setSwitched({ from: current.label, ...(only ? { servesOnly: only } : {}), ...(next ? { to: next.label } : {}) });
    }
    if (!next) {
      if (provider) set({ provider: '' });
      return;
    }
    set({ provider: next.id, ...(next.models.length && !next.models.includes(model.trim()) && (current || !model) ? { model: next.models[0] } : {}) });
  }, [providers, agent, provider, model, set]);
  const offered = providers.filter((p) => servesAgent(p, agent));
  return {
    offered,
    chosen: providers.find((p) => p.id === provider),
    noneUsable: providers.length > 0 && !offered.some(isUsable),
    switched,
    clearSwitched: () => setSwitched(undefined),
  };
}

/** A credential names its agent as text (`ProviderInfo.credential.agent`): its label, if it is one we know. */
const AGENT_LABELS_BY_ID = new Map<string, string>(Object.entries(AGENT_LABELS));
