import { create } from 'zustand';
import type { ChannelArgs, ChannelOutput, McpServerView } from '../../../contracts';
import { api, errorMessage } from '../api';

type ToolsOf = ChannelOutput<'mcpServers:tools'>;
type Listing = ChannelOutput<'mcpServers:list'>;

interface McpServersState {
  /** The user's servers; undefined until loaded. */
  servers?: McpServerView[];
  /** Why the list could not be loaded. */
  error?: string;
  /** Each opened server's tools as it offers them now. */
  tools: Record<string, ToolsOf>;
  /** What the user's other clients and a project configure (proposals), as last read. */
  proposals?: Listing;
  /** The servers enabled per project, by project folder, as last read or saved. */
  projects: Record<string, string[]>;
  load(): Promise<void>;
  /** Adds a server (a token goes to the keychain in the same call); the list is read again. */
  add(input: ChannelArgs<'mcpServers:add'>): Promise<ChannelOutput<'mcpServers:add'>>;
  remove(name: string): Promise<void>;
  loadTools(name: string): Promise<void>;
  setRule(name: string, tool: string, rule: ChannelArgs<'mcpServers:setRule'>['rule']): Promise<void>;
  pin(name: string): Promise<ChannelOutput<'mcpServers:pin'>>;
  /** Signs in to an OAuth server on the host (the browser opens its page); resolves when signed in. */
  login(name: string): Promise<McpServerView>;
  lookForProposals(projectDir?: string): Promise<void>;
  /** The servers enabled for a project (read once per folder unless `fresh`). */
  projectServers(projectDir: string, fresh?: boolean): Promise<string[]>;
  setProjectServers(projectDir: string, servers: string[]): Promise<string[]>;
}

/**
 * The MCP servers screen's data (docs/architecture.md §20): the only place the renderer calls the
 * `mcpServers:*` contracts. Nothing here ever holds a token: `add` passes one through once.
 */
export const useMcpServersStore = create<McpServersState>()((set, get) => {
  const replace = (server: McpServerView) => set((s) => ({ servers: (s.servers ?? []).map((x) => (x.name === server.name ? server : x)) }));
  return {
    tools: {},
    projects: {},
    async load() {
      try {
        const list = await api().call('mcpServers:list', {});
        set({ servers: list.servers, error: undefined });
      } catch (err) {
        set({ error: errorMessage(err) });
      }
    },
    async add(input) {
      const added = await api().call('mcpServers:add', input);
      await get().load();
      return added;
    },
    async remove(name) {
      await api().call('mcpServers:remove', { name });
      set((s) => {
        const { [name]: _gone, ...tools } = s.tools;
        return { tools };
      });
      await get().load();
    },
    async loadTools(name) {
      const tools = await api().call('mcpServers:tools', { name });
      set((s) => ({ tools: { ...s.tools, [name]: tools } }));
    },
    async setRule(name, tool, rule) {
      replace(await api().call('mcpServers:setRule', { name, tool, rule }));
      await get().loadTools(name);
    },
    async pin(name) {
      const pinned = await api().call('mcpServers:pin', { name });
      replace(pinned.server);
      set((s) => ({ tools: { ...s.tools, [name]: { tools: pinned.tools, cut: pinned.cut } } }));
      return pinned;
    },
    async login(name) {
      const { server } = await api().call('mcpServers:login', { name });
      replace(server);
      return server;
    },
    async lookForProposals(projectDir) {
      set({ proposals: await api().call('mcpServers:list', projectDir ? { projectDir } : {}) });
    },
    async projectServers(projectDir, fresh = false) {
      const known = get().projects[projectDir];
      if (known && !fresh) return known;
      const { servers } = await api().call('mcpServers:projectServers', { projectDir });
      set((s) => ({ projects: { ...s.projects, [projectDir]: servers } }));
      return servers;
    },
    async setProjectServers(projectDir, servers) {
      const saved = await api().call('mcpServers:setProjectServers', { projectDir, servers });
      set((s) => ({ projects: { ...s.projects, [projectDir]: saved.servers } }));
      return saved.servers;
    },
  };
});
