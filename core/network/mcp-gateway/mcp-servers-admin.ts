import type { McpServerView, McpToolView, ProposedMcpServerView } from '../../../contracts/mcp-servers';
import type { AppContext } from '../../app-context';
import { McpServerRegistry, type McpAuth, type McpServerEntry, type McpServerSummary } from './mcp-server-registry';
import { toolStanding } from './mcp-tool-policy';
import { readClientMcpConfigs } from './client-mcp-configs';
import { readProjectMcpConfig } from './project-mcp-config';
import { ProjectMcpDefaults } from './project-mcp-defaults';
import { AirlockError } from '../../../contracts/errors';
import { listServerTools, type ListedTool } from './run-mcp-gateway';

/**
 * What `airlock mcp-servers …` and the app's MCP servers screen both do with the registry
 * (docs/architecture.md §20): one implementation, two doors. Nothing here returns a credential.
 */

/** The registry of the app's home and keychain service (the provider keys' service, its own accounts), so CLI and app agree. */
export function mcpServerRegistryFor(app: Pick<AppContext, 'home' | 'keychainService'>): McpServerRegistry {
  return new McpServerRegistry({ home: app.home, service: app.keychainService });
}

/** An entry as shown: never the credential, only whether one is stored. */
export function mcpServerView(s: McpServerSummary): McpServerView {
  return {
    name: s.name,
    ...(s.url ? { url: s.url } : {}),
    transport: s.transport,
    ...(s.stdio ? { command: s.stdio.package ? `npm ${s.stdio.package}` : s.stdio.command.join(' ').slice(0, 200) } : {}),
    auth: s.auth,
    hasCredential: s.hasCredential,
    policy: { ...(s.policy ?? {}) },
    pinnedTools: Object.keys(s.pins ?? {}).length,
    ...(s.pinnedAt ? { pinnedAt: s.pinnedAt } : {}),
    addedAt: s.addedAt,
  };
}

/** Each tool the server offers now, against the entry's rules and pins. */
export function mcpToolViews(entry: Pick<McpServerEntry, 'policy' | 'pins'>, tools: readonly ListedTool[]): McpToolView[] {
  return tools.map((t) => {
    const standing = toolStanding(entry, t);
    return { tool: t.tool, description: t.description, annotations: t.annotations, rule: standing.rule, ownRule: entry.policy?.[t.tool] !== undefined, pin: standing.pin };
  });
}

async function summaryOf(registry: McpServerRegistry, name: string): Promise<McpServerSummary> {
  const found = (await registry.list()).find((s) => s.name === name);
  if (!found) throw new Error(`MCP server ${name} vanished`);
  return found;
}

/** Connects with the stored credential and lists the tools now (nothing pinned). */
export async function currentTools(registry: McpServerRegistry, name: string): Promise<{ entry: McpServerEntry; tools: ListedTool[]; cut: boolean }> {
  const [server] = await registry.resolve([name]);
  const { tools, cut } = await listServerTools(server!);
  return { entry: server!.entry, tools, cut };
}

/** Connects, lists the tools and pins their descriptions as offered now (the user is shown them). */
export async function pinServerTools(registry: McpServerRegistry, name: string): Promise<{ entry: McpServerEntry; tools: ListedTool[]; cut: boolean }> {
  const { tools, cut } = await currentTools(registry, name);
  const entry = await registry.pin(name, tools);
  return { entry, tools, cut };
}

/** Adds a server (credential to the keychain only), then tries to pin its tools; unreachable: kept unpinned. */
export async function addMcpServer(
  registry: McpServerRegistry,
  input: { name: string; url: string; transport: 'http' | 'sse'; auth: McpAuth },
  credential: string | undefined,
): Promise<{ server: McpServerView; tools: McpToolView[]; pinError?: string }> {
  await registry.add(input, credential);
  try {
    const { entry, tools } = await pinServerTools(registry, input.name);
    return { server: mcpServerView(await summaryOf(registry, input.name)), tools: mcpToolViews(entry, tools) };
  } catch (err) {
    // Kept, unpinned: every tool asks until pinned, so nothing is trusted unseen.
    return { server: mcpServerView(await summaryOf(registry, input.name)), tools: [], pinError: (err as Error).message.slice(0, 300) };
  }
}

/** Where the user's other MCP clients keep their configurations: the user's home folder and the environment naming Codex's and VS Code's. */
export interface ClientConfigPlaces {
  userHome: string;
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * The user's servers and, as proposals never enabled by being there: what a project's `.mcp.json`
 * proposes (with `projectDir`) and what the user's other MCP clients configure (with `clients`).
 */
export async function listMcpServers(registry: McpServerRegistry, projectDir?: string, clients?: ClientConfigPlaces): Promise<{ servers: McpServerView[]; proposed: ProposedMcpServerView[]; proposedFile?: string }> {
  const all = await registry.list();
  const servers = all.map(mcpServerView);
  const added = (name: string) => all.some((s) => s.name === name);
  const proposed: ProposedMcpServerView[] = [];
  let proposedFile: string | undefined;
  if (projectDir) {
    const project = await readProjectMcpConfig(projectDir);
    proposedFile = project.file;
    proposed.push(...project.servers.map((p) => ({ ...p, source: project.file, added: added(p.name) })));
  }
  if (clients) {
    const found = await readClientMcpConfigs({ userHome: clients.userHome, ...(projectDir ? { projectDir } : {}), ...(clients.env ? { env: clients.env } : {}) });
    for (const c of found) proposed.push(...c.servers.map((p) => ({ ...p, source: c.source, added: added(p.name) })));
  }
  return { servers, proposed, ...(proposedFile ? { proposedFile } : {}) };
}

/** A server entry as the screen shows it after a change. */
export async function mcpServerViewOf(registry: McpServerRegistry, name: string): Promise<McpServerView> {
  return mcpServerView(await summaryOf(registry, name));
}

/**
 * Opens a sign-in page only when it is one Airlock may hand to the browser: https, or http to the
 * host's loopback (a local authorization server). A `javascript:`, `file:` or other URL from a
 * server's metadata is refused, never opened.
 */
export function checkedSignInUrl(url: URL): string {
  const loopback = url.hostname === '127.0.0.1' || url.hostname === 'localhost' || url.hostname === '[::1]';
  if (url.protocol === 'https:' || (url.protocol === 'http:' && loopback)) return url.href;
  throw new AirlockError('INVALID_INPUT', `the sign-in page of this MCP server is not https (${url.protocol.slice(0, 20)}); Airlock does not open it`);
}

/** Signs in to an OAuth server on the host (`open` shows the checked sign-in page); the view after it. */
export async function loginMcpServer(registry: McpServerRegistry, name: string, open: (url: string) => Promise<void>): Promise<McpServerView> {
  await registry.login(name, (url) => open(checkedSignInUrl(url)));
  return mcpServerViewOf(registry, name);
}

/** The servers enabled for a project, without names the registry no longer holds. */
export async function projectMcpServers(registry: McpServerRegistry, home: string, projectDir: string): Promise<{ projectDir: string; servers: string[] }> {
  const names = new Set((await registry.list()).map((s) => s.name));
  const servers = (await new ProjectMcpDefaults(projectDir, home).load()).filter((n) => names.has(n));
  return { projectDir, servers };
}

/** Enables exactly these of the user's servers for a project (an unknown name is refused). */
export async function setProjectMcpServers(registry: McpServerRegistry, home: string, projectDir: string, servers: readonly string[]): Promise<{ projectDir: string; servers: string[] }> {
  const names = new Set((await registry.list()).map((s) => s.name));
  const unknown = servers.find((n) => !names.has(n));
  if (unknown) throw new AirlockError('NOT_FOUND', `no MCP server named "${unknown.slice(0, 40)}" (add it first)`, { field: 'servers' });
  return { projectDir, servers: await new ProjectMcpDefaults(projectDir, home).save(servers) };
}
