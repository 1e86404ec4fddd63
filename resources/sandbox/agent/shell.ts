import { spawn, type ChildProcess } from 'node:child_process';
import { OutputCapture } from '../../../core/common/output-capture';
import { emit, emitOutput, outputRedactor } from './events';

export interface CommandResult {
  exitCode: number | null;
  timedOut: boolean;
  durationMs: number;
  /** Combined output for the model, capped (head and tail kept). */
  output: string;
  truncated: boolean;
  outputBytes: number;
}

const running = new Set<ChildProcess>();
const COALESCE_BYTES = 256 * 1024;
const COALESCE_MS = 4;

/** Kills every running command's process group (on SIGTERM, say). */
export function killAllCommands(): void {
  for (const child of running) killTree(child);
}

function killTree(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

export { commandEnv } from '../../../core/common/command-env';

/**
 * Runs `bash -lc <command>` in its own process group, streaming output as command_output events.
 * On timeout the whole group is killed.
 */
export function runShell(opts: { id: string; command: string; cwd: string; timeoutSec: number; capChars: number; env: NodeJS.ProcessEnv }): Promise<CommandResult> {
  const started = Date.now();
  emit({ type: 'command_started', id: opts.id, command: opts.command, argv: ['bash', '-lc', opts.command], cwd: opts.cwd });
  return new Promise((resolve) => {
    const child = spawn('bash', ['-lc', opts.command], { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    const capture = new OutputCapture(opts.capChars);
    // Output is coalesced for a few ms (or 256 KB): each hop to the host costs per chunk, and a
    // pipe hands over a few KB at a time. A switch of stream sends what waits first, keeping order.
    let waiting: { stream: 'stdout' | 'stderr'; parts: Buffer[]; bytes: number } | undefined;
    let flushTimer: ReturnType<typeof setTimeout> | undefined;
    const redactors = { stdout: outputRedactor(), stderr: outputRedactor() };
    const flushOutput = () => {
      if (flushTimer) clearTimeout(flushTimer);
      flushTimer = undefined;
      if (!waiting) return;
      const { stream, parts } = waiting;
      waiting = undefined;
      emitOutput(opts.id, stream, parts, redactors[stream]);
    };
    const pipe = (stream: NodeJS.ReadableStream | null, name: 'stdout' | 'stderr') => {
      stream?.on('data', (chunk: Buffer) => {
        capture.add(chunk);
        if (waiting && waiting.stream !== name) flushOutput();
        waiting ??= { stream: name, parts: [], bytes: 0 };
        waiting.parts.push(chunk);
        waiting.bytes += chunk.length;
        if (waiting.bytes >= COALESCE_BYTES) flushOutput();
        else flushTimer ??= setTimeout(flushOutput, COALESCE_MS);
      });
      stream?.on('end', () => {
        flushOutput();
        emitOutput(opts.id, name, [], redactors[name], true);
      });
    };
    pipe(child.stdout, 'stdout');
    pipe(child.stderr, 'stderr');
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killTree(child);
    }, opts.timeoutSec * 1000);
    const finish = (exitCode: number | null, spawnError?: string) => {
      clearTimeout(timer);
      flushOutput();
      for (const name of ['stdout', 'stderr'] as const) emitOutput(opts.id, name, [], redactors[name], true);
      running.delete(child);
      const durationMs = Date.now() - started;
      const outputBytes = capture.bytes;
      if (spawnError) capture.add(Buffer.from(`failed to start: ${spawnError}`));
      emit({ type: 'command_exited', id: opts.id, exitCode, durationMs, timedOut, outputBytes });
      resolve({ exitCode, timedOut, durationMs, output: capture.text(), truncated: capture.truncated, outputBytes });
    };
    child.on('error', (err) => finish(null, err.message));
    // 'close' waits for the pipes; a background process holding them open is cut by the timeout.
    child.on('close', (code) => finish(code));
  });
}
