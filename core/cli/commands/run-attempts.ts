import type { AttemptSpec, Comparison } from '../../../contracts/attempts';
import { MAX_ATTEMPTS } from '../../../contracts/attempts';
import { defaultModelFor } from '../../../contracts/run-defaults';
import { AgentKind, isFinalStatus, type StartRunArgs } from '../../../contracts/runs';
import type { Settings } from '../../../contracts/settings';
import type { AirlockCore } from '../../app';
import type { servicesFor } from '../../app-services';
import { CliUsageError } from '../args';
import { ExitCode, type CliIo } from '../command';
import { printComparison } from './compare';

/** The provider an attempt takes when it names none: the agent's own wire, else the run's. */
const AGENT_PROVIDER: Partial<Record<AgentKind, string>> = { 'claude-code': 'anthropic', codex: 'openai' };

/**
 * `--attempts claude-code,codex,builtin:MODEL`: `agent`, `agent:model` or `agent:provider/model`,
 * comma-separated. An attempt without a provider takes its agent's (Claude Code: anthropic, Codex:
 * openai) or the run's; without a model, the run's model on the run's provider, else the provider's default.
 */
export async function parseAttempts(text: string, base: { provider: string; model: string }, core: Pick<AirlockCore, 'catalog'>, settings: Settings): Promise<AttemptSpec[]> {
  const items = text.split(',').map((s) => s.trim()).filter(Boolean);
  if (!items.length) throw new CliUsageError('--attempts takes a comma-separated list of agents, e.g. claude-code,codex,builtin:claude-sonnet-4-5');
  if (items.length > MAX_ATTEMPTS) throw new CliUsageError(`--attempts takes at most ${MAX_ATTEMPTS} attempts (got ${items.length})`);
  const specs: AttemptSpec[] = [];
  for (const item of items) {
    const colon = item.indexOf(':');
    const agentText = colon < 0 ? item : item.slice(0, colon);
    const rest = colon < 0 ? '' : item.slice(colon + 1);
    const agent = AgentKind.safeParse(agentText);
    if (!agent.success || agent.data === 'custom') throw new CliUsageError(`--attempts: '${agentText.slice(0, 40)}' is not an agent; use builtin, claude-code or codex (optionally :model or :provider/model)`);
    const slash = rest.indexOf('/');
    const provider = slash > 0 ? rest.slice(0, slash) : (AGENT_PROVIDER[agent.data] ?? base.provider);
    let model = slash > 0 ? rest.slice(slash + 1) : rest;
    if (!model) model = provider === base.provider ? base.model : (defaultModelFor(settings, await core.catalog.get(provider)) ?? '');
    if (!model) throw new CliUsageError(`--attempts: provider ${provider} lists no models; write ${agent.data}:${provider}/MODEL`);
    specs.push({ agent: agent.data, provider, model });
  }
  return specs;
}

/**
 * Runs an attempt group to its end: queues every attempt, shows each one's status as it changes, then
 * prints the comparison (`--json`: a line with the group id first, the comparison object last).
 */
export async function runAttemptGroup(io: CliIo, services: ReturnType<typeof servicesFor>, core: AirlockCore, run: StartRunArgs, attempts: AttemptSpec[], json: boolean): Promise<number> {
  const line = (o: unknown) => io.stdout.write(`${JSON.stringify(o)}\n`);
  const group = await services.attempts.start({ run, attempts });
  if (json) line({ type: 'attempts_started', groupId: group.id, concurrency: group.concurrency, attempts: group.attempts });
  else {
    io.stdout.write(`attempt group ${group.id}: ${group.attempts.length} attempts, ${group.concurrency} at a time${run.check ? `, check: ${run.check.command}` : ''}\n`);
    for (const a of group.attempts) io.stdout.write(`  ${a.index + 1}. ${a.agent} ${a.provider}/${a.model}  ${a.runId}  queued\n`);
  }
  const ids = new Set(group.attempts.map((a) => a.runId));
  const last = new Map<string, string>();
  const sub = services.runs.onDidChangeStatus((s) => {
    if (!ids.has(s.id) || last.get(s.id) === s.status) return;
    last.set(s.id, s.status);
    const a = group.attempts.find((x) => x.runId === s.id);
    if (json) line({ type: 'attempt_status', groupId: group.id, runId: s.id, status: s.status });
    else io.stdout.write(`  ${(a?.index ?? 0) + 1}. ${a?.agent ?? ''} ${s.status}${s.check ? ` — check ${s.check.passed ? 'passed' : 'failed'}` : ''}\n`);
  });
  let interrupts = 0;
  const onSigint = () => {
    if (++interrupts > 1) process.exit(ExitCode.runNotDone);
    io.stderr.write('\ncancelling every attempt — wiping their sandboxes (Ctrl-C again to leave now)\n');
    for (const id of ids) void services.runs.cancel({ runId: id });
  };
  process.on('SIGINT', onSigint);
  try {
    const finals = await Promise.all([...ids].map((id) => core.runs.wait(id)));
    const comparison: Comparison = await services.attempts.compare({ groupId: group.id });
    if (json) line({ type: 'attempts_done', ...comparison });
    else {
      io.stdout.write('\n');
      printComparison(io, comparison);
    }
    return finals.every((r) => isFinalStatus(r.status) && r.status === 'done') ? ExitCode.ok : ExitCode.runNotDone;
  } finally {
    process.off('SIGINT', onSigint);
    sub.dispose();
  }
}
