import { create } from 'zustand';
import { createJSONStorage, persist } from 'zustand/middleware';
import { sessionStore } from './session-storage';
import { newRunDefaults, runAgainInput, type AgentKind, type ApprovalMode, type GitHistory, type Isolation, type NetworkApprovalMode, type NetworkPolicy, type Settings, type StartRunInput } from '../../../contracts';
import { api } from '../api';
import { useAppStore } from './app-store';

/** What the New run form holds, as typed (numbers as text until Start). */
export interface NewRunDraft {
  projectDir: string;
  task: string;
  agent: AgentKind;
  customCommand: string;
  provider: string;
  model: string;
  approval: ApprovalMode;
  isolation: Isolation;
  network: NetworkPolicy;
  /** Domains, space separated. */
  allowlist: string;
  /** Allowed hosts that may resolve to private (LAN) addresses, space separated (docs/architecture.md §2.8). */
  internalHosts?: string;
  timeoutMin: string;
  budgetTokens: string;
  budgetUsd: string;
  /** History in the sandbox's repository; undefined: the `gitHistory` setting. */
  gitHistory?: GitHistory;
  /** The environment picked in the form (`airlock`, `devcontainer:PATH`, `image:REF`); undefined: the settings default, else `auto`. */
  environment?: string;
  /** The user accepted the picked devcontainer's content (recorded with the run). */
  trustEnvironment?: boolean;
  /** Gateway rules, one per line (allow-list policy only). */
  egressRules: string;
  /** Names of stored gateway secrets the run may use (allow-list policy only). */
  secrets: string[];
  /** What a request a rule refused does: wait for the user, or be refused at once. */
  networkApprovals: NetworkApprovalMode;
  /** The check the host runs once the agent is gone; empty: none. */
  check: string;
  /** The user's MCP servers the run gets (docs/architecture.md §20); starts as the project's enabled ones. */
  mcpServers?: string[];
  /** The project whose enabled MCP servers `mcpServers` started from (taken once per project folder). */
  mcpProject?: string;
  /**
   * Attempts of one task (agents × models, docs/architecture.md §18); fewer than two: a single run.
   * Each row's provider and model may be empty: the form's own.
   */
  attempts: AttemptDraft[];
}

/** One attempt row of the form. */
export interface AttemptDraft {
  agent: Exclude<AgentKind, 'custom'>;
  provider: string;
  model: string;
}

interface NewRunFormState {
  draft: NewRunDraft;
  /** Whether the draft took the settings' defaults yet (once per session). */
  seeded: boolean;
  /** A run to repeat was loaded ("Run again"): the form says so until the next edit. */
  againFrom?: string;
  set(patch: Partial<NewRunDraft>): void;
  /** Ticks the servers enabled for `projectDir`, once per folder, if that is still the form's project. */
  presetMcp(projectDir: string, servers: string[]): void;
  /** Takes the user's defaults, once, for fields the user has not filled. */
  seed(settings: Settings): void;
  /** The defaults changed (Settings screen): the form takes them again. */
  reseed(settings: Settings): void;
  /** Fills every field from a past run (contracts/run-again.ts). */
  fillFrom(input: StartRunInput, runId: string): void;
  /**
   * After a start: the task is used up; project and most settings stay for the next run, but the
   * network policy goes back to the Settings default — a wider one never carries over silently.
   */
  started(settings?: Settings): void;
}

const EMPTY: NewRunDraft = {
  projectDir: '',
  task: '',
  agent: 'builtin',
  customCommand: '',
  provider: '',
  model: '',
  approval: 'auto',
  isolation: 'container',
  network: 'none',
  allowlist: '',
  timeoutMin: '30',
  budgetTokens: '',
  budgetUsd: '',
  egressRules: '',
  secrets: [],
  networkApprovals: 'ask',
  check: '',
  attempts: [],
};

/**
 * The New run form's draft: it outlives the screen (navigate away and back, or reload the window)
 * for the session; nothing here is a secret.
 */
export const useNewRunForm = create<NewRunFormState>()(
  persist(
    (set, get) => ({
      draft: EMPTY,
      seeded: false,
      set: (patch) => set((s) => ({ draft: { ...s.draft, ...patch }, againFrom: undefined })),
      presetMcp: (projectDir, servers) =>
        set((s) => (s.draft.projectDir.trim() !== projectDir || s.draft.mcpProject === projectDir ? s : { draft: { ...s.draft, mcpServers: servers, mcpProject: projectDir } })),
      seed(settings) {
        if (get().seeded) return;
        const defaults = newRunDefaults(settings);
        set((s) => ({
          seeded: true,
          draft: {
            ...s.draft,
            agent: defaults.agent,
            provider: s.draft.provider || defaults.provider || '',
            model: s.draft.model || settings.defaultModel || '',
            approval: defaults.approval,
            isolation: defaults.isolation,
            network: defaults.network,
            allowlist: s.draft.allowlist || defaults.allowlist.join(' '),
            timeoutMin: String(Math.round(defaults.timeoutSec / 60)),
          },
        }));
      },
      reseed(settings) {
        set({ seeded: false });
        get().seed(settings);
      },
      fillFrom(input, runId) {
        set({
          seeded: true,
          againFrom: runId,
          draft: {
            projectDir: input.projectDir,
            task: input.task,
            agent: input.agent ?? 'builtin',
            customCommand: input.customCommand ?? '',
            provider: input.provider,
            model: input.model,
            approval: input.approval ?? 'auto',
            isolation: input.isolation ?? 'container',
            network: input.network ?? 'none',
            allowlist: (input.allowlist ?? []).join(' '),
            ...(input.internalHosts?.length ? { internalHosts: input.internalHosts.join(' ') } : {}),
            timeoutMin: String(Math.max(1, Math.round((input.limits?.timeoutSec ?? 1800) / 60))),
            budgetTokens: input.limits?.budgetTokens !== undefined ? String(input.limits.budgetTokens) : '',
            budgetUsd: input.limits?.budgetUsd !== undefined ? String(input.limits.budgetUsd) : '',
            ...(input.gitHistory !== undefined ? { gitHistory: input.gitHistory } : {}),
            ...(input.environment !== undefined ? { environment: input.environment } : {}),
            egressRules: (input.egressRules ?? []).join('\n'),
            secrets: [...(input.secrets ?? [])],
            // The past run's servers, not the project's current ones.
            mcpServers: [...(input.mcpServers ?? [])],
            mcpProject: input.projectDir,
            networkApprovals: input.networkApprovals ?? 'ask',
            check: input.check?.command ?? '',
            attempts: [],
          },
        });
      },
      started: (settings) => set((s) => {
        const defaults = settings ? newRunDefaults(settings) : { network: EMPTY.network, allowlist: [] as string[] };
        // Secrets go with the wider network: a new run asks for them again.
        return { draft: { ...s.draft, task: '', network: defaults.network, allowlist: defaults.allowlist.join(' '), secrets: [] }, againFrom: undefined };
      }),
    }),
    {
      name: 'airlock.new-run-form',
      storage: createJSONStorage(sessionStore),
      partialize: (s) => ({ draft: s.draft, seeded: s.seeded, againFrom: s.againFrom }),
      // A draft saved by an older version lacks newer fields: they take their empty values.
      merge: (saved, current) => {
        const s = (saved ?? {}) as Partial<NewRunFormState>;
        return { ...current, ...s, draft: { ...EMPTY, ...s.draft } };
      },
    },
  ),
);

/** "Run again": the past run's settings into the form, then the form (the user starts it). */
export async function runAgain(runId: string): Promise<void> {
  const record = await api().call('runs:get', { runId });
  useNewRunForm.getState().fillFrom(runAgainInput(record), runId);
  useAppStore.getState().navigate({ name: 'new' });
}
