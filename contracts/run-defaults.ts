import { DEFAULT_GIT_HISTORY, type AgentKind, type ApprovalMode, type GitHistory, type Isolation, type NetworkPolicy } from './runs';
import type { Settings } from './settings';

/** What a new run takes for whatever the New run form or `airlock run` leaves out. */
export interface NewRunDefaults {
  agent: AgentKind;
  /** The `defaultProvider` setting; absent: the form asks, the CLI uses `anthropic`. */
  provider: string | undefined;
  approval: ApprovalMode;
  isolation: Isolation;
  network: NetworkPolicy;
  allowlist: string[];
  timeoutSec: number;
  /** The `gitHistory` setting; absent: the run records none and gets `DEFAULT_GIT_HISTORY`. */
  gitHistory: GitHistory | undefined;
  /** The history a run gets when neither the input nor the setting names one (shown in the form). */
  effectiveGitHistory: GitHistory;
}

/**
 * The one place the defaults of a new run are resolved from the settings: the CLI's `airlock run`,
 * the UI's New run form and the runs service all use it, so they cannot drift apart.
 */
export function newRunDefaults(settings: Settings): NewRunDefaults {
  return {
    agent: settings.defaultAgent,
    provider: settings.defaultProvider,
    approval: settings.defaultApproval,
    isolation: settings.defaultIsolation,
    network: settings.defaultNetwork,
    allowlist: settings.defaultAllowlist,
    timeoutSec: settings.defaultTimeoutSec,
    gitHistory: settings.gitHistory,
    effectiveGitHistory: settings.gitHistory ?? DEFAULT_GIT_HISTORY,
  };
}

/**
 * The model a new run uses with a provider when none is named: the `defaultModel` setting when that
 * provider is the default one, else the provider's first listed model.
 */
export function defaultModelFor(settings: Pick<Settings, 'defaultProvider' | 'defaultModel'>, provider: { id: string; models: readonly string[] }): string | undefined {
  return (provider.id === settings.defaultProvider ? settings.defaultModel : undefined) ?? provider.models[0];
}
