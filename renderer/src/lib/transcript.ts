import type { RunEvent } from '../../../contracts';
import { connectionsRefusedText } from '../../../contracts/format';

export type TranscriptItem =
  | { kind: 'text'; key: string; text: string }
  | {
      kind: 'tool'; key: string; name: string; input: string; output?: string; ok?: boolean;
      /** What the call acted on, shown while it is collapsed: a file's path or a command line. */
      target?: string;
      /** The command this call ran, once it exited: a command that ran and exited non-zero did not fail as a tool call. */
      ran?: { exitCode: number | null; timedOut?: boolean };
    }
  | { kind: 'command'; key: string; command: string; cwd: string; exitCode?: number | null; durationMs?: number; timedOut?: boolean }
  | { kind: 'approval'; key: string; requestId: string; command: string; approved?: boolean }
  | { kind: 'status'; key: string; status: string; phase?: string; error?: string }
  /** One call through the run's MCP gateway (docs/architecture.md §20): the host's record, not the agent's words. */
  | { kind: 'mcp'; key: string; server: string; tool: string; decision: 'allow' | 'deny'; by?: string; reason?: string; isError: boolean; durationMs: number }
  | { kind: 'error'; key: string; message: string }
  | { kind: 'finished'; key: string; summary: string };

/** The path or command a tool call's input names (built-in agent, Claude Code, Codex spellings). */
function targetOf(input: unknown): string | undefined {
  if (!input || typeof input !== 'object' || Array.isArray(input)) return undefined;
  const o = input as Record<string, unknown>;
  for (const k of ['path', 'file_path', 'notebook_path', 'command']) {
    const v = o[k];
    if (typeof v === 'string' && v.trim()) return v.length > 160 ? `${v.slice(0, 160)}…` : v;
  }
  return undefined;
}

function stringify(v: unknown): string {
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v, null, 2) ?? '';
  } catch {
    return String(v);
  }
}

/**
 * Folds a run's events into what the transcript shows: text deltas joined into messages, tool
 * calls paired with their results, commands with their exit, approvals with their answers.
 * Command output is not here: it goes to the terminal.
 */
/** An MCP call's outcome in words: `allowed by policy · 12 ms`, `denied by user — reason`, `allowed … · error`. */
export function mcpCallText(c: { decision: 'allow' | 'deny'; by?: string; reason?: string; isError: boolean; durationMs: number }): string {
  const who = c.by ? ` by ${c.by}` : '';
  const took = c.durationMs < 1000 ? `${c.durationMs} ms` : `${(c.durationMs / 1000).toFixed(1)} s`;
  return `${c.decision === 'allow' ? 'allowed' : 'denied'}${who} · ${took}${c.decision === 'allow' && c.isError ? ' · the server answered with an error' : ''}${c.reason ? ` — ${c.reason}` : ''}`;
}

export function buildTranscript(events: readonly RunEvent[]): TranscriptItem[] {
  const items: TranscriptItem[] = [];
  const tools = new Map<string, Extract<TranscriptItem, { kind: 'tool' }>>();
  const commands = new Map<string, Extract<TranscriptItem, { kind: 'command' }>>();
  const approvals = new Map<string, Extract<TranscriptItem, { kind: 'approval' }>>();
  for (const { seq, event: e } of events) {
    const key = String(seq);
    switch (e.type) {
      case 'assistant_text': {
        const last = items.at(-1);
        if (last?.kind === 'text') last.text += e.delta;
        else items.push({ kind: 'text', key, text: e.delta });
        break;
      }
      case 'tool_call': {
        const target = targetOf(e.input);
        const item: Extract<TranscriptItem, { kind: 'tool' }> = { kind: 'tool', key, name: e.name, input: stringify(e.input), ...(target ? { target } : {}) };
        tools.set(e.id, item);
        items.push(item);
        break;
      }
      case 'tool_result': {
        const t = tools.get(e.id);
        if (t) {
          t.output = e.output + (e.truncated ? '\n… (truncated)' : '');
          t.ok = e.ok;
        }
        break;
      }
      case 'command_started': {
        const item = { kind: 'command' as const, key, command: e.command, cwd: e.cwd };
        commands.set(e.id, item);
        // A command the agent's own tool call ran (same id) is shown once, on that call.
        if (!tools.has(e.id)) items.push(item);
        break;
      }
      case 'command_exited': {
        const c = commands.get(e.id);
        if (c) Object.assign(c, { exitCode: e.exitCode, durationMs: e.durationMs, timedOut: e.timedOut });
        // The tool call that ran this command (same id in every adapter) says how it exited, not "failed".
        const t = tools.get(e.id);
        if (t) t.ran = { exitCode: e.exitCode, ...(e.timedOut ? { timedOut: true } : {}) };
        break;
      }
      case 'approval_request': {
        const item = { kind: 'approval' as const, key, requestId: e.id, command: e.command };
        approvals.set(e.id, item);
        items.push(item);
        break;
      }
      case 'approval_response': {
        const a = approvals.get(e.id);
        if (a) a.approved = e.approved;
        break;
      }
      case 'status':
        items.push({ kind: 'status', key, status: e.status, phase: e.phase, error: e.error?.message });
        break;
      case 'agent_error':
        items.push({ kind: 'error', key, message: e.message });
        break;
      case 'mcp_call':
        items.push({ kind: 'mcp', key, server: e.server, tool: e.tool, decision: e.decision, ...(e.by ? { by: e.by } : {}), ...(e.reason ? { reason: e.reason } : {}), isError: e.isError, durationMs: e.durationMs });
        break;
      case 'connections_refused':
        items.push({ kind: 'error', key, message: connectionsRefusedText(e.service, e.limit, e.refused, e.ended) });
        break;
      case 'finished':
        // An agent that stopped on an error did not finish: its error and the run's status say what happened.
        if (e.reason !== 'error') items.push({ kind: 'finished', key, summary: e.summary });
        break;
      default:
        break; // command_output → terminal; file_changed → files panel; usage → meter
    }
  }
  return items;
}
