import { randomBytes } from 'node:crypto';
import type { RunCheckResult, RunCheckSpec } from '../../contracts/runs';
import { toErrorInfo } from '../../contracts/errors';
import { OutputCapture } from '../common/output-capture';
import type { Sandbox } from '../sandbox/sandbox';
import type { LiveRun, StepHost } from './run-context';
import { CommandOutput } from './host-command';
import { killAgentProcesses } from './setup-end';

/** Output kept of a check (head and tail): enough for a failing test's report, bounded for the record. */
export const CHECK_OUTPUT_CAP = 64 * 1024;

/**
 * Makes sure nothing the agent started still runs (docs/architecture.md §18): the agent's process
 * tree is gone once it exited, but a process it detached — or one that keeps forking — would
 * otherwise outlive it and could rewrite the workspace after collect, or steer the check. Resolves
 * with how many processes were killed, or why the check cannot run (some survived).
 */
export async function stopLeftoverProcesses(sandbox: Pick<Sandbox, 'channel'>): Promise<number | { notRun: string }> {
  try {
    return await sweep(sandbox);
  } catch (err) {
    return { notRun: `the processes the agent left could not be stopped (${toErrorInfo(err).message}), so the check did not run` };
  }
}

async function sweep(sandbox: Pick<Sandbox, 'channel'>): Promise<number> {
  if (sandbox.channel.hello.agentUid === 0) throw new Error('the agent runs as root here, so its processes cannot be told from the helper');
  // kill(-1) as the agent's user, until /proc shows none (setup-end.ts): a fork chain cannot outrun it.
  return killAgentProcesses(sandbox.channel);
}

/** The check's PATH: fixed, never the agent's. */
export const CHECK_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** Variables a shell or loader reads code from: never passed to the check. */
const STEERING_VARIABLES = /^(BASH_ENV|ENV|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|CDPATH|GLOBIGNORE|PS4|BASH_FUNC_.*|LD_.*|NODE_OPTIONS|PYTHONSTARTUP|PYTHONPATH|PERL5OPT|RUBYOPT|HOME|PATH|ZDOTDIR|XDG_CONFIG_HOME)$/;

/**
 * How the check is started (docs/architecture.md §18): `bash --noprofile --norc -c` (no profile, no
 * rc file, no `BASH_ENV`), a fresh home nobody else has written (made by the check's own shell,
 * after every process of the agent's is gone), a fixed PATH, and the run's environment without the
 * variables a shell or runtime reads code from.
 */
export function checkInvocation(command: string, env: Record<string, string>, home: string): { argv: string[]; env: Record<string, string> } {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (!STEERING_VARIABLES.test(k)) clean[k] = v;
  clean.HOME = home;
  clean.PATH = CHECK_PATH;
  // mkdir fails on a path that exists: the home is the check's own, or the check does not start.
  const script = `mkdir -m 700 -- "$HOME" || exit 125\ncd /workspace || exit 125\n${command}`;
  return { argv: ['bash', '--noprofile', '--norc', '-c', script], env: clean };
}

/**
 * Runs the group's check in the sandbox as the host (docs/architecture.md §18), after the agent ended,
 * its leftovers were killed (`stopLeftoverProcesses`, before collect) and its run token was revoked:
 * the check gets the run's environment and network policy but cannot reach a model. Exit code,
 * duration and (capped, token-free) output are what the host saw; nothing the agent printed counts.
 * Never throws: a check that could not run is recorded as not passed, with why.
 */
export async function checkStep(host: StepHost, run: LiveRun, spec: RunCheckSpec, swept: number | { notRun: string }, agent: { sandbox: Sandbox; env: Record<string, string>; tokenBytes: Buffer }): Promise<RunCheckResult> {
  const { sandbox } = agent;
  const killedProcesses = typeof swept === 'number' ? swept : 0;
  const capture = new OutputCapture(CHECK_OUTPUT_CAP);
  const started = Date.now();
  let exitCode: number | null = null;
  let timedOut = false;
  let notRun: string | undefined;
  let environment: RunCheckResult['environment'];
  const home = `/tmp/airlock-check-home-${randomBytes(8).toString('hex')}`;
  if (typeof swept !== 'number') notRun = swept.notRun;
  else if (run.cancelRequested) notRun = 'the run was cancelled';
  else {
    await host.update(run, { phase: 'running the check' });
    // The agent is gone: its token goes before the check runs code the agent may have written.
    host.deps.proxy.revokeRun(run.id);
    run.terminal.write(`\r\n\x1b[1m[airlock] check: ${spec.command.slice(0, 500)}\x1b[0m\r\n`);
    const output = new CommandOutput([agent.tokenBytes], (_stream, bytes) => {
      capture.add(bytes);
      run.terminal.write(bytes);
    });
    try {
      const inv = checkInvocation(spec.command, agent.env, home);
      environment = { shell: 'bash --noprofile --norc -c', home, path: CHECK_PATH, variables: Object.keys(inv.env).sort() };
      const proc = sandbox.channel.spawn({ argv: inv.argv, cwd: '/workspace', env: inv.env, timeoutMs: spec.timeoutSec * 1000 });
      proc.end();
      const subs = [proc.onStdout((c) => output.push('stdout', c)), proc.onStderr((c) => output.push('stderr', c))];
      try {
        ({ exitCode, timedOut } = await proc.exited);
      } finally {
        for (const s of subs) s.dispose();
      }
    } catch (err) {
      notRun = `the check could not run: ${toErrorInfo(err).message}`;
    }
    output.end();
  }
  const result: RunCheckResult = {
    command: spec.command,
    exitCode,
    passed: !notRun && !timedOut && exitCode === 0,
    timedOut,
    durationMs: Date.now() - started,
    output: capture.text(),
    outputBytes: capture.bytes,
    truncated: capture.truncated,
    killedProcesses,
    ...(environment ? { environment } : {}),
    ...(notRun ? { notRun } : {}),
  };
  run.terminal.write(`\r\n[airlock] check ${result.passed ? 'passed' : 'failed'} (exit ${exitCode ?? (timedOut ? 'timeout' : 'none')}, ${result.durationMs} ms)\r\n`);
  await run.audit.append('note', { message: `check ${result.passed ? 'passed' : 'failed'}: ${spec.command.slice(0, 500)}`, check: { exitCode, passed: result.passed, timedOut, durationMs: result.durationMs, outputBytes: result.outputBytes, killedProcesses, ...(notRun ? { notRun } : {}) } });
  await host.update(run, { check: result });
  return result;
}
