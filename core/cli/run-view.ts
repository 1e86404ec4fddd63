import type { McpAnswer, McpApprovalEvent, NetworkAnswer, RunEvent, RunSummary } from '../../contracts';
import { ERROR_ACTION_CLI, describeError } from '../../contracts/error-help';
import { connectionsRefusedText } from '../../contracts/format';
import type { servicesFor } from '../app-services';
import type { CliIo } from './command';
import { environmentLine, environmentLines, isFinal, printChangedFiles, setupLine, usageLine } from './run-format';
import { safeTerminalText as safe, TerminalSafeText } from './terminal-safe';

type RunServices = ReturnType<typeof servicesFor>;
/** A run as `airlock run` shows it when it has ended. */
export type FinishedRun = Awaited<ReturnType<RunServices['runs']['get']>>;
/** The files a finished run changed. */
export type FinishedFiles = Awaited<ReturnType<RunServices['diffs']['list']>>['files'];

/** What `airlock run` shows of a run as it goes: readable lines at a terminal, or JSON lines with --json. */
export interface RunView {
  started(s: RunSummary): void;
  status(s: RunSummary): void;
  event(e: RunEvent): void;
  finished(run: FinishedRun, files: FinishedFiles): void;
}

/** `airlock run --json`: one JSON event per line and a final summary line. */
export function jsonView(io: CliIo): RunView {
  const line = (o: unknown) => io.stdout.write(`${JSON.stringify(o)}\n`);
  return {
    started: (s) => line({ type: 'run_started', runId: s.id }),
    status: () => undefined, // status transitions are in the event stream already
    event: (e) => line(e),
    finished: (run, files) =>
      line({
        type: 'summary',
        runId: run.id,
        status: run.status,
        changedFiles: files.map((f) => ({ path: f.path, status: f.status, ...(f.risky ? { risky: f.risky } : {}) })),
        patchPath: run.patchPath ?? null,
        usage: run.usage,
        ...(run.error ? { error: run.error } : {}),
        ...(run.thread ? { thread: run.thread } : {}),
        wipe: run.wipe ?? null,
        ...(run.environment?.prepared ? { prepared: run.environment.prepared } : {}),
      }),
  };
}

/**
 * The terminal a live view writes to. The model's and the sandbox's bytes reach it as text only
 * (terminal-safe.ts): one filter per stream, so a sequence split across events is judged whole.
 */
class LiveTerminal {
  private readonly modelText = new TerminalSafeText();
  private readonly commandText = new TerminalSafeText();
  /** The model's text left a line open. */
  private textOpen = false;

  constructor(readonly out: NodeJS.WritableStream) {}

  write(text: string): void {
    this.out.write(text);
  }

  /** Ends the model's open line, before a line of Airlock's own. */
  endText(): void {
    if (this.textOpen) this.out.write('\n');
    this.textOpen = false;
  }

  modelDelta(delta: string): void {
    this.out.write(this.modelText.push(delta));
    this.textOpen = !delta.endsWith('\n');
  }

  commandOutput(data: string): void {
    this.out.write(this.commandText.push(data));
  }
}

/** `airlock run` at a terminal: phases, the model's text, commands and their output, files changed, questions, the end. */
export function liveView(io: CliIo): RunView {
  const t = new LiveTerminal(io.stdout);
  let lastPhase = '';
  return {
    started: (s) => t.write(`run ${s.id}: ${s.agent} with ${s.provider}/${s.model} on ${s.projectDir}\n`),
    status: (s) => {
      const phase = `${s.status}${s.phase ? ` — ${s.phase}` : ''}`;
      if (phase !== lastPhase && !isFinal(s.status)) {
        t.endText();
        t.write(`· ${phase}\n`);
        lastPhase = phase;
      }
    },
    event: ({ event }) => {
      if (!writeWorkEvent(t, event)) writeNetworkOrMcpEvent(t, event);
    },
    finished: (run, files) => writeRunEnd(t, run, files),
  };
}

/** The agent's work: its text, commands, environment and setup, files changed, command questions, errors, its summary. False: not one of these. */
function writeWorkEvent(t: LiveTerminal, event: RunEvent['event']): boolean {
  switch (event.type) {
    case 'assistant_text':
      t.modelDelta(event.delta);
      return true;
    case 'command_started':
      t.endText();
      t.write(`$ ${safe(event.command)}\n`);
      return true;
    case 'command_output':
      t.commandOutput(event.data);
      return true;
    case 'command_exited':
      if (event.exitCode !== 0) t.write(`[exit ${event.exitCode ?? 'killed'}${event.timedOut ? ', timed out' : ''}]\n`);
      return true;
    case 'environment':
      t.endText();
      for (const l of environmentLines(event)) t.write(`${l}\n`);
      return true;
    case 'setup': {
      const line = setupLine(event);
      if (line === undefined) return true;
      if (event.phase === 'output') t.write(line);
      else {
        t.endText();
        t.write(`${line}\n`);
      }
      return true;
    }
    case 'file_changed':
      t.endText();
      t.write(`~ changed: ${safe(event.paths.slice(0, 5).join(', '))}${event.paths.length > 5 ? ` (+${event.paths.length - 5})` : ''}\n`);
      return true;
    case 'approval_request':
      t.endText();
      t.write(`? the agent wants to run: ${safe(event.command)}\n  approve? [y/N] `);
      return true;
    case 'agent_error':
      t.endText();
      t.write(`! ${safe(event.message)}\n`);
      return true;
    case 'finished':
      t.endText();
      t.write(`\n${safe(event.summary)}\n`);
      return true;
    default:
      return false;
  }
}

/** What the network gateway and the MCP gateway refused or ask about, and how questions ended. */
function writeNetworkOrMcpEvent(t: LiveTerminal, event: RunEvent['event']): void {
  switch (event.type) {
    case 'network_blocked':
      t.endText();
      t.write(
        event.rule
          ? `! network: refused ${event.method} ${event.host}${event.path ?? ''} (${event.reason ?? 'refused'}; rule: ${event.rule})\n`
          : // A reason that names its own flag (--internal-host) says how; otherwise the allowlist is what refused.
            `! network: blocked ${event.method} ${event.host}:${event.port}${event.reason ? ` (${event.reason})` : ''}${event.reason?.includes('--internal-host') ? '' : `; allow it with --allow ${event.host}`}\n`,
      );
      break;
    case 'network_approval':
      t.endText();
      t.write(
        event.kind === 'proposal'
          ? `? the agent proposes the network rule: ${event.rule}\n  its reason (the agent's words): "${safe(event.reason ?? '')}"\n  ${answerPrompt(NETWORK_KEYS, event.answers)} `
          : `? ${event.method} ${event.host}${event.path} is waiting (refused by ${event.deniedBy ?? 'a rule'})${event.rule ? `\n  "for this project" adds: ${event.rule}` : ''}\n  ${answerPrompt(NETWORK_KEYS, event.answers)} `,
      );
      break;
    case 'connections_refused':
      t.endText();
      t.write(`! ${connectionsRefusedText(event.service, event.limit, event.refused, event.ended)}\n`);
      break;
    case 'network_approval_resolved':
      if (event.by !== 'user') t.write(`\n! network question ${event.by === 'timeout' ? 'timed out: denied' : 'closed'}\n`);
      break;
    case 'mcp_approval':
      t.endText();
      t.write(`${mcpQuestionText(event)}\n  ${answerPrompt(MCP_KEYS, event.answers)} `);
      break;
    case 'mcp_approval_resolved':
      if (event.by !== 'user') t.write(`\n! MCP question ${event.by === 'timeout' ? 'timed out: denied' : 'closed'}\n`);
      break;
    case 'mcp_call':
      if (event.decision === 'deny') {
        t.endText();
        t.write(`! MCP: refused ${event.server}/${safe(event.tool)}: ${safe(event.reason ?? 'denied')}\n`);
      }
      break;
    default:
      break;
  }
}

/** The end of a run: its status (and what to do about an error), files, usage, environment, patch, next steps, the wipe. */
function writeRunEnd(t: LiveTerminal, run: FinishedRun, files: FinishedFiles): void {
  t.endText();
  t.write(`\n${run.status.toUpperCase()} ${run.id}${run.error ? `: ${describeError(run.error).title}: ${run.error.message}` : ''}\n${run.error ? describeError(run.error).actions.map((a) => `  → ${ERROR_ACTION_CLI[a].replace('<provider>', run.provider)}\n`).join('') : ''}`);
  printChangedFiles(t.out, files);
  t.write(`${usageLine(run.usage)}\n`);
  const envLine = environmentLine(run.environment);
  if (envLine) t.write(`${envLine}\n`);
  if (run.patchPath) t.write(`patch: ${run.patchPath}\napply: airlock apply ${run.id}   review: airlock show ${run.id}${run.thread ? '   (this turn; --thread for the whole thread)' : ''}\n`);
  if (run.status !== 'cancelled' && run.patchPath) t.write(`follow up: airlock run --continue ${run.id} --task "…"\n`);
  if (run.wipe) t.write(`sandbox wiped: ${run.wipe.verified ? 'verified gone' : `LEFTOVERS ${run.wipe.leftovers.join(', ')}`}${run.wipe.pooledAs ? ` (run ${run.id}'s sandbox, started in the warm pool as ${run.wipe.pooledAs})` : ''}\n`);
}

const NETWORK_KEYS: Record<NetworkAnswer, string> = { once: '[o]nce', run: '[r]un', project: '[p]roject', deny: '[d]eny' };

const MCP_KEYS: Record<McpAnswer, string> = { once: '[o]nce', run: '[r]un (this tool, this run)', deny: '[d]eny' };

/** `allow? [o]nce / [p]roject / [d]eny` for the answers offered, each named by `keys`. */
function answerPrompt<A extends string>(keys: Record<A, string>, answers: readonly A[]): string {
  return `allow? ${answers.map((a) => keys[a]).join(' / ')} (no answer: deny)`;
}

/** What a waiting MCP call shows: the tool, why it asks, and the agent's arguments (or the server's new description) marked as theirs. */
export function mcpQuestionText(q: McpApprovalEvent): string {
  const head = `? MCP ${q.server}/${safe(q.tool)} wants to run`;
  const why = q.why === 'changed' ? `\n  its description CHANGED since you enabled ${q.server}; now (the server's words): "${safe(q.description ?? '')}"` : q.why === 'new' ? `\n  it was not pinned when you enabled ${q.server}; its description (the server's words): "${safe(q.description ?? '')}"` : '';
  return `${head}${why}\n  arguments (the agent's): ${safe(q.args)}`;
}
