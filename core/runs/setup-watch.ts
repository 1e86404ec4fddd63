import { StringDecoder } from 'node:string_decoder';
import { AirlockError } from '../../contracts/errors';
import type { SetupEvent } from '../../contracts/runs';
import type { ChannelProcess } from '../channel/channel-client';

/**
 * Watching one setup command (docs/architecture.md §16, "The setup phase"): its output streams as
 * `setup` events (the CLI, human and `--json`, and the UI) and into the run's terminal, a command
 * silent for `quietMs` says it is still running, with the time since it started, and a stop (the
 * user's Cancel or Ctrl+C, the run's time limit) kills its process tree at once and ends the wait
 * without waiting on the sandbox: the wipe that follows removes the container and verifies it gone.
 */

/** How long a setup command may print nothing before the run says it is still running. */
export const SETUP_QUIET_MS = 60_000;
/** What a failure shows of a command's output. */
const TAIL_BYTES = 4096;
/** One output event carries at most this much text (the terminal log keeps everything). */
const MAX_EVENT_CHARS = 60_000;

export type SetupEventBody = Omit<SetupEvent, 'type'>;

export interface SetupWatchOptions {
  /** `postCreateCommand` or `postCreateCommand.name`. */
  step: string;
  /** The command as the configuration wrote it. */
  command: string;
  emit(e: SetupEventBody): void;
  /** The run's terminal. */
  write(chunk: Buffer | string): void;
  /** Aborted when the run is cancelled or reaches its time limit. */
  signal?: AbortSignal;
  /** Default `SETUP_QUIET_MS`. */
  quietMs?: number;
}

export interface SetupExit {
  exitCode: number | null;
  timedOut: boolean;
  /** The last bytes of its output, for a failure's message. */
  tail: Buffer;
  elapsedMs: number;
}

/** Streams a started setup command until it exits; rejects with `CANCELLED` as soon as `signal` aborts. */
export async function watchSetupProcess(proc: ChannelProcess, o: SetupWatchOptions): Promise<SetupExit> {
  const started = Date.now();
  const elapsed = () => Date.now() - started;
  const base = { step: o.step, command: o.command.slice(0, 2000) };
  const quietMs = o.quietMs ?? SETUP_QUIET_MS;
  const decoder = new StringDecoder('utf8');
  let tail = Buffer.alloc(0);
  let quiet: NodeJS.Timeout | undefined;
  const arm = () => {
    if (quiet) clearTimeout(quiet);
    quiet = setTimeout(() => {
      const ms = elapsed();
      o.write(`\x1b[36m[setup] ${o.step}: still running (${formatElapsed(ms)}, nothing printed for ${formatElapsed(quietMs)})\x1b[0m\r\n`);
      o.emit({ ...base, phase: 'still_running', elapsedMs: ms });
      arm();
    }, quietMs);
    quiet.unref?.();
  };
  const onOutput = (chunk: Buffer) => {
    o.write(chunk);
    tail = Buffer.concat([tail, chunk]);
    if (tail.length > TAIL_BYTES) tail = tail.subarray(tail.length - TAIL_BYTES);
    const text = decoder.write(chunk);
    for (let i = 0; i < text.length; i += MAX_EVENT_CHARS) o.emit({ ...base, phase: 'output', elapsedMs: elapsed(), data: text.slice(i, i + MAX_EVENT_CHARS) });
    arm();
  };
  const subs = [proc.onStdout(onOutput), proc.onStderr(onOutput)];
  o.emit({ ...base, phase: 'started', elapsedMs: 0 });
  arm();
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    onAbort = () => {
      // The whole tree, at once: a stop does not wait for a command that ignores SIGTERM.
      proc.kill('SIGKILL');
      const ms = elapsed();
      o.write(`\r\n\x1b[33m[setup] ${o.step}: stopped after ${formatElapsed(ms)}\x1b[0m\r\n`);
      o.emit({ ...base, phase: 'stopped', elapsedMs: ms });
      reject(new AirlockError('CANCELLED', `The run was stopped during setup (${o.step}, after ${formatElapsed(ms)}).`));
    };
    if (o.signal?.aborted) onAbort();
    else o.signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    const exit = await Promise.race([proc.exited, stopped]);
    const ms = elapsed();
    o.emit({ ...base, phase: 'exited', elapsedMs: ms, exitCode: exit.exitCode });
    return { exitCode: exit.exitCode, timedOut: exit.timedOut === true, tail, elapsedMs: ms };
  } finally {
    if (quiet) clearTimeout(quiet);
    if (onAbort) o.signal?.removeEventListener('abort', onAbort);
    for (const s of subs) s.dispose();
    stopped.catch(() => undefined); // marked handled only: raced above, a stop after the command ended is no error
  }
}

/** `45 s`, `2m 05s`: how long a setup command has been running. */
export function formatElapsed(ms: number): string {
  const s = Math.floor(ms / 1000);
  if (s < 60) return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${s} s`;
  return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
}
