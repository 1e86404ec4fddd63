import { AirlockError } from '../../contracts/errors';
import type { LifecycleHook, LifecycleStep } from '../environment/devcontainer-config';
import type { SetupPlan } from '../environment/setup-plan';
import type { Sandbox } from '../sandbox/sandbox';
import type { LiveRun, RunNetwork, StepHost } from './run-context';

/** How long one setup command may run (a first `npm ci` or `pip install` of a large project). */
const SETUP_TIMEOUT_MS = 30 * 60_000;
/** What a failure shows of a command's output. */
const TAIL_BYTES = 4096;

/**
 * The setup phase (docs/architecture.md §16): the devcontainer's lifecycle commands, in the spec's
 * order (an object form's commands at once), before the run token exists and before any model call,
 * under their own network policy — the registries the project's manifests imply, plus the run's
 * `setupAllowlist`, through the allow-list egress proxy — which ends with the phase. A failing
 * command ends the run with its exit status and output. What setup changed becomes the agent's
 * starting point: the result's baseline is the workspace after setup, so review and apply show only
 * the agent's work.
 */
export async function setupStep(host: StepHost, run: LiveRun, plan: SetupPlan | undefined): Promise<void> {
  if (!plan) return;
  const sandbox = run.sandbox;
  const hydrated = run.hydrated;
  const snapshot = run.snapshot;
  if (!sandbox || !hydrated || !snapshot) throw new AirlockError('INTERNAL', 'setup runs after prepare and hydrate');
  await host.update(run, { phase: 'setting up the environment' });
  run.terminal.write(`\r\n\x1b[1;36m── Setup (${plan.configPath}) ──\x1b[0m\r\n`);
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
    const env = { ...(run.environmentEnv ?? {}), ...(net?.env ?? {}) };
    for (const { hook, steps } of plan.hooks) {
      await Promise.all(steps.map((step) => runSetupCommand(run, sandbox, plan.configPath, hook, step, env)));
    }
  } finally {
    net?.dispose();
  }
  // The agent starts from the workspace as setup left it: that is its baseline (derived on the host, like every result).
  const after = await host.workspace.collect(sandbox, { snapshot, hydrated, hints: [] });
  run.hydrated = { ...hydrated, hostBaseline: Promise.resolve(after.result.resultCommit) };
  await run.audit.append('note', { message: `setup finished; it changed ${after.result.changes.length} file(s), the agent's starting point (not its work)` });
  run.terminal.write(`\x1b[1;36m── Agent ──\x1b[0m\r\n`);
}

async function runSetupCommand(run: LiveRun, sandbox: Sandbox, configPath: string, hook: LifecycleHook, step: LifecycleStep, env: Record<string, string>): Promise<void> {
  const label = `${hook}${step.name ? `.${step.name}` : ''}`;
  const shown = step.argv[0] === '/bin/sh' && step.argv[1] === '-c' ? (step.argv[2] ?? '') : step.argv.join(' ');
  run.terminal.write(`\x1b[36m[setup] ${label}: ${shown}\x1b[0m\r\n`);
  const proc = sandbox.channel.spawn({ argv: step.argv, cwd: '/workspace', env, timeoutMs: SETUP_TIMEOUT_MS });
  let tail = Buffer.alloc(0);
  const onOutput = (chunk: Buffer) => {
    run.terminal.write(chunk);
    tail = Buffer.concat([tail, chunk]);
    if (tail.length > TAIL_BYTES) tail = tail.subarray(tail.length - TAIL_BYTES);
  };
  const subs = [proc.onStdout(onOutput), proc.onStderr(onOutput)];
  let exit: { exitCode: number | null; timedOut: boolean };
  try {
    exit = await proc.exited;
  } finally {
    for (const s of subs) s.dispose();
  }
  if (exit.exitCode === 0 && !exit.timedOut) return;
  const status = exit.timedOut ? `did not finish within ${SETUP_TIMEOUT_MS / 60_000} minutes` : `exited with status ${exit.exitCode ?? 'unknown (killed)'}`;
  await run.audit.append('note', { message: `setup failed: ${label} ${status}` });
  throw new AirlockError(
    'SANDBOX_FAILED',
    `Setup failed: ${label} (${shown.slice(0, 200)}) ${status}. The agent was not started and no model was called.\n--- last output ---\n${tail.toString('utf8').trim()}\n---\nFix the command in ${configPath}, allow what it needs to reach (--setup-allow), or choose --environment airlock.`,
    { field: 'environment' },
  );
}
