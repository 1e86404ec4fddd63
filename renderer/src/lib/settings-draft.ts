import { DEFAULT_GIT_HISTORY, type AgentKind, type ApprovalMode, type EngineSetting, type GitHistory, type Isolation, type NetworkPolicy, type Settings, type ThemeSetting, type VmAccelSetting } from '../../../contracts';
import type { GitMode } from './option-labels';

/** The form as typed: numbers as text until Save. */
export interface SettingsDraft {
  theme: ThemeSetting;
  notifications: boolean;
  transcripts: boolean;
  defaultAgent: AgentKind;
  defaultApproval: ApprovalMode;
  defaultIsolation: Isolation;
  defaultNetwork: NetworkPolicy;
  timeoutMin: string;
  gitMode: GitMode;
  gitCommits: string;
  vmAccel: VmAccelSetting;
  engine: EngineSetting;
  engineHost: string;
  engineAllowInsecure: boolean;
  /** The MCP door over HTTP on loopback (docs/architecture.md §17); saved with the rest, never on its own. */
  mcpHttp: boolean;
}

/** The form as the saved settings fill it. */
export function draftOf(s: Settings): SettingsDraft {
  const git = s.gitHistory ?? DEFAULT_GIT_HISTORY;
  return {
    theme: s.theme,
    notifications: s.notifications,
    transcripts: s.transcripts,
    defaultAgent: s.defaultAgent,
    defaultApproval: s.defaultApproval,
    defaultIsolation: s.defaultIsolation,
    defaultNetwork: s.defaultNetwork,
    timeoutMin: String(Math.max(1, Math.round(s.defaultTimeoutSec / 60))),
    gitMode: typeof git === 'number' ? 'commits' : git,
    gitCommits: String(typeof git === 'number' ? git : DEFAULT_GIT_HISTORY),
    vmAccel: s.vmAccel ?? 'auto',
    engine: s.engine ?? 'auto',
    engineHost: s.engineHost ?? '',
    engineAllowInsecure: s.engineAllowInsecure === true,
    mcpHttp: s.mcpHttp === true,
  };
}

/** What Save sends: the fields that differ from the saved settings, or a problem with a field. */
export function patchOf(d: SettingsDraft, s: Settings): { patch: Partial<Settings> } | { field: 'timeoutMin' | 'gitCommits'; problem: string } {
  const minutes = Number(d.timeoutMin);
  if (!Number.isFinite(minutes) || minutes < 1 || minutes > 7 * 24 * 60) return { field: 'timeoutMin', problem: 'Enter a time limit from 1 minute to 7 days (10080 minutes).' };
  const commits = Number(d.gitCommits);
  if (d.gitMode === 'commits' && (!Number.isInteger(commits) || commits < 1 || commits > 1_000_000)) return { field: 'gitCommits', problem: 'Enter a whole number of commits from 1 to 1000000, or choose None or All.' };
  const gitHistory: GitHistory = d.gitMode === 'commits' ? commits : d.gitMode;
  const next: Partial<Settings> = {
    theme: d.theme,
    notifications: d.notifications,
    transcripts: d.transcripts,
    defaultAgent: d.defaultAgent,
    defaultApproval: d.defaultApproval,
    defaultIsolation: d.defaultIsolation,
    defaultNetwork: d.defaultNetwork,
    defaultTimeoutSec: Math.round(minutes * 60),
    gitHistory,
    vmAccel: d.vmAccel,
    engine: d.engine,
    engineHost: d.engineHost.trim(),
    engineAllowInsecure: d.engineAllowInsecure,
    mcpHttp: d.mcpHttp,
  };
  const saved = draftOf(s);
  const was: Partial<Settings> = { ...s, gitHistory: s.gitHistory ?? DEFAULT_GIT_HISTORY, vmAccel: saved.vmAccel, engine: saved.engine, engineHost: saved.engineHost, engineAllowInsecure: saved.engineAllowInsecure, mcpHttp: saved.mcpHttp };
  const patch: Partial<Settings> = {};
  for (const [k, v] of Object.entries(next) as Array<[keyof Settings, unknown]>) {
    if (v !== was[k]) (patch as Record<string, unknown>)[k] = v;
  }
  return { patch };
}

/**
 * The settings were saved elsewhere (the sidebar's theme, another window): the fields not edited
 * here take the new values; the ones being edited stay as typed.
 */
export function followSaved(draft: SettingsDraft, before: Settings, now: Settings): SettingsDraft {
  const was = draftOf(before);
  const next = draftOf(now);
  const out = { ...draft };
  for (const k of Object.keys(next) as Array<keyof SettingsDraft>) if (draft[k] === was[k]) (out as Record<string, unknown>)[k] = next[k];
  return out;
}
