import type { AgentEvent, AgentEventOf } from '../../contracts/agent-events';
import { commandOutputEvent } from '../agents';
import { OutputCapture } from '../common/output-capture';
import { StreamRedactor } from '../common/stream-redactor';
import { Utf8Carry } from '../common/utf8';
import type { CommandRequest, LiveAgentRun, LiveRun } from './run-context';

type Stream = 'stdout' | 'stderr';

/** Bytes a batch may hold before it is handed on without waiting for the timer. */
const BATCH_BYTES = 256 * 1024;
/** How long output waits to be gathered into one batch. */
const BATCH_MS = 4;

/**
 * A command's output on its way to the run's terminal and events: the run token removed (a command
 * can read the agent's environment), cut at whole characters, and gathered for a few ms (or 256 KB)
 * per stream so a flood that the channel delivers in frames of a few KB reaches the terminal log
 * as one write per tick. The two streams stay in order.
 */
export class CommandOutput {
  private readonly carry = { stdout: new Utf8Carry(), stderr: new Utf8Carry() };
  private readonly redactor: Record<Stream, StreamRedactor>;
  private readonly waiting: Record<Stream, Buffer[]> = { stdout: [], stderr: [] };
  private waitingBytes = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    secrets: Buffer[],
    private readonly emit: (stream: Stream, bytes: Buffer) => void,
  ) {
    // Redaction comes before the cut at characters (the token is ASCII), so it holds across batches.
    this.redactor = { stdout: new StreamRedactor(secrets), stderr: new StreamRedactor(secrets) };
  }

  push(stream: Stream, chunk: Buffer): void {
    // The other stream's output goes first, so the two stay in order.
    if (this.waiting[stream === 'stdout' ? 'stderr' : 'stdout'].length) this.flush();
    this.waiting[stream].push(chunk);
    this.waitingBytes += chunk.length;
    if (this.waitingBytes >= BATCH_BYTES) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), BATCH_MS);
  }

  /** Hands on everything held, including a token prefix and a partial character at the very end. */
  end(): void {
    this.flush();
    for (const stream of ['stdout', 'stderr'] as const) {
      const tail = this.carry[stream].cut(this.redactor[stream].end());
      if (tail.length) this.emit(stream, tail);
      const rest = this.carry[stream].rest();
      if (rest) this.emit(stream, rest);
    }
  }

  private flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.waitingBytes = 0;
    for (const stream of ['stdout', 'stderr'] as const) {
      for (const part of this.waiting[stream].splice(0)) {
        const whole = this.carry[stream].cut(this.redactor[stream].push(part));
        if (whole.length) this.emit(stream, whole);
      }
    }
  }
}

/** A word for a POSIX shell, whatever it holds. */
const shellWord = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/**
 * The argv of a command for the agent. A login shell (the agent's commands) reads the profile first
 * (tens of ms per command); Debian's /etc/profile sets PATH outright, so a PATH the environment gives
 * (image `ENV`, `containerEnv`, `remoteEnv`: what setup's commands saw) is put back after it
 * (docs/architecture.md §16, "Any image becomes a hardened sandbox").
 */
export function commandArgv(command: string, login: boolean, envPath: string | undefined): string[] {
  if (!login) return ['bash', '-c', command];
  return ['bash', '-lc', envPath === undefined ? command : `export PATH=${shellWord(envPath)}\n${command}`];
}

/** What the host saw of a command it ran: exit, timing and its output under a cap per stream. */
export interface HostCommandResult {
  exitCode: number | null;
  timedOut: boolean;
  durationMs: number;
  /** Head and tail of both streams together, in order (what a model should see). */
  output: OutputCapture;
  stdout: OutputCapture;
  stderr: OutputCapture;
  /** Set when the command could not be started (the run is ending, the channel closed). */
  failure?: string;
}

/**
 * Runs a command in a live run's sandbox through the channel, as the host: its output reaches the
 * terminal, the hash and the audit first-hand (`onEvent` receives started, output and exited, token
 * removed), and `onOutput` sees the same redacted bytes as they come (MCP progress).
 */
export async function executeHostCommand(run: LiveRun, req: Pick<CommandRequest, 'id' | 'command' | 'cwd' | 'timeoutSec' | 'capBytes'> & { signal?: AbortSignal; loginShell?: boolean }, onEvent: (event: AgentEvent) => void, onOutput?: (stream: Stream, bytes: Buffer) => void): Promise<HostCommandResult> {
  const started = Date.now();
  const argv = commandArgv(req.command, req.loginShell !== false, run.commandEnv?.PATH);
  onEvent({ type: 'command_started', id: req.id, command: req.command, argv, cwd: req.cwd });
  const result: HostCommandResult = { exitCode: null, timedOut: false, durationMs: 0, output: new OutputCapture(req.capBytes), stdout: new OutputCapture(req.capBytes), stderr: new OutputCapture(req.capBytes) };
  const token = run.kind === 'agent' ? run.agent.grant?.tokenBytes : undefined;
  const output = new CommandOutput(token ? [token] : [], (stream, bytes) => {
    result[stream].add(bytes);
    onOutput?.(stream, bytes);
    onEvent(commandOutputEvent(req.id, stream, bytes));
  });
  const sandbox = run.made.sandbox;
  if (!sandbox || !(run.kind === 'agent' ? run.agent.process : run.spec.control.open)) result.failure = 'the run is ending';
  else {
    try {
      const proc = sandbox.channel.spawn({ argv, cwd: req.cwd, env: run.commandEnv, timeoutMs: Math.round(req.timeoutSec * 1000) });
      run.hostCommands.add(proc);
      // The caller went away (an MCP client cancelled or vanished): the command goes too.
      const onAbort = () => proc.kill('SIGKILL');
      if (req.signal?.aborted) onAbort();
      req.signal?.addEventListener('abort', onAbort, { once: true });
      const onChunk = (stream: Stream) => (chunk: Buffer) => {
        result.output.add(chunk);
        output.push(stream, chunk);
      };
      const subs = [proc.onStdout(onChunk('stdout')), proc.onStderr(onChunk('stderr'))];
      // An MCP client has no stdin to give: a command that reads it sees its end, not a hang.
      if (run.kind === 'session') proc.end();
      try {
        ({ exitCode: result.exitCode, timedOut: result.timedOut } = await proc.exited);
      } finally {
        for (const d of subs) d.dispose();
        req.signal?.removeEventListener('abort', onAbort);
        run.hostCommands.delete(proc);
      }
    } catch (err) {
      result.failure = (err as Error).message;
    }
  }
  output.end();
  result.durationMs = Date.now() - started;
  onEvent({ type: 'command_exited', id: req.id, exitCode: result.exitCode, durationMs: result.durationMs, timedOut: result.timedOut, outputBytes: result.output.bytes });
  return result;
}

/**
 * Runs a command for the agent through the channel (host-run commands): its output reaches the
 * terminal, the hash and the audit first-hand, without a relay through the agent, and the agent gets
 * what the model should see (head and tail) as a `command_result` line. `onEvent` receives the
 * command's events (started, output, exited) as if the agent had sent them.
 */
export async function runHostCommand(run: LiveAgentRun, req: CommandRequest, onEvent: (event: AgentEvent) => void): Promise<void> {
  const { exitCode, timedOut, durationMs, output: capture, failure } = await executeHostCommand(run, req, onEvent);
  const outputBytes = capture.bytes;
  if (failure) capture.add(Buffer.from(`failed to start: ${failure}`));
  const result: AgentEventOf<'command_result'> = { type: 'command_result', id: req.id, exitCode, timedOut, durationMs, output: capture.text(), truncated: capture.truncated, outputBytes };
  run.agent.process?.write(`${JSON.stringify(result)}\n`);
}
