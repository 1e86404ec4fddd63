import { AirlockError } from '../../contracts/errors';
import type { RunResult, SpawnOptions } from '../channel/channel-client';
import { AIRLOCK_LIBEXEC, AIRLOCK_NODE_ARGV, AIRLOCK_NO_PROGRAMS, airlockProgram } from '../common/airlock-runtime';
import type { Disposable } from '../common/disposable';

/** Options and outcome of one process run: exactly `ChannelClient.run`'s (no PTY in workspace work). */
export type ShellRunOptions = Omit<SpawnOptions, 'pty'> & { stdin?: Buffer | string | NodeJS.ReadableStream };
export type ShellRunResult = RunResult;

export interface ShellWatchOptions {
  debounceMs?: number;
  ignore?: string[];
}

/**
 * The port the workspace code talks through: `Pick<ChannelClient, 'run' | 'watch'>`-compatible, so
 * the same code runs against a sandbox channel and against `LocalShell` (a host temp dir) in tests.
 */
export interface WorkspaceShell {
  run(opts: ShellRunOptions): Promise<ShellRunResult>;
  watch?(dir: string, listener: (paths: string[]) => void, opts?: ShellWatchOptions): Promise<Disposable>;
}

/** Where the project copy and Airlock's own state live on the shell's side. */
export interface WorkspaceLayout {
  /** The project copy, the agent's cwd. */
  workDir: string;
  /** Airlock's state, out of the agent's way: the baseline git dir and the tracking index. */
  stateDir: string;
  /** Extra environment for every workspace command (PATH where the shell does not provide one). */
  env?: Record<string, string>;
  /**
   * How the commands Airlock runs as the helper (`as: 'helper'`) start git and Node: argv prefixes and
   * the environment that replaces `env`. Absent: `git` from the PATH and this process's Node (a host
   * directory in tests).
   */
  helper?: { git: readonly string[]; node: readonly string[]; env: Record<string, string> };
}

/** The layout inside an Airlock sandbox (two volumes, see the Docker driver). */
export const SANDBOX_LAYOUT: WorkspaceLayout = {
  workDir: '/workspace',
  stateDir: '/airlock',
  // /opt/airlock/bin first: a derived image's own git, tar and find for Airlock's commands (docs/architecture.md §16).
  env: { PATH: '/opt/airlock/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
  // As the helper, only Airlock's own programs, by absolute path through Airlock's loader: in a derived
  // image the project's sh, git, tar and libc would otherwise run as root (docs/architecture.md §2.3).
  helper: {
    git: airlockProgram(`${AIRLOCK_LIBEXEC}/git`),
    node: AIRLOCK_NODE_ARGV,
    env: { PATH: AIRLOCK_NO_PROGRAMS, GIT_EXEC_PATH: AIRLOCK_NO_PROGRAMS },
  },
};

export function baselineGitDir(layout: WorkspaceLayout): string {
  return `${layout.stateDir}/baseline.git`;
}

/** The index `listChanges` refreshes; the baseline commit itself is never touched. */
export function trackingIndex(layout: WorkspaceLayout): string {
  return `${layout.stateDir}/changes.index`;
}

export const BASELINE_REF = 'refs/heads/baseline';

/** Fixed identity and date so that the same project always gives the same baseline commit id. */
export const BASELINE_IDENT = { name: 'Airlock', email: 'baseline@airlock.invalid', epoch: 946684800 };

/**
 * Environment for Airlock's git calls: no user or system config (an agent may write `~/.gitconfig`
 * with `core.fsmonitor`, `diff.external`, pagers…), no prompts, no locale surprises.
 */
export function gitEnv(layout: WorkspaceLayout, extra?: Record<string, string>): Record<string, string> {
  return {
    ...layout.env,
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_OPTIONAL_LOCKS: '0',
    LC_ALL: 'C',
    ...extra,
  };
}

/**
 * Environment for git run as the helper: `gitEnv` with the layout's helper environment over it (no
 * PATH that leads to an image's program).
 */
export function helperGitEnv(layout: WorkspaceLayout, extra?: Record<string, string>): Record<string, string> {
  return { ...gitEnv(layout), ...layout.helper?.env, ...extra };
}

/** The git program alone (no options): Airlock's where the layout names one. */
export function gitProgram(layout: WorkspaceLayout): readonly string[] {
  return layout.helper?.git ?? ['git'];
}

/** Runs `script` (CommonJS source) on Airlock's Node as `node -e script args…`; argv only, no shell. */
export function nodeArgv(layout: WorkspaceLayout, script: string, args: string[]): string[] {
  return [...(layout.helper?.node ?? [process.execPath]), '-e', script, ...args];
}

/**
 * `git` with the baseline git dir, the project copy as work tree and byte-exact, hook-free settings.
 * Airlock's own git where the layout names one (it runs as the helper).
 */
export function gitArgv(layout: WorkspaceLayout, args: string[]): string[] {
  return [
    ...gitProgram(layout),
    `--git-dir=${baselineGitDir(layout)}`,
    `--work-tree=${layout.workDir}`,
    '-c', 'safe.directory=*',
    '-c', 'core.autocrlf=false',
    '-c', 'core.safecrlf=false',
    '-c', 'core.symlinks=true',
    '-c', 'core.filemode=true',
    '-c', 'core.quotepath=false',
    '-c', 'core.hooksPath=/dev/null',
    '-c', 'core.fsmonitor=false',
    '-c', 'core.untrackedCache=false',
    '-c', 'core.looseCompression=1',
    '-c', 'core.bigFileThreshold=16m',
    '-c', 'diff.noprefix=false',
    '-c', 'diff.mnemonicPrefix=false',
    '-c', 'diff.renames=true',
    '-c', 'diff.renameLimit=2000',
    '-c', 'color.ui=false',
    // Nothing runs another program: no automatic gc or maintenance after a write.
    '-c', 'gc.auto=0',
    '-c', 'maintenance.auto=false',
    ...args,
  ];
}

/** Runs a command and throws a typed error when it fails; returns its stdout. */
export async function runChecked(shell: WorkspaceShell, opts: ShellRunOptions, what: string, okCodes: number[] = [0]): Promise<ShellRunResult> {
  const result = await shell.run(opts);
  if (result.timedOut) {
    throw new AirlockError('COMMAND_TIMEOUT', `${what} timed out after ${result.durationMs} ms; the sandbox may be overloaded — retry, or raise the timeout.`);
  }
  if (result.exitCode === null || !okCodes.includes(result.exitCode)) {
    const detail = result.stderr.toString('utf8').trim().split('\n').slice(-5).join(' | ');
    throw new AirlockError(
      'SANDBOX_FAILED',
      `${what} failed (exit ${result.exitCode ?? result.signal}): ${detail || 'no error output'}. Check that the sandbox image has git and tar, and that the workspace volume is writable.`,
    );
  }
  return result;
}

/** Generous output cap for patches and listings; the channel marks truncation, which we refuse. */
export const LARGE_OUTPUT_BYTES = 1024 * 1024 * 1024;

/**
 * Git work on one workspace runs one task at a time (the tracking index is shared), and after the
 * baseline: hydrate queues the baseline's completion first, so every change query waits for it.
 */
const queues = new WeakMap<WorkspaceShell, Promise<unknown>>();
const broken = new WeakMap<WorkspaceShell, unknown>();
export function serialized<T>(shell: WorkspaceShell, task: () => Promise<T>): Promise<T> {
  const prev = queues.get(shell) ?? Promise.resolve();
  const run = (): Promise<T> => (broken.has(shell) ? Promise.reject(broken.get(shell)) : task());
  const next = prev.then(run, run);
  queues.set(shell, next.catch(() => undefined)); // the caller sees the error; the queue goes on
  return next;
}

/** Like `serialized`, but a failure of this task also fails every task queued after it. */
export function serializedBarrier(shell: WorkspaceShell, task: () => Promise<void>): Promise<void> {
  broken.delete(shell);
  return serialized(shell, async () => {
    try {
      await task();
    } catch (err) {
      broken.set(shell, err);
      throw err;
    }
  });
}
