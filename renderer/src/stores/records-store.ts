import { create } from 'zustand';
import type { AuditRecordView, AuditVerifyResult, ChannelInput, ChannelOutput, Comparison, DebugNote, FolderListing, SecretView } from '../../../contracts';
import { api } from '../api';

/** Records read per call; a run's log is read whole, page by page. */
const AUDIT_PAGE = 1000;
/** A log longer than this is shown in part (the CLI's `airlock audit` reads it all). */
export const MAX_AUDIT_RECORDS = 20_000;

/** A run's audit log as read for the UI: the chain's verdict and its records (at most MAX_AUDIT_RECORDS). */
export interface AuditLogRead {
  verify: AuditVerifyResult;
  records: AuditRecordView[];
  total: number;
}

interface RecordsState {
  /** The run's audit log (and apply log) with the verification of its hash chain, through `audit:*`. */
  readAuditLog(runId: string): Promise<AuditLogRead>;
  compareAttempts(groupId: string): Promise<Comparison>;
  exportAttempts(groupId: string, format: 'markdown' | 'json'): Promise<ChannelOutput<'attempts:export'>>;
  /** Calls `listener` when the attempt group changes; returns the unsubscribe. */
  onAttemptsChange(groupId: string, listener: () => void): () => void;
  /** The errors Airlock handled by itself (core/common/debug-log.ts). */
  debugLog(): Promise<DebugNote[]>;
  /** Folders under the user's home (the browser UI's folder chooser). */
  listFolders(path?: string): Promise<FolderListing>;
  listEnvironments(): Promise<ChannelOutput<'environments:list'>>;
  pruneEnvironments(): Promise<ChannelOutput<'environments:prune'>>;
  /** The project's environments as the core finds them (the New run form's environment field). */
  findEnvironments(projectDir: string, environment?: string): Promise<ChannelOutput<'environments:find'>>;
  /** What the chosen environment will build and run (`airlock env plan`'s text). */
  environmentPlan(projectDir: string, environment: string): Promise<string>;
  /** The OS folder picker where there is one (`native: false` in the browser UI). */
  pickFolder(defaultPath?: string): Promise<ChannelOutput<'projects:pickFolder'>>;
  listSecrets(): Promise<SecretView[]>;
  setSecret(input: ChannelInput<'secrets:set'>): Promise<ChannelOutput<'secrets:set'>>;
  removeSecret(name: string): Promise<void>;
}

/**
 * What the screens read from the host and keep themselves (audit logs, attempt comparisons, the
 * debug log, folders, prepared environments, secrets): components call these, never the host
 * directly (docs/architecture.md §5).
 */
export const useRecordsStore = create<RecordsState>()(() => ({
  async readAuditLog(runId) {
    const verify = await api().call('audit:verify', { runId });
    const records: AuditRecordView[] = [];
    let total = 0;
    for (let offset = 0; offset < MAX_AUDIT_RECORDS; offset += AUDIT_PAGE) {
      const page = await api().call('audit:read', { runId, offset, limit: AUDIT_PAGE });
      records.push(...page.records);
      total = page.total;
      if (offset + AUDIT_PAGE >= page.total) break;
    }
    return { verify, records, total };
  },
  compareAttempts: (groupId) => api().call('attempts:compare', { groupId }),
  exportAttempts: (groupId, format) => api().call('attempts:export', { groupId, format }),
  onAttemptsChange: (groupId, listener) =>
    api().on('attempts:onDidChange', (e) => {
      if (e.groupId === groupId) listener();
    }),
  debugLog: async () => (await api().call('sandboxes:debugLog', {})).notes,
  listFolders: (path) => api().call('projects:listFolders', path ? { path } : {}),
  listEnvironments: () => api().call('environments:list', {}),
  pruneEnvironments: () => api().call('environments:prune', {}),
  findEnvironments: (projectDir, environment) => api().call('environments:find', { projectDir, ...(environment ? { environment } : {}) }),
  environmentPlan: async (projectDir, environment) => (await api().call('environments:plan', { projectDir, environment })).text,
  pickFolder: (defaultPath) => api().call('projects:pickFolder', defaultPath ? { defaultPath } : {}),
  listSecrets: () => api().call('secrets:list', {}),
  setSecret: (input) => api().call('secrets:set', input),
  async removeSecret(name) {
    await api().call('secrets:remove', { name });
  },
}));
