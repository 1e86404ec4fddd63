import type { AgentEvent } from '../../contracts/agent-events';
import { AirlockError } from '../../contracts/errors';
import { commandOutputBytes } from '../agents';
import { DisposableStore } from '../common/disposable';
import { unreachableMessage } from '../keys/connection-test';
import { budgetMessage } from '../proxy/budget';
import type { ModelCallEvent } from '../proxy/model-proxy';
import type { Sandbox } from '../sandbox/sandbox';
import { runHostCommand } from './host-command';
import type { AgentLive, LiveAgentRun, LiveRun, RunServiceDeps } from './run-context';
import type { RunRecorder } from './run-recorder';

const MAX_TERMINAL_ECHO = 2000;

/**
 * A live agent run's agent as the host sees it (docs/architecture.md §1): its process and the events
 * it prints, the host-run commands it asks for, and the model proxy's account of its calls. How the
 * agent ended is judged here, from what the host and the proxy saw, never from the agent's words.
 */
export class RunAgentEvents {
  constructor(
    private readonly deps: RunServiceDeps,
    private readonly rec: RunRecorder,
  ) {}

  /** Starts the agent in the sandbox and pumps its output into events until it exits. */
  async runAgent(live: LiveAgentRun, sandbox: Sandbox, argv: string[], env: Record<string, string>, cwd = '/workspace'): Promise<void> {
    const agent = live.spec.agent;
    const parser = agent.createParser();
    const proc = sandbox.channel.spawn({ argv, cwd, env });
    live.agent.process = proc;
    if (live.cancelRequested || live.timedOut) proc.kill('SIGTERM');
    // Structured agents: their JSON goes to the transcript, the terminal shows what their commands printed.
    const raw = agent.terminal === 'raw';
    const pump = new DisposableStore();
    pump.add(
      proc.onStdout((chunk) => {
        if (raw) live.terminal.write(chunk);
        for (const event of parser.push(chunk)) this.onAgentEvent(live, event);
      }),
    );
    pump.add(proc.onStderr((chunk) => live.terminal.write(chunk)));
    const exit = await proc.exited;
    for (const event of parser.end()) this.onAgentEvent(live, event);
    pump.dispose();
    delete live.agent.process;
    // A command the agent asked for does not outlive it.
    for (const c of live.hostCommands) c.kill('SIGKILL');
    if (live.cancelRequested) return;
    if (live.timedOut) throw new AirlockError('COMMAND_TIMEOUT', `The run reached its time limit (${live.input.limits.timeoutSec} s); the agent was stopped.`);
    // Judged on the host: the proxy refused a call for the budget (the agent's own words are not trusted).
    const budget = this.deps.proxy.budgetStop(live.id);
    if (budget) throw new AirlockError('BUDGET_EXCEEDED', `${budgetMessage(budget)} The changes made so far are kept for review.`);
    // The built-in agent exits 2 when it reached its step limit: a normal stop, its diff is the result.
    const stepLimit = exit.exitCode === 2 && live.agent.finishReason === 'max_steps';
    if (stepLimit) live.terminal.write('\r\n[airlock] the agent stopped at its step limit\r\n');
    if (exit.exitCode !== 0 && !stepLimit) throw exitFailure(live.agent, exit.exitCode ?? exit.signal);
  }

  /**
   * One event of the run. `observed` is true only for the host's own account of a command it ran
   * (host-run commands, an MCP session's commands); the same event types from the agent's output are claims.
   */
  onAgentEvent(live: LiveRun, event: AgentEvent, observed = false): void {
    const source = observed ? 'observed' : 'claimed';
    switch (event.type) {
      case 'command_request':
        // Protocol, not history: the command's own events follow, as the host observed them.
        if (live.kind === 'agent') void runHostCommand(live, event, (e) => this.onAgentEvent(live, e, true));
        return;
      case 'command_started': {
        live.commands.started(source, event.id, event.command, event.cwd);
        live.terminal.write(`\r\n\x1b[1m$ ${event.command.slice(0, MAX_TERMINAL_ECHO)}\x1b[0m\r\n`);
        break;
      }
      case 'command_output': {
        // Bytes from the parser, never decoded here; the UI's run terminal converts bare newlines.
        const bytes = commandOutputBytes(event);
        live.commands.output(source, event.id, bytes);
        live.terminal.write(bytes);
        break;
      }
      case 'command_exited': {
        // Only what the host ran and saw is a `command` record; the agent's own word is a claim.
        const record = live.commands.exited(source, event);
        this.rec.auditLater(live, record.type, record.data);
        if (event.timedOut) live.terminal.write(`\r\n[airlock: command timed out]\r\n`);
        break;
      }
      default:
        if (live.kind === 'agent') this.onAgentOnly(live, event);
        break;
    }
    this.rec.emitEvent(live, event);
  }

  /** The events only an agent prints: approval requests, its errors, its end. */
  private onAgentOnly(live: LiveAgentRun, event: AgentEvent): void {
    switch (event.type) {
      case 'approval_request': {
        live.agent.pendingApprovals.set(event.id, event.command);
        this.rec.updateLater(live, { pendingApproval: { requestId: event.id, command: event.command, requestedAt: new Date().toISOString() } });
        this.deps.notify?.({ runId: live.id, title: 'Airlock: approval needed', body: event.command.slice(0, 200) });
        break;
      }
      case 'agent_error':
        live.agent.errors.push({ message: event.message, ...(event.status !== undefined ? { status: event.status } : {}) });
        live.terminal.write(`\r\n\x1b[31m[agent error] ${event.message}\x1b[0m\r\n`);
        break;
      case 'finished':
        live.agent.summary = event.summary;
        live.agent.finishReason = event.reason;
        break;
      default:
        break;
    }
  }

  /** A model call the proxy made for a live agent run: audited, its usage on the record, a refused key or failing provider noted. */
  onModelCall(e: ModelCallEvent): void {
    const live = this.rec.live.get(e.runId);
    if (live?.kind !== 'agent') return;
    const agent = live.agent;
    // The proxy records only calls it admitted and sent upstream (its own refusals, a bad run token
    // included, are not calls), so a 401/403 here is the provider refusing the real key.
    if (e.status === 401 || e.status === 403) agent.keyRefused ??= { provider: e.provider, status: e.status };
    if (e.unreachable) agent.upstreamFailed = { provider: e.provider, baseUrl: e.unreachable.baseUrl, code: e.unreachable.code, status: e.status };
    else if (e.status >= 500) agent.upstreamFailed = { provider: e.provider, status: e.status };
    else if (e.status < 400) delete agent.upstreamFailed;
    this.rec.auditLater(live, 'model_call', {
      provider: e.provider,
      model: e.model,
      status: e.status,
      latencyMs: Math.round(e.latencyMs),
      inputTokens: e.inputTokens,
      outputTokens: e.outputTokens,
      cacheReadTokens: e.cacheReadTokens,
      cacheWriteTokens: e.cacheWriteTokens,
      ...(e.costUsd !== undefined ? { costUsd: e.costUsd } : {}),
      stream: e.stream,
    });
    const usage = this.deps.proxy.usage(e.runId);
    this.rec.updateLater(live, { usage });
  }
}

/**
 * Why an agent that exited non-zero failed, judged on the host from what the proxy saw: the
 * sandbox's own words cannot tell a refused run token from a refused provider key.
 */
function exitFailure(agent: AgentLive, status: number | string | null): AirlockError {
  if (agent.keyRefused) {
    const { provider, status: http } = agent.keyRefused;
    return new AirlockError('UNAUTHORIZED', `The provider refused your ${provider} key (HTTP ${http}). Replace the key, then run again.`);
  }
  if (agent.upstreamFailed) return upstreamFailure(agent.upstreamFailed);
  const last = agent.errors.at(-1)?.message;
  return new AirlockError('SANDBOX_FAILED', `The agent exited with ${status}${last ? `: ${last}` : ''}.`);
}

/**
 * A run stopped because the provider failed, in the words of the Keys screen's Test connection
 * (where, why, what to do) — judged from the proxy's own calls, never the agent's output.
 */
function upstreamFailure(f: NonNullable<AgentLive['upstreamFailed']>): AirlockError {
  const what = f.baseUrl && f.code ? unreachableMessage(f.baseUrl, f.code) : `${f.provider}'s server answered HTTP ${f.status}; it may be down or overloaded, try again later or check the base URL`;
  return new AirlockError('UPSTREAM_ERROR', `The agent stopped: ${what}. Test the connection to ${f.provider} (Keys & providers), then run again.`, { field: 'provider' });
}
