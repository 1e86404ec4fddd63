import { z } from 'zod';

/**
 * The user's MCP servers for runs (docs/architecture.md §20): the MCP servers screen calls the same
 * registry and tool listing as `airlock mcp-servers …`. A credential goes in once (`mcpServers:add`)
 * and straight to the OS keychain; nothing here ever returns it or a hint of it.
 */

/** What `--mcp NAME` takes and what prefixes the server's tools in the sandbox. */
export const McpServerName = z.string().trim().regex(/^[a-z][a-z0-9-]{0,23}$/, 'a server name is lower-case letters, digits and - (up to 24), starting with a letter');

/** How the credential travels: none, `Authorization: Bearer`, or a named header. */
export const McpServerAuthView = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('none') }),
  z.strictObject({ type: z.literal('bearer') }),
  z.strictObject({ type: z.literal('header'), name: z.string().trim().min(1).max(100).regex(/^[A-Za-z0-9-]+$/, 'a header name is letters, digits and -') }),
  /** Signed in on the host (browser sign-in); tokens in the keychain, refreshed there. */
  z.strictObject({ type: z.literal('oauth') }),
]);
export type McpServerAuthView = z.infer<typeof McpServerAuthView>;

export const McpToolRuleView = z.enum(['allow', 'ask', 'deny']);
export type McpToolRuleView = z.infer<typeof McpToolRuleView>;

/** One server as the UI sees it: where, how its credential travels, whether one is stored, its rules and pins. */
export const McpServerView = z.object({
  name: z.string(),
  /** The endpoint of a remote server; absent for a local (stdio) one. */
  url: z.string().optional(),
  transport: z.enum(['http', 'sse', 'stdio']),
  /** A local (stdio) server: what runs in its sidecar (an npm package or the command), never a secret value. */
  command: z.string().optional(),
  auth: McpServerAuthView,
  /** A credential is in the keychain (always false for `none`). */
  hasCredential: z.boolean(),
  /** The user's rules per tool (`*`: every tool without its own); a tool without one asks. */
  policy: z.record(z.string(), McpToolRuleView),
  /** How many tools' descriptions are pinned, and when (absent: never pinned, every tool asks). */
  pinnedTools: z.number(),
  pinnedAt: z.string().optional(),
  addedAt: z.string(),
});
export type McpServerView = z.infer<typeof McpServerView>;

/** One tool of a server as it offers it now, against the user's rule and pin. */
export const McpToolView = z.object({
  tool: z.string(),
  /** The server's own words (scrubbed of its credential). */
  description: z.string(),
  /** The server's claims, shown to help decide; never trusted to decide. */
  annotations: z.object({ readOnlyHint: z.boolean().optional(), destructiveHint: z.boolean().optional(), openWorldHint: z.boolean().optional() }),
  /** The rule that applies: its own, else `*`, else ask. */
  rule: McpToolRuleView,
  /** Whether the rule is the tool's own (not `*` or the default). */
  ownRule: z.boolean(),
  /** `same`: the pinned description; `changed` or `new`: asks before each call until pinned again. */
  pin: z.enum(['same', 'changed', 'new']),
});
export type McpToolView = z.infer<typeof McpToolView>;

/** A server another MCP client or the project configures: listed to import, never enabled by itself. */
export const ProposedMcpServerView = z.object({
  name: z.string(),
  /** Where it was found, e.g. the project's `.mcp.json`. */
  source: z.string(),
  transport: z.enum(['http', 'sse', 'stdio']),
  /** Origin and path only (a query may hold a token). */
  url: z.string().optional(),
  command: z.string().optional(),
  /** Header or environment names it sets (never their values). */
  secretNames: z.array(z.string()),
  /** A server of the user's already has this name (only that one is ever used). */
  added: z.boolean(),
});
export type ProposedMcpServerView = z.infer<typeof ProposedMcpServerView>;

/** The user's servers enabled for one project: its runs get them when none are named. */
export const ProjectMcpServersView = z.object({ projectDir: z.string(), servers: z.array(z.string()) });
export type ProjectMcpServersView = z.infer<typeof ProjectMcpServersView>;

export const mcpServersContracts = {
  /** The user's servers; with `projectDir`, also what that project's `.mcp.json` proposes (not enabled). */
  'mcpServers:list': {
    input: z.strictObject({ projectDir: z.string().min(1).max(4096).optional() }).default({}),
    output: z.object({ servers: z.array(McpServerView), proposed: z.array(ProposedMcpServerView), proposedFile: z.string().optional() }),
  },
  /**
   * Adds (or replaces) a server; a credential goes to the keychain only and is never returned. Then
   * connects, lists its tools and pins their descriptions (`pinError` when it could not: every tool asks).
   */
  'mcpServers:add': {
    input: z
      .strictObject({
        name: McpServerName,
        url: z.string().trim().min(1, 'give the server endpoint, e.g. https://mcp.example.com/mcp').max(2000),
        transport: z.enum(['http', 'sse']).default('http'),
        auth: McpServerAuthView,
        credential: z.string().max(16_384).optional(),
      })
      .superRefine((v, ctx) => {
        if (v.auth.type !== 'none' && v.auth.type !== 'oauth' && (v.credential ?? '').trim().length < 4) ctx.addIssue({ code: 'custom', path: ['credential'], message: 'the token is at least 4 characters' });
      }),
    output: z.object({ server: McpServerView, tools: z.array(McpToolView), pinError: z.string().optional() }),
  },
  /** Removes the server and its credential. */
  'mcpServers:remove': { input: z.strictObject({ name: z.string().min(1).max(40) }), output: z.object({ removed: z.boolean() }) },
  /** Connects now and lists the server's tools against the rules and pins (nothing is pinned). */
  'mcpServers:tools': { input: z.strictObject({ name: z.string().min(1).max(40) }), output: z.object({ tools: z.array(McpToolView), cut: z.boolean() }) },
  /** Sets one tool's rule (`*`: every tool without its own); `default` removes it (the tool asks). */
  'mcpServers:setRule': {
    input: z.strictObject({ name: z.string().min(1).max(40), tool: z.string().regex(/^(?:\*|[A-Za-z0-9_.-]{1,128})$/, 'a tool name or *'), rule: z.enum(['allow', 'ask', 'deny', 'default']) }),
    output: McpServerView,
  },
  /** Pins the tools' descriptions as the server offers them now (the user has seen them). */
  'mcpServers:pin': { input: z.strictObject({ name: z.string().min(1).max(40) }), output: z.object({ server: McpServerView, tools: z.array(McpToolView), cut: z.boolean() }) },
  /**
   * Signs in to an `auth: oauth` server on the host: the host opens the server's own sign-in page in
   * the user's browser (https, or http to loopback only) and answers once the tokens are in the keychain,
   * or with the error (refused, timed out after 5 minutes). The tokens never leave the host.
   */
  'mcpServers:login': { input: z.strictObject({ name: z.string().min(1).max(40) }), output: z.object({ server: McpServerView }) },
  /** The servers a project's runs get by default (enabled per project by the user); a project's `.mcp.json` never sets them. */
  'mcpServers:projectServers': { input: z.strictObject({ projectDir: z.string().min(1).max(4096) }), output: ProjectMcpServersView },
  /** Replaces the servers enabled for a project; each must be one of the user's servers. */
  'mcpServers:setProjectServers': { input: z.strictObject({ projectDir: z.string().min(1).max(4096), servers: z.array(McpServerName).max(50) }), output: ProjectMcpServersView },
} as const;
