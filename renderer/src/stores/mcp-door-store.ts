import { create } from 'zustand';
import type { ChannelOutput, McpApplyRequest, McpFolderRequest, McpInfo } from '../../../contracts';
import { api } from '../api';

interface McpDoorState {
  /** The door's address, setup lines and command (docs/architecture.md §17 "Setup lines"). */
  info(): Promise<McpInfo>;
  /** Starts the setup lines' command as a stdio client would and lists its tools. */
  testSetup(): Promise<ChannelOutput<'mcp:testSetup'>>;
  applyRequests(): Promise<McpApplyRequest[]>;
  /** The host's own rendering of the patch a client asks to apply (its digest is compared with the client's). */
  previewPatch(runId: string, files: string[]): Promise<ChannelOutput<'diffs:preview'>>;
  answerApply(requestId: string, approved: boolean): Promise<boolean>;
  folderRequests(): Promise<McpFolderRequest[]>;
  answerFolder(requestId: string, approved: boolean, remember: boolean): Promise<boolean>;
  /** Calls `listener` when the waiting apply or folder requests change; returns the unsubscribe. */
  onRequestsChange(kind: 'apply' | 'folder', listener: () => void): () => void;
}

/**
 * The MCP door as the Settings panel and the request banners see it: components call these, never
 * the host directly (docs/architecture.md §5 "Screens and their hooks").
 */
export const useMcpDoorStore = create<McpDoorState>()(() => ({
  info: () => api().call('mcp:info', {}),
  testSetup: () => api().call('mcp:testSetup', {}),
  applyRequests: () => api().call('mcp:applyRequests', {}),
  previewPatch: (runId, files) => api().call('diffs:preview', { runId, files }),
  answerApply: async (requestId, approved) => (await api().call('mcp:answerApply', { requestId, approved })).answered,
  folderRequests: () => api().call('mcp:folderRequests', {}),
  answerFolder: async (requestId, approved, remember) => (await api().call('mcp:answerFolder', { requestId, approved, remember })).answered,
  onRequestsChange: (kind, listener) => api().on(kind === 'apply' ? 'mcp:onDidChangeApplyRequests' : 'mcp:onDidChangeFolderRequests', listener),
}));
