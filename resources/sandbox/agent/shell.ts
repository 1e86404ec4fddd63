import { spawn, type ChildProcess } from 'node:child_process';
import { emit, emitOutput } from './events';

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

/** Environment for the agent's commands: the provider settings and the run token stay with the agent. */
export function commandEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(env)) {
    if (/^(AIRLOCK_|ANTHROPIC_|OPENAI_)/.test(k) || /API_KEY|TOKEN|SECRET/i.test(k)) continue;
    out[k] = v;
  }
  return out;
}

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
    let bytes = 0;
    // The model sees the head and the tail of the output (bytes, decoded once at the end).
    const half = Math.floor(opts.capChars / 2);
    const head: Buffer[] = [];
    let headBytes = 0;
    const tail: Buffer[] = [];
    let tailBytes = 0;
    const keep = (chunk: Buffer) => {
      if (headBytes < opts.capChars && tailBytes === 0) {
        const room = opts.capChars - headBytes;
        head.push(chunk.subarray(0, room));
        headBytes += Math.min(room, chunk.length);
        if (chunk.length <= room) return;
        chunk = chunk.subarray(room);
      }
      tail.push(chunk);
      tailBytes += chunk.length;
      while (tail.length > 1 && tailBytes - tail[0]!.length >= half) tailBytes -= tail.shift()!.length;
    };
    // Output is coalesced for a few ms (or 256 KB): each hop to the host costs per chunk, and a
    // pipe hands over a few KB at a time. A switch of stream sends what waits first, keeping order.
    let waiting: { stream: 'stdout' | 'stderr'; parts: Buffer[]; bytes: number } | undefined;
    let flushTimer: ReturnType<typeof setTimeout> | undefined;
    const flushOutput = () => {
      if (flushTimer) clearTimeout(flushTimer);
      flushTimer = undefined;
      if (!waiting) return;
      const { stream, parts } = waiting;
      waiting = undefined;
      emitOutput(opts.id, stream, parts);
    };
    const pipe = (stream: NodeJS.ReadableStream | null, name: 'stdout' | 'stderr') => {
      stream?.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        keep(chunk);
        if (waiting && waiting.stream !== name) flushOutput();
        waiting ??= { stream: name, parts: [], bytes: 0 };
        waiting.parts.push(chunk);
        waiting.bytes += chunk.length;
        if (waiting.bytes >= COALESCE_BYTES) flushOutput();
        else flushTimer ??= setTimeout(flushOutput, COALESCE_MS);
      });
      stream?.on('end', flushOutput);
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
      running.delete(child);
      const durationMs = Date.now() - started;
      if (spawnError) keep(Buffer.from(`failed to start: ${spawnError}`));
      emit({ type: 'command_exited', id: opts.id, exitCode, durationMs, timedOut, outputBytes: bytes });
      const truncated = tailBytes > 0;
      const headBytesAll = Buffer.concat(head);
      const output = truncated
        ? `${headBytesAll.subarray(0, half).toString('utf8')}\n… [${bytes} bytes of output; middle cut] …\n${Buffer.concat([headBytesAll, ...tail]).subarray(-half).toString('utf8')}`
        : headBytesAll.toString('utf8');
      resolve({ exitCode, timedOut, durationMs, output, truncated, outputBytes: bytes });
    };
    child.on('error', (err) => finish(null, err.message));
    // 'close' waits for the pipes; a background process holding them open is cut by the timeout.
    child.on('close', (code) => finish(code));
  });
}
