import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ResourceLink, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { z } from 'zod';
import { toErrorInfo } from '../../contracts/errors';
import { RunId } from '../../contracts/ids';
import type { ClientRef, SlotCap } from '../runs/client-grants';
import type { ConnectionSandboxes } from './connection-sandboxes';
import type { McpLimits } from './mcp-limits';
import type { McpDeps } from './mcp-server';
import { debugLog } from '../common/debug-log';

/**
 * Titles and behaviour hints of every tool (clients decide from these what to confirm). "Destructive"
 * means to the user's machine: what a tool does inside a disposable sandbox is not (the sandbox is the
 * boundary); destroying a sandbox, cancelling a run and applying a result to the project are.
 */
const TOOL_META = {
  sandbox_create: { title: 'Create a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  sandbox_list: { title: 'List my sandboxes', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_exec: { title: 'Run a command in a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  sandbox_read_file: { title: 'Read a sandbox file', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_write_file: { title: 'Write a sandbox file', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_list_files: { title: 'List a sandbox folder', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_diff: { title: "A sandbox's changes", readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_publish_port: { title: 'Publish a sandbox port on loopback', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_destroy: { title: 'Destroy a sandbox', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  run_start: { title: 'Start an agent run', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  run_status: { title: "A run's status", readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  run_result: { title: "A run's result", readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  run_continue: { title: 'Continue a run', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  run_cancel: { title: 'Cancel a run', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  run_apply: { title: 'Apply a result to the project (asks the user)', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
} as const;

/** The name of one of the door's tools. */
export type McpToolName = keyof typeof TOOL_META;

/** What the SDK hands a tool's handler besides its arguments: the cancel signal, progress token, notifications. */
export type McpToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** A tool's answer: the structured value, its readable text, and links to resources. */
export interface McpToolAnswer<O> {
  value: O;
  text: string;
  links?: ResourceLink[];
}

/** Registers one tool: its handler returns the structured value and its readable text. */
export type RegisterMcpTool = <I extends z.ZodObject, O extends z.ZodObject>(
  name: McpToolName,
  description: string,
  input: I,
  output: O,
  handler: (args: z.output<I>, extra: McpToolExtra) => Promise<McpToolAnswer<z.output<O>>>,
) => void;

/**
 * The tool registration of one connection's server: each call waits for `ready` (the core may still be
 * starting) and a thrown error becomes the tool's error result (`KIND: message`).
 */
export function mcpToolRegistrar(server: McpServer, ready: Promise<unknown>): RegisterMcpTool {
  return (name, description, input, output, handler) => {
    const { title, ...annotations } = TOOL_META[name];
    server.registerTool(name, { title, description, inputSchema: input, outputSchema: output, annotations: { title, ...annotations } }, (async (args: z.output<typeof input>, extra: McpToolExtra): Promise<CallToolResult> => {
      try {
        await ready;
        const { value, text, links = [] } = await handler(args, extra);
        return { content: [{ type: 'text', text }, ...links], structuredContent: value as Record<string, unknown> };
      } catch (err) {
        const info = toErrorInfo(err);
        return { isError: true, content: [{ type: 'text', text: `${info.kind}: ${info.message}` }] };
      }
    }) as never);
  };
}

/** Sends one progress message of a call (nothing when the client asked for none). */
export type ProgressSay = ((message: string) => void) & { flushed(): Promise<unknown> };

/**
 * Progress notifications for one call. `flushed()` resolves once every one sent so far is written:
 * the SDK sends a notification asynchronously, so a result returned at once could overtake the last
 * output chunk, and the client drops progress that arrives after its result.
 */
export function progressFor(extra: McpToolExtra): ProgressSay {
  const token = extra._meta?.progressToken;
  let n = 0;
  let sent: Promise<unknown> = Promise.resolve();
  const say = (message: string) => {
    if (token === undefined) return;
    n += 1;
    // A progress note the client cannot take is no reason to fail the call.
    const next = extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: n, message } }).catch(debugLog.swallow('mcp.progress'));
    sent = Promise.all([sent, next]);
  };
  return Object.assign(say, { flushed: () => sent });
}

/** What the tools of one connection work with (docs/architecture.md §17). */
export interface McpToolContext {
  /** The door's core, services, grants and approvals; only called once the core has started (tools wait for it). */
  deps(): McpDeps;
  readonly limits: McpLimits;
  /** This client, for grants and the audit log. */
  readonly client: ClientRef;
  /** The client's name as it gave it (cut), for records. */
  clientName(): string;
  /** `airlock mcp --allow-apply` for this connection. */
  allowApply(): boolean;
  /** The sandboxes this connection made or re-attached to. */
  readonly sandboxes: ConnectionSandboxes;
  /** Agent runs this client has in progress (taken before any await). */
  readonly runSlots: SlotCap;
  readonly tool: RegisterMcpTool;
}

export const SandboxId = RunId.describe('the sandboxId sandbox_create returned');
export const ChangedFileOut = z.object({ path: z.string(), oldPath: z.string().optional(), status: z.string(), binary: z.boolean(), additions: z.number(), deletions: z.number() });
export const PreviewOut = z.object({ sandboxPort: z.number(), hostPort: z.number(), url: z.string() });

/** A changed file as the tools return it (optional fields left out, not undefined). */
export function changedView(c: { path: string; oldPath?: string; status: string; binary: boolean; additions: number; deletions: number }): z.output<typeof ChangedFileOut> {
  return { path: c.path, ...(c.oldPath ? { oldPath: c.oldPath } : {}), status: c.status, binary: c.binary, additions: c.additions, deletions: c.deletions };
}
