import { z } from 'zod';

/**
 * The events one agent run produces, whichever agent runs (built-in, Claude Code, Codex, custom).
 * They cross from the sandbox to the host and on to the UI, so every event is flat, JSON-friendly
 * and small; large outputs are capped by the producer (`truncated: true` says so).
 *
 * The built-in agent writes them as JSON lines on stdout (the output of the commands it asks for is
 * read by the host first-hand); adapters map third-party CLI output to them.
 */

/** A delta of assistant text (append to the current message). */
export const AssistantTextEvent = z.object({ type: z.literal('assistant_text'), delta: z.string() });

/** The model asked for a tool. `input` is the tool's JSON arguments. */
export const ToolCallEvent = z.object({
  type: z.literal('tool_call'),
  id: z.string(),
  name: z.string(),
  input: z.unknown(),
});

/** The result of a tool call, as returned to the model (capped). */
export const ToolResultEvent = z.object({
  type: z.literal('tool_result'),
  id: z.string(),
  ok: z.boolean(),
  output: z.string(),
  truncated: z.boolean().optional(),
});

/** A shell command started inside the sandbox. `id` links its output and exit. */
export const CommandStartedEvent = z.object({
  type: z.literal('command_started'),
  id: z.string(),
  command: z.string(),
  argv: z.array(z.string()).optional(),
  cwd: z.string(),
});

/** A chunk of a command's output (UTF-8 text; binary bytes are replaced). */
export const CommandOutputEvent = z.object({
  type: z.literal('command_output'),
  id: z.string(),
  stream: z.enum(['stdout', 'stderr']),
  data: z.string(),
});

/** A command ended. `exitCode` is null when it was killed by a signal (timeout included). */
export const CommandExitedEvent = z.object({
  type: z.literal('command_exited'),
  id: z.string(),
  exitCode: z.number().int().nullable(),
  durationMs: z.number().nonnegative(),
  timedOut: z.boolean(),
  /** Total bytes of output the command produced (before any cap). */
  outputBytes: z.number().int().nonnegative().optional(),
});

/** Files the agent changed (paths relative to the workspace). */
export const FileChangedEvent = z.object({ type: z.literal('file_changed'), paths: z.array(z.string()) });

/** Token usage of one model call (increment, not a running total). */
export const UsageEvent = z.object({
  type: z.literal('usage'),
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  costUsd: z.number().nonnegative().optional(),
});

/** Approval mode `ask`: the agent waits before running `command` until an approval_response. */
export const ApprovalRequestEvent = z.object({ type: z.literal('approval_request'), id: z.string(), command: z.string() });

/** The user's answer to an approval_request (also the line the host writes to the agent's stdin). */
export const ApprovalResponseEvent = z.object({ type: z.literal('approval_response'), id: z.string(), approved: z.boolean() });

/**
 * Host-run commands (the built-in agent inside Airlock): instead of running a command itself, the
 * agent asks the host, which runs it in the sandbox through the channel, streams and audits its
 * output first-hand, and answers with a command_result line on the agent's stdin.
 */
export const CommandRequestEvent = z.object({
  type: z.literal('command_request'),
  id: z.string(),
  command: z.string(),
  cwd: z.string(),
  timeoutSec: z.number().positive(),
  /** Bytes of output the model may see (head and tail beyond it). */
  capBytes: z.number().int().positive(),
});

/** The host's answer to a command_request. `output` is what the model sees (capped). */
export const CommandResultEvent = z.object({
  type: z.literal('command_result'),
  id: z.string(),
  exitCode: z.number().int().nullable(),
  timedOut: z.boolean(),
  durationMs: z.number().nonnegative(),
  output: z.string(),
  truncated: z.boolean(),
  outputBytes: z.number().int().nonnegative(),
});

/** Something went wrong in the agent (upstream 401/429/5xx, bad config, crash). Human readable, no secrets. */
export const AgentErrorEvent = z.object({
  type: z.literal('agent_error'),
  message: z.string(),
  /** HTTP status of the upstream answer when the error came from the model provider. */
  status: z.number().int().optional(),
});

/** The agent is done. `summary` is its own account of the work. */
export const FinishedEvent = z.object({
  type: z.literal('finished'),
  summary: z.string(),
  /** Why it stopped: it called finish, ran out of steps, or the model stopped without finishing. */
  reason: z.enum(['finish', 'max_steps', 'end_turn', 'error']).optional(),
});

export const AgentEvent = z.discriminatedUnion('type', [
  AssistantTextEvent,
  ToolCallEvent,
  ToolResultEvent,
  CommandStartedEvent,
  CommandOutputEvent,
  CommandExitedEvent,
  FileChangedEvent,
  UsageEvent,
  ApprovalRequestEvent,
  ApprovalResponseEvent,
  CommandRequestEvent,
  CommandResultEvent,
  AgentErrorEvent,
  FinishedEvent,
]);
export type AgentEvent = z.infer<typeof AgentEvent>;
export type AgentEventType = AgentEvent['type'];
/** One member of the union by its `type`. */
export type AgentEventOf<T extends AgentEventType> = Extract<AgentEvent, { type: T }>;
