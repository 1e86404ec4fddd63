import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { AirlockError } from '../../contracts/errors';
import type { AirlockServices } from '../api/services';
import type { AirlockCore } from '../app';
import { APP_VERSION } from '../common/app-version';
import { newClientRef, SlotCap, type ClientGrants } from '../runs/client-grants';
import { registerApplyTool } from './apply-tool';
import type { ApplyApprovals } from './apply-approvals';
import { ConnectionSandboxes } from './connection-sandboxes';
import type { KeptSandboxes } from './kept-sandboxes';
import { DEFAULT_MCP_LIMITS, type McpLimits } from './mcp-limits';
import { registerRunResources } from './mcp-resources';
import { mcpToolRegistrar, type McpToolContext } from './mcp-tool-context';
import { registerRunTools } from './run-tools';
import { registerSandboxTools } from './sandbox-tools';

/** What the MCP door is built on: the same core and services as the CLI and the UI (§17). */
export interface McpDeps {
  core: AirlockCore;
  services: AirlockServices;
  approvals: ApplyApprovals;
  /** What a client may do: folders, network, secrets, continuations (docs/architecture.md §17). */
  grants: ClientGrants;
  /** `airlock mcp --project DIR…`: folders granted to this server's clients besides Settings. */
  projects?: readonly string[];
  /** `airlock mcp --allow-apply`: run_apply in a granted folder, of no flagged file, goes ahead without asking, recorded as such. */
  allowApply: boolean;
  limits?: Partial<McpLimits>;
  /** Where the user answers apply requests, for the refusal text. */
  approveHint?: string;
  /**
   * Sandboxes that outlive their connection (`sandbox_create {keep: true}`, §17 "Kept sandboxes"):
   * only the stdio worker has them; without it `keep` is refused.
   */
  kept?: KeptSandboxes;
}

/** What one connection was started with, when its process serves several (the stdio worker). */
export interface McpConnectionOptions {
  /** `airlock mcp --project DIR…` of this connection's own command. */
  projects: readonly string[];
  /** `airlock mcp --allow-apply` of this connection's own command. */
  allowApply: boolean;
}

/** One client's connection: its server and the sandboxes it made (wiped when it goes). */
export interface McpConnection {
  readonly server: McpServer;
  /** Sandboxes (MCP session run ids) this client holds. */
  readonly sandboxes: ReadonlySet<string>;
  /** Wipes every sandbox of this client (disconnect); resolves when they are gone. */
  close(reason: string): Promise<void>;
}

/**
 * The MCP server of one client connection (docs/architecture.md §17): the tools and resources
 * over Airlock's own services. Sandboxes are MCP sessions of the run service — recorded, audited,
 * capped and wiped like runs; commands run by the host and recorded first-hand; apply only with the
 * user's yes (or `--allow-apply`). Nothing returned carries a key, a credential or a run token.
 */
export function createMcpConnection(depsOrPromise: McpDeps | Promise<McpDeps>, limitsIn: Partial<McpLimits> = {}, own?: McpConnectionOptions): McpConnection {
  // The core may still be starting (stdio answers the client's initialize at once); tools wait for it.
  const ready = Promise.resolve(depsOrPromise);
  let deps: McpDeps | undefined;
  void ready.then((d) => (deps = d), () => undefined);
  const the = (): McpDeps => {
    if (!deps) throw new AirlockError('INTERNAL', 'Airlock is still starting');
    return deps;
  };
  const limits: McpLimits = { ...DEFAULT_MCP_LIMITS, ...limitsIn, ...(depsOrPromise instanceof Promise ? {} : depsOrPromise.limits) };
  const server = new McpServer({ name: 'airlock', version: APP_VERSION }, { instructions: 'Airlock gives you disposable, isolated sandboxes on a copy of a project on this machine. sandbox_create → sandbox_exec / sandbox_write_file → sandbox_diff → sandbox_destroy; the result is applied to the real project only with run_apply and the user\'s yes in Airlock.' });
  const clientName = () => {
    const v = server.server.getClientVersion();
    return v ? `${v.name.slice(0, 80)} ${v.version.slice(0, 40)}`.trim() : 'unknown MCP client';
  };
  const client = newClientRef(clientName, () => own?.projects ?? deps?.projects ?? []);
  const sandboxes = new ConnectionSandboxes({ started: () => deps, deps: the, client, clientName, limits });
  const ctx: McpToolContext = {
    deps: the,
    limits,
    client,
    clientName,
    allowApply: () => own?.allowApply ?? the().allowApply,
    sandboxes,
    // Caps are taken synchronously, before any await, so concurrent calls cannot all pass the check.
    runSlots: new SlotCap(limits.runsPerClient),
    tool: mcpToolRegistrar(server, ready),
  };
  registerSandboxTools(ctx);
  registerRunTools(ctx);
  registerApplyTool(ctx);
  registerRunResources(server, async () => { await ready; return the(); }, limits);

  return {
    server,
    sandboxes: sandboxes.made,
    close: (reason) => sandboxes.close(reason),
  };
}
