import type { RunCheckResult, RunCheckSpec } from '../../contracts/runs';
import { toErrorInfo } from '../../contracts/errors';
import { OutputCapture } from '../common/output-capture';
import type { Sandbox } from '../sandbox/sandbox';
import type { LiveRun, StepHost } from './run-context';
import { CommandOutput } from './host-command';

/** Output kept of a check (head and tail): enough for a failing test's report, bounded for the record. */
export const CHECK_OUTPUT_CAP = 64 * 1024;

/**
 * Kills every process in the sandbox but init, this script and its ancestors (the helper), and says
 * how many it killed. Runs as the sandbox user: what the agent started (a daemon that left its
 * process group included) is killed; the engine's own processes are out of its reach anyway.
 * Builtins only inside the loops, so the sweep forks nothing it would then have to spare.
 */
const SWEEP_SCRIPT = `
declare -A keep; keep[1]=1; p=$$
while [ -n "$p" ] && [ "$p" != 0 ] && [ -z "\${keep[$p]}" ]; do
  keep[$p]=1; read -r l 2>/dev/null < /proc/$p/stat || break; r=\${l##*) }; set -- $r; p=$2
done
killed=0
for pass in 1 2 3 4 5 6 7 8 9 10; do
  n=0
  for d in /proc/[0-9]*; do
    q=\${d#/proc/}; [ -n "\${keep[$q]}" ] && continue
    read -r l 2>/dev/null < $d/stat || continue
    r=\${l##*) }; set -- $r; [ "$1" = Z ] && continue
    kill -9 $q 2>/dev/null && n=$((n+1))
  done
  killed=$((killed+n)); [ $n = 0 ] && break
done
echo "$killed"
`;

/**
 * Makes sure nothing the agent started still runs (docs/architecture.md §18): the agent's process
 * tree is gone once it exited, but a process it detached would otherwise outlive it and could rewrite
 * the workspace after collect, or the check's output. Resolves with how many processes were killed.
 */
export async function stopLeftoverProcesses(sandbox: Sandbox | undefined): Promise<number | { notRun: string }> {
  if (!sandbox) return { notRun: 'the run has no sandbox' };
  try {
    return await sweep(sandbox);
  } catch (err) {
    return { notRun: `the processes the agent left could not be stopped (${toErrorInfo(err).message}), so the check did not run` };
  }
}

async function sweep(sandbox: Sandbox): Promise<number> {
  const proc = sandbox.channel.spawn({ argv: ['bash', '-c', SWEEP_SCRIPT], cwd: '/', env: {}, timeoutMs: 30_000 });
  const out: Buffer[] = [];
  const sub = proc.onStdout((c) => out.push(c));
  try {
    const exit = await proc.exited;
    const n = Number(Buffer.concat(out).toString('utf8').trim().split('\n').at(-1));
    if (exit.exitCode !== 0 || !Number.isInteger(n)) throw new Error(`the sweep of leftover processes ended with ${exit.exitCode ?? exit.signal}`);
    return n;
  } finally {
    sub.dispose();
  }
}

/**
 * Runs the group's check in the sandbox as the host (docs/architecture.md §18), after the agent ended,
 * its leftovers were killed (`stopLeftoverProcesses`, before collect) and its run token was revoked:
 * the check gets the run's environment and network policy but cannot reach a model. Exit code,
 * duration and (capped, token-free) output are what the host saw; nothing the agent printed counts.
 * Never throws: a check that could not run is recorded as not passed, with why.
 */
export async function checkStep(host: StepHost, run: LiveRun, spec: RunCheckSpec, swept: number | { notRun: string }): Promise<RunCheckResult> {
  const sandbox = run.sandbox;
  const killedProcesses = typeof swept === 'number' ? swept : 0;
  const capture = new OutputCapture(CHECK_OUTPUT_CAP);
  const started = Date.now();
  let exitCode: number | null = null;
  let timedOut = false;
  let notRun: string | undefined;
  if (!sandbox) notRun = 'the run has no sandbox';
  else if (typeof swept !== 'number') notRun = swept.notRun;
  else if (run.cancelRequested) notRun = 'the run was cancelled';
  else {
    await host.update(run, { phase: 'running the check' });
    // The agent is gone: its token goes before the check runs code the agent may have written.
    host.deps.proxy.revokeRun(run.id);
    run.terminal.write(`\r\n\x1b[1m[airlock] check: ${spec.command.slice(0, 500)}\x1b[0m\r\n`);
    const output = new CommandOutput(run.tokenBytes ? [run.tokenBytes] : [], (_stream, bytes) => {
      capture.add(bytes);
      run.terminal.write(bytes);
    });
    try {
      const proc = sandbox.channel.spawn({ argv: ['bash', '-lc', spec.command], cwd: '/workspace', env: run.commandEnv, timeoutMs: spec.timeoutSec * 1000 });
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
    ...(notRun ? { notRun } : {}),
  };
  run.terminal.write(`\r\n[airlock] check ${result.passed ? 'passed' : 'failed'} (exit ${exitCode ?? (timedOut ? 'timeout' : 'none')}, ${result.durationMs} ms)\r\n`);
  await run.audit.append('note', { message: `check ${result.passed ? 'passed' : 'failed'}: ${spec.command.slice(0, 500)}`, check: { exitCode, passed: result.passed, timedOut, durationMs: result.durationMs, outputBytes: result.outputBytes, killedProcesses, ...(notRun ? { notRun } : {}) } });
  await host.update(run, { check: result });
  return result;
}
