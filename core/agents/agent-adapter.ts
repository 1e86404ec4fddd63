import type { AgentEvent } from '../../contracts/agent-events';
import type { AgentKind as AgentId } from '../../contracts/runs';
import type { SandboxCredential } from '../proxy/sandbox-signin';

/** What an adapter needs to build the agent's command line inside the sandbox. */
export interface AgentCommandContext {
  task: string;
  model: string;
  /** Wire format the proxy speaks to the agent: Anthropic Messages or OpenAI (Chat Completions / Responses). */
  providerFormat: 'anthropic' | 'openai';
  /** The proxy as seen from inside the sandbox, WITHOUT `/v1`, e.g. `http://127.0.0.1:41000`. */
  proxyBaseUrl: string;
  /** The run token: given to the agent as its API key. Never log it. */
  token: string;
  approval: 'auto' | 'ask';
  maxSteps?: number;
  /** The command line of the `custom` agent (run with `bash -lc`). */
  customCommand?: string;
  /** The project copy inside the sandbox (default `/workspace`). */
  workspace?: string;
  /**
   * The agent's conversation (docs/architecture.md §15): `id` is chosen by the host for a new one;
   * `resume` means the session files of the previous turn are in place and the agent continues them.
   */
  session?: { id: string; resume: boolean };
  /**
   * Set when the run uses a subscription credential: what the client gets in its place (placeholders
   * only, docs/architecture.md §6). Only the vendor's own adapter ever receives it.
   */
  credential?: SandboxCredential;
  /**
   * The run's MCP gateway as seen from inside the sandbox (docs/architecture.md §20): its Streamable
   * HTTP endpoint and the token it takes (`Authorization: Bearer`). Never log the token.
   */
  mcp?: { url: string; token: string };
}

/** The process to start inside the sandbox (cwd: the workspace). `env` holds the token: never log it. */
export interface AgentCommand {
  argv: string[];
  env: Record<string, string>;
  /** Optional working directory (default: the workspace). */
  cwd?: string;
  /** Variables of the common provider settings this agent must NOT see (they would override its credential). */
  unsetEnv?: string[];
}

/**
 * Turns an agent's raw output (stdout bytes, any chunking) into Airlock events. Lines that are not
 * the agent's structured format are ignored here — the caller keeps the raw terminal output anyway.
 */
export interface AgentOutputParser {
  push(chunk: Buffer): AgentEvent[];
  /** Flushes a last line without a newline, and anything pending. */
  end(): AgentEvent[];
}

/** One way of running an agent in the sandbox. */
export interface AgentAdapter {
  id: AgentId;
  /** `agents` = the image variant with the third-party CLIs installed. */
  imageVariant: 'base' | 'agents';
  /** Whether approval mode `ask` works (the agent pauses and reads approval_response lines on stdin). */
  supportsApproval: boolean;
  /** Provider formats the agent can speak. */
  providerFormats: readonly ('anthropic' | 'openai')[];
  /**
   * What the run terminal shows. `commands`: the agent's stdout is structured events (they go to
   * the transcript), so the terminal gets only what its commands printed, plus its stderr. `raw`: the
   * agent's output as it is (a custom command whose stdout is the only record).
   */
  terminal: 'commands' | 'raw';
  /** Where the agent keeps its conversation in the sandbox, for a follow-up turn; none: not carried. */
  session?: AgentSessionFiles;
  /** Whether the agent is pointed at the run's MCP gateway when the run has one (`--mcp`). */
  supportsMcp?: boolean;
  command(ctx: AgentCommandContext): AgentCommand;
  createParser(): AgentOutputParser;
}

/**
 * An agent's session files inside the sandbox (docs/architecture.md §15): read out after a turn as
 * hostile bytes and put back, unchanged but for the run token, into the next turn's sandbox.
 */
export interface AgentSessionFiles {
  /** The folder they live in (absolute, inside the sandbox). */
  dir: string;
  /** Whether a file (relative to `dir`) belongs to the session with this id; nothing else is carried. */
  matches(rel: string, sessionId: string): boolean;
}

export const DEFAULT_WORKSPACE = '/workspace';

/** Characters of a tool's output kept in a `tool_result` event. */
export const TOOL_RESULT_CAP = 30_000;

export function capOutput(text: string, cap = TOOL_RESULT_CAP): { output: string; truncated?: true } {
  return text.length <= cap ? { output: text } : { output: `${text.slice(0, cap)}\n… [cut: ${text.length - cap} more characters]`, truncated: true };
}

/** A path as the agent reported it, relative to the workspace when it is inside it. */
export function workspaceRelative(p: string, workspace = DEFAULT_WORKSPACE): string {
  const root = workspace.endsWith('/') ? workspace : `${workspace}/`;
  return p.startsWith(root) ? p.slice(root.length) : p;
}

type CommandOutput = Extract<AgentEvent, { type: 'command_output' }>;
const OUTPUT_BYTES = Symbol('airlock.commandOutputBytes');

/**
 * A `command_output` event over bytes that end on a character boundary: its `data` is decoded only
 * when read (the CLI prints it; the terminal path takes the bytes and never needs the text).
 */
export function commandOutputEvent(id: string, stream: 'stdout' | 'stderr', bytes: Buffer): CommandOutput {
  let text: string | undefined;
  const event = { type: 'command_output', id, stream } as CommandOutput;
  Object.defineProperty(event, 'data', { enumerable: true, get: () => (text ??= bytes.toString('utf8')) });
  Object.defineProperty(event, OUTPUT_BYTES, { value: bytes });
  return event;
}

/** The bytes of a command_output event: as received when the parser made it, else its text encoded. */
export function commandOutputBytes(event: CommandOutput): Buffer {
  return (event as CommandOutput & { [OUTPUT_BYTES]?: Buffer })[OUTPUT_BYTES] ?? Buffer.from(event.data);
}

/** A line longer than this without a newline is not an event: it is dropped, not buffered forever. */
const MAX_LINE_BYTES = 8 * 1024 * 1024;

/**
 * A parser for JSON-lines output: splits on '\n' across chunks (UTF-8 safe), parses each line and
 * hands objects to `map`. Non-JSON lines are skipped.
 */
export function jsonLinesParser(map: (obj: Record<string, unknown>) => AgentEvent[], onEnd: () => AgentEvent[] = () => []): AgentOutputParser {
  let pending: Buffer = Buffer.alloc(0);
  let skipping = false;
  const handle = (line: Buffer): AgentEvent[] => {
    const text = line.toString('utf8').trim();
    if (!text.startsWith('{')) return [];
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch {
      return [];
    }
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return [];
    try {
      return map(obj as Record<string, unknown>);
    } catch {
      // An unexpected shape from a newer CLI version must not break the run.
      return [];
    }
  };
  const push = (chunk: Buffer): AgentEvent[] => {
    // A line cut by the last chunk is joined with this one's first line only, not the whole chunk.
    let buf = chunk;
    if (pending.length) {
      const nl = chunk.indexOf(0x0a);
      const head = nl < 0 ? chunk : chunk.subarray(0, nl + 1);
      buf = Buffer.concat([pending, head]);
      if (nl >= 0 && nl + 1 < chunk.length) {
        // Parse the joined line alone, then go on in the chunk itself.
        pending = Buffer.alloc(0);
        return [...push(buf), ...push(chunk.subarray(nl + 1))];
      }
    }
    const out: AgentEvent[] = [];
    let off = 0;
    for (let nl = buf.indexOf(0x0a, off); nl >= 0; nl = buf.indexOf(0x0a, off)) {
      const line = buf.subarray(off, nl);
      off = nl + 1;
      if (skipping) skipping = false;
      else out.push(...handle(line));
    }
    pending = buf.subarray(off);
    if (pending.length > MAX_LINE_BYTES) {
      pending = Buffer.alloc(0);
      skipping = true;
    }
    return out;
  };
  return {
    push,
    end() {
      const out = pending.length > 0 && !skipping ? handle(pending) : [];
      pending = Buffer.alloc(0);
      return [...out, ...onEnd()];
    },
  };
}

/** Provider settings every agent sees (docs/architecture.md §4): both SDK conventions, the run token as key. */
export function providerEnv(ctx: AgentCommandContext): Record<string, string> {
  const base = ctx.proxyBaseUrl.replace(/\/+$/, '').replace(/\/v1$/, '');
  return {
    ANTHROPIC_BASE_URL: base,
    ANTHROPIC_API_KEY: ctx.token,
    OPENAI_BASE_URL: `${base}/v1`,
    OPENAI_API_KEY: ctx.token,
  };
}

export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

export function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

export function obj(v: unknown): Record<string, unknown> | undefined {
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}
