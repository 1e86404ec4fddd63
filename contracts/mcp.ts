import { z } from 'zod';
import { RunId } from './ids';

/**
 * The MCP door (docs/architecture.md §17): `airlock mcp` over stdio, and the same server over
 * Streamable HTTP on 127.0.0.1 from the app (Settings switch `mcpHttp`, off by default). An MCP
 * client's `run_apply` waits for the user's yes here: the UI lists what is asked and answers it.
 */

/** A client's request to apply a reviewed result to the project, waiting for the user. */
export const McpApplyRequest = z.object({
  requestId: z.string().regex(/^[0-9a-f]{32}$/),
  runId: RunId,
  /** The MCP client as it named itself (a claim: shown as such). */
  client: z.string(),
  projectDir: z.string(),
  /** Where the apply would go: the project (or `targetDir`). */
  target: z.string(),
  mode: z.enum(['working-tree', 'branch']),
  branch: z.string().optional(),
  /** The files of the reviewed patch and its digest: apply writes exactly these bytes or nothing. */
  files: z.array(z.string()),
  reviewedSha256: z.string().regex(/^[0-9a-f]{64}$/),
  patchBytes: z.number().int().nonnegative(),
  /** Review's risky-file flags of these files (docs/architecture.md §11): shown to the user, never applied without a yes. */
  flags: z.array(z.object({ path: z.string(), reason: z.string() })).optional(),
  requestedAt: z.string(),
  expiresAt: z.string(),
});
export type McpApplyRequest = z.infer<typeof McpApplyRequest>;

/**
 * What the user grants MCP clients in one project folder (Settings → MCP, docs/architecture.md §17):
 * the folder and its subfolders may be copied into sandboxes and runs; the network at most `allow`
 * (and `open` only with `openNetwork`); gateway secrets only those named; `continueRuns` lets a
 * client continue runs of this project it did not start.
 */
export const McpProjectGrant = z.strictObject({
  dir: z.string().min(1).max(4096),
  allow: z.array(z.string().min(1).max(253)).max(200).optional(),
  openNetwork: z.boolean().optional(),
  secrets: z.array(z.string().regex(/^[a-z][a-z0-9_-]{0,39}$/)).max(20).optional(),
  continueRuns: z.boolean().optional(),
});
export type McpProjectGrant = z.infer<typeof McpProjectGrant>;

/** A client asks for a folder the user has not granted; the app asks the user ("Claude Code wants a sandbox of ~/src/app"). */
export const McpFolderRequest = z.object({
  requestId: z.string().regex(/^[0-9a-f]{32}$/),
  /** The MCP client as it named itself (a claim: shown as such). */
  client: z.string(),
  /** The folder, resolved on the host (symbolic links followed). */
  projectDir: z.string(),
  /** What for: a sandbox (`sandbox_create`) or an agent run (`run_start`). */
  purpose: z.enum(['sandbox', 'run']),
  requestedAt: z.string(),
  expiresAt: z.string(),
});
export type McpFolderRequest = z.infer<typeof McpFolderRequest>;

/** The door over HTTP and how to set clients up (Settings shows it with copy buttons). */
export const McpInfo = z.object({
  http: z.object({
    enabled: z.boolean(),
    /** `http://127.0.0.1:<port>/mcp` while enabled. */
    url: z.string().optional(),
    /** The bearer token clients send (`Authorization: Bearer …`); new each time the app starts the door. */
    token: z.string().optional(),
    error: z.string().optional(),
  }),
  /** One-line setups: `claude mcp add …`, a Codex `config.toml` block, a Cursor / VS Code `mcp.json`. */
  setup: z.array(z.object({ client: z.string(), label: z.string(), text: z.string() })),
  /** The command the stdio lines start, and whether a bare `airlock` is on the PATH. */
  command: z.object({ text: z.string(), onPath: z.boolean() }),
});
export type McpInfo = z.infer<typeof McpInfo>;

export const mcpContracts = {
  'mcp:info': { input: z.strictObject({}).default({}), output: McpInfo },
  /** Starts the stdio setup lines' command as a client would and lists its tools (Settings → MCP → Test). */
  'mcp:testSetup': {
    input: z.strictObject({}).default({}),
    output: z.object({ ok: z.boolean(), tools: z.number().int().nonnegative(), ms: z.number().nonnegative(), error: z.string().optional() }),
  },
  /** Apply requests from MCP clients waiting for the user's answer, oldest first. */
  'mcp:applyRequests': { input: z.strictObject({}).default({}), output: z.array(McpApplyRequest) },
  /** The user's answer to an apply request; `answered: false` when it expired or was answered already. */
  'mcp:answerApply': {
    input: z.strictObject({ requestId: McpApplyRequest.shape.requestId, approved: z.boolean() }),
    output: z.object({ answered: z.boolean() }),
  },
  /** Folders MCP clients asked for that the user has not granted, oldest first. */
  'mcp:folderRequests': { input: z.strictObject({}).default({}), output: z.array(McpFolderRequest) },
  /**
   * The user's answer to a folder request; `remember` adds the folder to the grants in Settings
   * (`mcpProjects`). `answered: false` when it expired or was answered already.
   */
  'mcp:answerFolder': {
    input: z.strictObject({ requestId: McpFolderRequest.shape.requestId, approved: z.boolean(), remember: z.boolean().optional() }),
    output: z.object({ answered: z.boolean() }),
  },
} as const;

export const mcpEvents = {
  /** The waiting folder requests changed: refetch `mcp:folderRequests`. */
  'mcp:onDidChangeFolderRequests': z.object({ count: z.number().int().nonnegative() }),
  /** The waiting apply requests changed: refetch `mcp:applyRequests`. */
  'mcp:onDidChangeApplyRequests': z.object({ count: z.number().int().nonnegative() }),
} as const;
