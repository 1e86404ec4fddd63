import { AirlockError } from '../../contracts/errors';
import { debugLog } from '../common/debug-log';
import { EVERY_START_HOOKS, type LifecycleHook, type LifecycleStep } from '../environment/devcontainer-config';
import type { SetupPlan } from '../environment/setup-plan';
import type { Sandbox } from '../sandbox/sandbox';
import type { RunResult } from '../channel/channel-client';
import type { RunPrepared } from '../../contracts/environments';
import { restoreArgv } from '../environment/prepared-environments';
import type { PreparedState } from '../environment/run-environment';
import type { HydratedSandbox, LiveRun, PreparedSandbox, RunNetwork, RunWorkspaceState, StepHost } from './run-context';
import { endSetupProcesses } from './setup-end';
import { watchSetupProcess } from './setup-watch';
import { tlsFailureHint } from '../environment/tls-failure';
import { resolveContainerEnv } from '../environment/devcontainer-variables';

/** How long one setup command may run (a first `npm ci` or `pip install` of a large project). */
const SETUP_TIMEOUT_MS = 30 * 60_000;

/**
 * The setup phase (docs/architecture.md §16): the devcontainer's lifecycle commands, in the spec's
 * order (an object form's commands at once), before the run token exists and before any model call,
 * under their own network policy — the registries the project's manifests imply, plus the run's
 * `setupAllowlist`, through the allow-list egress proxy — which ends with the phase. A failing
 * command ends the run with its exit status and output. What setup changed becomes the agent's
 * starting point: the result's baseline is the workspace after setup, so review and apply show only
 * the agent's work.
 */
export async function setupStep(host: StepHost, run: LiveRun, env: Pick<PreparedSandbox, 'setup' | 'prepared' | 'env'>, ws: HydratedSandbox): Promise<RunWorkspaceState> {
  const plan = env.setup;
  const { sandbox, snapshot, hydrated } = ws;
  if (!plan) return { sandbox, snapshot, hydrated };
  const prepared = env.prepared;
  // A prepared environment holds what setup left; postStartCommand is for processes, so it runs at every start.
  const reuse = prepared?.reuse === true;
  const hooks = reuse ? plan.hooks.filter((h) => EVERY_START_HOOKS.includes(h.hook)) : plan.hooks;
  await host.update(run, { phase: reuse ? 'starting from the prepared environment' : 'setting up the environment' });
  run.terminal.write(`\r\n\x1b[1;36m── Setup (${plan.configPath}) ──\x1b[0m\r\n`);
  if (reuse && prepared) {
    await restorePrepared(host, run, sandbox, prepared, ws.preparedHome);
  }
  if (hooks.length) {
    await runHooks(host, run, sandbox, { ...plan, hooks }, env.env);
    // Nothing setup started outlives it: not into the capture below, not into the agent's phase (the run token).
    const ended = await endSetupProcesses(sandbox);
    await run.audit.append('note', {
      message: `setup ended: ${ended.leftover ? `${ended.leftover} process(es) it left running were killed` : 'it left no process running'}; none of the agent's user remains (verified ${ended.verifiedBy === 'engine' ? "by the engine's process list" : "in the sandbox's pid namespace"})`,
    });
    if (ended.leftover) run.terminal.write(`\x1b[33m[setup] ${ended.leftover} process(es) left running by setup were ended: lifecycle commands cannot leave processes for the agent's phase\x1b[0m\r\n`);
  }
  let after: RunWorkspaceState = { sandbox, snapshot, hydrated };
  if (reuse && prepared && !prepared.restoresWorkspace && !hooks.length) {
    // Nothing ran in the workspace and the image holds no workspace files (the host's own record of
    // what it committed): the hydrated project is already the agent's starting point.
    await run.audit.append('note', { message: "setup finished; the prepared environment holds no workspace files, so the agent's starting point is the project as copied in" });
  } else {
    // The agent starts from the workspace as setup left it: that is its baseline (derived on the host, like every result).
    const left = await host.workspace.collect(sandbox, { snapshot, hydrated, hints: [] });
    after = { sandbox, snapshot, hydrated: { ...hydrated, hostBaseline: Promise.resolve(left.result.resultCommit) } };
    run.made.workspace = after;
    await run.audit.append('note', { message: `setup finished; it changed ${left.result.changes.length} file(s), the agent's starting point (not its work)` });
    if (prepared && !reuse) await keepPrepared(host, run, sandbox, prepared, hydrated.manifest, left.result.changes);
  }
  run.terminal.write(`\x1b[1;36m── Agent ──\x1b[0m\r\n`);
  return after;
}

/** The lifecycle commands in order, under setup's own network (disposed when they end). */
async function runHooks(host: StepHost, run: LiveRun, sandbox: Sandbox, plan: SetupPlan, environmentEnv: Record<string, string>): Promise<void> {
  const allow = [...plan.presets.map((p) => `preset:${p}`), ...(run.input.setupAllowlist ?? [])];
  let net: RunNetwork | undefined;
  if (allow.length && host.deps.network) {
    // No rules and no secrets: setup never holds a credential (docs/architecture.md §16).
    net = await host.deps.network(sandbox, { runId: run.id, policy: 'allowlist', allowlist: allow, egressRules: [], secrets: [], projectDir: run.input.projectDir });
    net.onDidConnect((e) => host.auditLater(run, 'network', { policy: 'allowlist', host: e.host, port: e.port, allowed: e.allowed }));
  }
  const implied = plan.impliedBy.length ? ` (implied by ${plan.impliedBy.join(', ')})` : '';
  await run.audit.append('note', {
    message: `setup: ${plan.hooks.map((h) => h.hook).join(', ')} from ${plan.configPath}; network ${net ? `allowlist ${net.record.allow.join(', ')}${implied}` : 'none'}; no run token exists yet`,
  });
  try {
    const env = { ...environmentEnv, ...(net?.env ?? {}) };
    for (const { hook, steps } of plan.hooks) {
      await Promise.all(steps.map((step) => runSetupCommand(host, run, sandbox, plan, hook, step, env)));
    }
  } finally {
    net?.dispose();
  }
}

/** Puts a prepared environment's state in place over the freshly hydrated project: setup is not run again. */
async function restorePrepared(host: StepHost, run: LiveRun, sandbox: Sandbox, prepared: PreparedState, preparedHome: Promise<RunResult> | undefined): Promise<void> {
  run.terminal.write(`\x1b[36m[setup] starting from the prepared environment ${prepared.ref} (same inputs: setup not run again)\x1b[0m\r\n`);
  // The home's copy started with hydrate (restorePreparedHome); the workspace's goes over the fresh project.
  const home = await (preparedHome ?? restorePreparedHome(sandbox));
  const r = home.exitCode === 0 && prepared.restoresWorkspace ? await sandbox.channel.run({ argv: restoreArgv('workspace'), cwd: '/workspace', timeoutMs: SETUP_TIMEOUT_MS }) : home;
  if (r.exitCode !== 0) {
    throw new AirlockError('SANDBOX_FAILED', `Putting the prepared environment ${prepared.ref} in place failed (status ${r.exitCode ?? 'killed'}): ${r.stderr.toString('utf8').trim().slice(-1000)}. Clear it with \`airlock env prune\` and run again: setup will run and prepare it anew.`, { field: 'environment' });
  }
  await prepared.markUsed().catch(debugLog.swallow('prepared.markUsed'));
  await run.audit.append('note', { message: `setup skipped: started from the prepared environment ${prepared.ref} (key ${prepared.key}); its inputs are unchanged` });
  await updatePrepared(host, run, { status: 'reused', key: prepared.key, image: prepared.ref });
}

/** Copies a prepared environment's home into place (it does not depend on the project's copy). */
export function restorePreparedHome(sandbox: Sandbox): Promise<RunResult> {
  return sandbox.channel.run({ argv: restoreArgv('home'), cwd: '/workspace', timeoutMs: SETUP_TIMEOUT_MS });
}

/**
 * Keeps what setup left as this key's prepared environment, before the network step (no run token
 * exists) and before the agent. A first run of a follow-up is not kept: its home holds the parent
 * agent's session. The state leaves the sandbox here; the image is committed from it while the agent
 * works (`run.made.preparedKept`, which the wipe waits for). Failing to keep it is a note, not a failed run: the next run sets up again.
 */
async function keepPrepared(host: StepHost, run: LiveRun, sandbox: Sandbox, prepared: PreparedState, manifest: Array<{ path: string }>, changes: Array<{ path: string; oldPath?: string }>): Promise<void> {
  if (run.kind === 'agent' && run.spec.continuation) {
    await updatePrepared(host, run, { status: 'not-kept', key: prepared.key, reason: "a follow-up's sandbox holds the previous agent's session" });
    return;
  }
  await host.update(run, { phase: 'keeping the prepared environment' });
  const changed = new Set(changes.flatMap((c) => [c.path, ...(c.oldPath ? [c.oldPath] : [])]));
  const unchanged = new Set(manifest.map((m) => m.path).filter((p) => !changed.has(p)));
  const failed = async (err: unknown) => {
    const reason = err instanceof Error ? err.message.slice(0, 900) : String(err);
    await run.audit.append('note', { message: `the prepared environment could not be kept (${reason}); the next run sets up again` });
    await updatePrepared(host, run, { status: 'failed', key: prepared.key, reason });
  };
  let image: Promise<{ id: string; size: number }>;
  try {
    ({ image } = await prepared.capture(sandbox.channel, unchanged));
  } catch (err) {
    await failed(err);
    return;
  }
  run.made.preparedKept = image
    .then(async ({ id, size }) => {
      // The next run on these inputs starts from this image: that is the one to keep warm.
      if (run.made.warmNext) run.made.warmNext = { ...run.made.warmNext, image: id };
      await prepared.markUsed().catch(debugLog.swallow('prepared.markUsed'));
      await run.audit.append('note', { message: `prepared environment kept: ${prepared.ref} (${Math.round(size / 1024 / 1024)} MiB), captured after setup and before the agent; the next run on the same inputs skips setup` });
      await updatePrepared(host, run, { status: 'created', key: prepared.key, image: prepared.ref });
    }, failed)
    .catch(debugLog.swallow('run.prepared-kept'));
}

/** Whether the run started from a prepared environment, on its record (the report shows it). */
function updatePrepared(host: StepHost, run: LiveRun, prepared: RunPrepared): Promise<void> {
  return host.update(run, (r) => (r.environment ? { ...r, environment: { ...r.environment, prepared } } : r));
}

async function runSetupCommand(host: StepHost, run: LiveRun, sandbox: Sandbox, { configPath, cwd }: Pick<SetupPlan, 'configPath' | 'cwd'>, hook: LifecycleHook, step: LifecycleStep, env: Record<string, string>): Promise<void> {
  // `${containerEnv:NAME}` in a command is the container's own variable (docs/architecture.md §16).
  step = { ...step, argv: step.argv.map((a) => resolveContainerEnv(a, env)) };
  const label = `${hook}${step.name ? `.${step.name}` : ''}`;
  const shown = step.argv[0] === '/bin/sh' && step.argv[1] === '-c' ? (step.argv[2] ?? '') : step.argv.join(' ');
  run.terminal.write(`\x1b[36m[setup] ${label}: ${shown}\x1b[0m\r\n`);
  const proc = sandbox.channel.spawn({ argv: step.argv, cwd, env, timeoutMs: SETUP_TIMEOUT_MS });
  // Streamed as `setup` events with elapsed time; a stop kills it at once (setup-watch.ts).
  const exit = await watchSetupProcess(proc, {
    step: label,
    command: shown,
    emit: (e) => host.emitEvent(run, { type: 'setup', ...e }),
    write: (c) => run.terminal.write(c),
    signal: run.stop.signal,
    ...(host.deps.setupQuietMs ? { quietMs: host.deps.setupQuietMs } : {}),
  });
  const tail = exit.tail;
  if (exit.exitCode === 0 && !exit.timedOut) return;
  const status = exit.timedOut ? `did not finish within ${SETUP_TIMEOUT_MS / 60_000} minutes` : `exited with status ${exit.exitCode ?? 'unknown (killed)'}`;
  await run.audit.append('note', { message: `setup failed: ${label} ${status}` });
  const tls = tlsFailureHint(tail.toString('utf8'));
  throw new AirlockError(
    'SANDBOX_FAILED',
    `Setup failed: ${label} (${shown.slice(0, 200)}) ${status}. The agent was not started and no model was called.\n--- last output ---\n${tail.toString('utf8').trim()}\n---\n${tls ? `${tls}\n` : ''}Fix the command in ${configPath}, allow what it needs to reach (--setup-allow), or choose --environment airlock.`,
    { field: 'environment' },
  );
}
