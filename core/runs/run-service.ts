import { createHash, randomUUID } from 'node:crypto';
import path from 'node:path';
import type { AgentEvent } from '../../contracts/agent-events';
import { AirlockError, type ErrorInfo } from '../../contracts/errors';
import { newRunId } from '../../contracts/ids';
import { DEFAULT_GIT_HISTORY, isFinalStatus, type ContinueRunArgs, type McpAnswer, type NetworkAnswer, type RunAttempt, type RunEvent, type RunEventBody, type RunStatus, type StartRunArgs } from '../../contracts/runs';
import { runTerminalId } from '../../contracts/terminals';
import { commandOutputBytes } from '../agents';
import { AuditLog, type AuditRecordData, type AuditRecordType } from '../audit';
import { PROCESS_OWNER } from '../common/process-alive';
import { DisposableStore, Emitter, toDisposable, type Disposable, type Event } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import { unreachableMessage } from '../keys/connection-test';
import { budgetMessage } from '../proxy/budget';
import type { ModelCallEvent } from '../proxy/model-proxy';
import type { Sandbox, SandboxManager } from '../sandbox/sandbox';
import type { CollectedResult } from '../workspace/collect';
import { CommandLedger } from './command-ledger';
import { executeHostCommand, runHostCommand, type HostCommandResult } from './host-command';
import { realWorkspace, type LiveRun, type RunServiceDeps, type StepHost } from './run-context';
import type { AgentAdapter } from '../agents';
import { sessionControl, type RunSpec, type SandboxArgs } from './run-spec';
import type { StoredRun } from './run-record';
import { runSteps } from './run-steps';
import { resolveContinuation, type Continuation } from './run-thread';
import type { RunUpdate } from './run-store';
import { ownerIsGone } from './run-owner';
import { RunTerminal } from './run-terminal';
import { debugLog } from '../common/debug-log';

export type { EgressAttempt, RunNetwork, RunServiceDeps } from './run-context';

/** The VM driver each OS uses for `--isolation vm` (see core/app.ts). */
const VM_KIND = process.platform === 'darwin' ? 'lima' : process.platform === 'win32' ? 'wsl' : 'qemu';

const MAX_TERMINAL_ECHO = 2000;

/** What an MCP session is made from (docs/architecture.md §17). */
export interface SessionStartArgs {
  projectDir: string;
  /** The MCP client's own name and version (display only). */
  client: string;
  isolation: StartRunArgs['isolation'];
  network: StartRunArgs['network'];
  allowlist?: string[];
  /** Wall-clock limit of the whole session. */
  timeoutSec: number;
  gitHistory?: StartRunArgs['gitHistory'];
  /** The project environment (§16), already checked by the caller; absent: `auto`. */
  environment?: string;
  /** gitignore-style patterns copied besides, or left out besides, the defaults (`airlock sandbox exec`). */
  snapshot?: { include?: string[]; exclude?: string[] };
}

/** How an attempt of an attempt group starts (docs/architecture.md §18). */
export interface LaunchOptions {
  /** Recorded on the run: the group and the attempt's place in it. */
  attempt?: RunAttempt;
  /** Resolves once the run may start (it stays `queued` until then); disposing the slot frees it. */
  slot?: () => Promise<Disposable>;
}

/**
 * Runs tasks: one run = one task on one project with one agent and one provider/model, in its own
 * sandbox with its own run token (docs/architecture.md §1). The run itself is the steps in run-steps.ts;
 * this class starts, cancels and answers runs, pumps the agent's events, and records every transition
 * as an event and an audit record. The sandbox is always wiped and verified gone, also on failure and
 * cancel.
 */
export class RunService implements Disposable {
  private readonly live = new Map<string, LiveRun>();
  private readonly statusEmitter = new Emitter<StoredRun>();
  private readonly eventEmitter = new Emitter<RunEvent>();
  private readonly terminalEmitter = new Emitter<TerminalOutput>();
  private readonly filesEmitter = new Emitter<{ runId: string }>();
  private readonly subscriptions = new DisposableStore();

  /** A run changed status, phase, usage, changed-file count or pending approval. */
  readonly onDidChangeStatus: Event<StoredRun> = this.statusEmitter.event;
  /** A new numbered event of a live run (also written to its event log). */
  readonly onDidEvent: Event<RunEvent> = this.eventEmitter.event;
  /** Terminal output of a live run. */
  readonly onDidTerminalData: Event<TerminalOutput> = this.terminalEmitter.event;
  /** The changed files of a live run changed: refetch. */
  readonly onDidChangeFiles: Event<{ runId: string }> = this.filesEmitter.event;

  /** What the steps (run-steps.ts) may do: record progress and start the agent. */
  private readonly host: StepHost;

  constructor(private readonly deps: RunServiceDeps) {
    this.host = {
      deps,
      workspace: deps.workspace ?? realWorkspace,
      transition: (run, to, phase) => this.transition(run, to, phase),
      update: (run, patch) => this.update(run, patch),
      updateLater: (run, patch) => this.updateLater(run, patch),
      auditLater: (run, type, data) => this.auditLater(run, type, data),
      emitEvent: (run, event) => this.emitEvent(run, event),
      filesChanged: (run) => this.filesEmitter.fire({ runId: run.id }),
      runAgent: (run, agent, argv, env, cwd) => this.runAgent(run, agent, argv, env, cwd),
    };
    this.subscriptions.add(deps.proxy.onDidCall((e) => this.onModelCall(e)));
    this.subscriptions.add(
      deps.proxy.onDidSideDoor((e) => {
        const live = this.live.get(e.runId);
        if (live) this.auditLater(live, 'side_door', { provider: e.provider, path: e.path, stripped: e.stripped, allowed: e.allowed, ...(e.refused ? { refused: e.refused } : {}) });
      }),
    );
    if (deps.proxy.onDidRefreshSignin) {
      this.subscriptions.add(
        deps.proxy.onDidRefreshSignin((e) => {
          const live = this.live.get(e.runId);
          if (live) this.auditLater(live, 'note', { message: `the proxy refreshed the ${e.provider} sign-in (${e.reason === 'expiring' ? 'its access token was about to expire' : 'the provider refused the access token'}); the new tokens were stored where the sign-in is kept` });
        }),
      );
    }
  }

  /** Runs still in progress in this process. */
  activeRunIds(): string[] {
    return [...this.live.keys()];
  }

  /** A live run's sandbox (for an interactive shell, diffs while running). */
  sandboxOf(runId: string): Sandbox | undefined {
    return this.live.get(runId)?.sandbox;
  }

  /**
   * Crash recovery: runs left unfinished by a process that is gone are marked `interrupted` and their
   * sandboxes reaped. Runs owned by another live process are left alone. `othersOnly` (a process
   * already serving runs): sandboxes of this process are never touched, whatever their record says.
   */
  async recover(managers: SandboxManager[], opts: { othersOnly?: boolean } = {}): Promise<string[]> {
    const { runs } = await this.deps.store.list();
    const interrupted: string[] = [];
    for (const run of runs) {
      if (isFinalStatus(run.status) || this.live.has(run.id) || !ownerIsGone(run.owner)) continue;
      const audit = await AuditLog.open(this.deps.store.paths(run.id).audit).catch(() => undefined);
      // A log sealed just before the crash (or one too damaged to open) is left as it is: evidence.
      if (audit && !audit.sealed) {
        await audit.append('lifecycle', { from: run.status, to: 'interrupted', reason: 'the process driving the run stopped' });
        await audit.seal();
      }
      const updated = await this.deps.store.update(run.id, {
        status: 'interrupted',
        phase: undefined,
        pendingApproval: undefined,
        endedAt: new Date().toISOString(),
        error: { kind: 'CANCELLED', message: 'Airlock stopped while this run was in progress; its sandbox was reaped. The diff saved so far (if any) is kept.' },
        ...(audit ? { audit: { count: audit.count, head: audit.head } } : {}),
      });
      await audit?.close();
      interrupted.push(run.id);
      this.statusEmitter.fire(updated);
    }
    const liveOwners = new Set(runs.filter((r) => !isFinalStatus(r.status) && !ownerIsGone(r.owner)).map((r) => r.id));
    for (const manager of managers) {
      await manager.reapOrphans((runId) => this.live.has(runId) || liveOwners.has(runId), opts);
    }
    return interrupted;
  }

  /**
   * Queues a follow-up turn of a finished run (docs/architecture.md §15): same project, starting from
   * the parent's result, the agent's conversation carried when the agent and wire format stay.
   */
  async continue(args: ContinueRunArgs): Promise<StoredRun> {
    const { input, continuation, sessionId } = await resolveContinuation(this.deps.store, args, this.deps);
    return this.start(input, { continuation, sessionId });
  }

  /** Queues a run and starts it in the background; resolves with the queued record. */
  async start(input: StartRunArgs, follow?: { continuation: Continuation; sessionId: string }, options?: LaunchOptions): Promise<StoredRun> {
    const agent = this.deps.agent(input.agent);
    await this.checkAgentRun(input, agent);
    const spec: RunSpec = { kind: 'agent', args: input, agent, sessionId: follow?.sessionId ?? randomUUID(), ...(follow ? { continuation: follow.continuation } : {}) };
    return (await this.launch(spec, input, options)).record;
  }

  /**
   * Starts an MCP session (docs/architecture.md §17): a run with no agent and no run token whose
   * sandbox a client on the host drives (`execInSession`) until `endSession`. Recorded, audited and
   * wiped like every run; resolves once the sandbox is hydrated and running.
   */
  async startSession(input: SessionStartArgs): Promise<StoredRun> {
    const session = sessionControl(input.client, input.snapshot);
    const args: SandboxArgs = {
      projectDir: input.projectDir,
      isolation: input.isolation,
      network: input.network,
      ...(input.allowlist?.length ? { allowlist: input.allowlist } : {}),
      limits: { timeoutSec: input.timeoutSec },
      gitHistory: input.gitHistory ?? DEFAULT_GIT_HISTORY,
      ...(input.environment ? { environment: input.environment } : {}),
    };
    const { record, live } = await this.launch({ kind: 'session', control: session }, args);
    const outcome = await Promise.race([session.ready.then(() => undefined), live.done]);
    if (outcome) {
      const failed = outcome.error ?? { kind: 'SANDBOX_FAILED', message: `The sandbox ended before it was ready (${outcome.status}).` };
      throw new AirlockError(failed.kind, failed.message);
    }
    return this.deps.store.get(record.id).catch(() => record);
  }

  /**
   * Runs a command in a live MCP session's sandbox, as the host: recorded first-hand (terminal, events,
   * audit `command`), with `onOutput` seeing its output as it comes. The command gets no run token.
   */
  async execInSession(runId: string, req: { command: string; cwd: string; timeoutSec: number; capBytes: number; signal?: AbortSignal }, onOutput?: (stream: 'stdout' | 'stderr', bytes: Buffer) => void): Promise<HostCommandResult> {
    const live = this.liveSession(runId);
    const id = `mcp-${randomUUID()}`;
    // `bash -c` in the sandbox's environment: no login profile to read before each command.
    return executeHostCommand(live, { id, ...req, loginShell: false }, (e) => this.onAgentEvent(live, e, true), onOutput);
  }

  /**
   * An MCP session's changes so far, derived on the host (the same collect as at the end of a run,
   * docs/architecture.md §11): the change list, the patch and its digest.
   */
  async collectSession(runId: string): Promise<CollectedResult> {
    const live = this.liveSession(runId);
    const { sandbox, hydrated, snapshot } = live;
    if (!sandbox || !hydrated || !snapshot) throw new AirlockError('CONFLICT', `Sandbox ${runId} is still starting; ask again once sandbox_create has returned.`);
    return this.host.workspace.collect(sandbox, { snapshot, hydrated, hints: live.changeHints });
  }

  /** A live MCP session's sandbox (file reads, writes, listings), or CONFLICT saying why there is none. */
  sessionSandbox(runId: string): Sandbox {
    const sandbox = this.liveSession(runId).sandbox;
    if (!sandbox) throw new AirlockError('CONFLICT', `Sandbox ${runId} is still starting.`);
    return sandbox;
  }

  /** Adds a note to a live run's audit log (what an MCP client did besides commands: file writes). */
  async noteOn(runId: string, message: string, data?: Record<string, unknown>): Promise<void> {
    const live = this.live.get(runId);
    if (live) await live.audit.append('note', { message, ...(data ?? {}) }).catch(debugLog.swallow('run.audit.note'));
  }

  private liveSession(runId: string): LiveRun {
    const live = this.live.get(runId);
    if (live?.spec.kind !== 'session' || !live.spec.control.open) throw new AirlockError('CONFLICT', `Sandbox ${runId} is not live (destroyed, timed out, or never made here); create one with sandbox_create.`);
    return live;
  }

  /** Ends an MCP session: its result is collected, its sandbox wiped; resolves with the final record. */
  async endSession(runId: string, reason: string): Promise<StoredRun> {
    const live = this.live.get(runId);
    if (!live) return this.deps.store.get(runId);
    if (live.spec.kind !== 'session') throw new AirlockError('CONFLICT', `Run ${runId} is an agent run, not an MCP session; cancel it instead.`);
    live.spec.control.end(reason);
    return live.done;
  }

  /** Refuses an agent run its agent cannot do (approvals, MCP, the provider's wire format) or may not (the provider's credential). */
  private async checkAgentRun(input: StartRunArgs, agent: AgentAdapter): Promise<void> {
    if (input.approval === 'ask' && !agent.supportsApproval) {
      throw new AirlockError('INVALID_INPUT', `The ${input.agent} agent cannot pause for approvals; use approval mode "auto" (the sandbox is the boundary) or the built-in agent.`);
    }
    if (input.mcpServers?.length && !agent.supportsMcp) {
      throw new AirlockError('INVALID_INPUT', `The ${input.agent} agent is not pointed at Airlock's MCP gateway; use --mcp with the builtin, claude-code or codex agent, or start the run without --mcp.`, { field: 'mcpServers' });
    }
    await this.deps.checkProviderAccess?.(input.provider, input.agent);
    const format = await this.deps.providerFormat(input.provider);
    if (!agent.providerFormats.includes(format)) {
      throw new AirlockError('INVALID_INPUT', `The ${input.agent} agent does not speak the ${format} format of provider ${input.provider}; choose a ${agent.providerFormats.join(' or ')} provider.`);
    }
  }

  /** Records a queued run of either kind and starts its pipeline in the background. */
  private async launch(spec: RunSpec, input: SandboxArgs, options?: LaunchOptions): Promise<{ record: StoredRun; live: LiveRun }> {
    const id = newRunId();
    const now = new Date().toISOString();
    const shown = shownAs(spec);
    const follow = spec.kind === 'agent' ? spec.continuation : undefined;
    const record = await this.deps.store.create({
      id,
      kind: spec.kind,
      ...shown,
      projectDir: path.resolve(input.projectDir),
      ...(spec.kind === 'agent' && spec.args.customCommand ? { customCommand: spec.args.customCommand } : {}),
      status: 'queued',
      createdAt: now,
      updatedAt: now,
      isolation: input.isolation,
      network: input.network,
      sandbox: { driver: input.isolation === 'vm' ? VM_KIND : input.isolation === 'gvisor' ? 'gvisor' : 'docker' },
      limits: {
        timeoutSec: input.limits.timeoutSec,
        ...(input.limits.budgetTokens ? { budgetTokens: input.limits.budgetTokens } : {}),
        ...(input.limits.budgetUsd ? { budgetUsd: input.limits.budgetUsd } : {}),
      },
      owner: PROCESS_OWNER,
      ...(input.allowlist ? { allowlist: input.allowlist } : {}),
      ...(input.egressRules?.length ? { egressRules: input.egressRules } : {}),
      ...(input.secrets?.length ? { secrets: input.secrets } : {}),
      ...(input.networkApprovals ? { networkApprovals: input.networkApprovals } : {}),
      ...(spec.kind === 'agent' && spec.args.mcpServers?.length ? { mcpServers: spec.args.mcpServers } : {}),
      ...(input.internalHosts?.length ? { internalHosts: input.internalHosts } : {}),
      gitHistory: input.gitHistory ?? DEFAULT_GIT_HISTORY,
      ...(follow ? { thread: follow.thread } : {}),
      ...(options?.attempt ? { attempt: options.attempt } : {}),
    });
    const paths = this.deps.store.paths(id);
    const audit = await AuditLog.open(paths.audit);
    await audit.append('run_created', {
      runId: id,
      projectDir: record.projectDir,
      agent: shown.agent,
      ...(shown.mcpClient ? { mcpClient: shown.mcpClient } : {}),
      provider: shown.provider,
      model: shown.model,
      isolation: input.isolation,
      network: input.network,
      approval: shown.approval,
      taskSha256: createHash('sha256').update(shown.task).digest('hex'),
    });
    if (follow) {
      const { thread, parentWipedAt, previous, session } = follow;
      await audit.append('thread', {
        ...thread,
        parentWipedAt,
        resultFiles: previous.result.changes.length,
        sessionFiles: (session?.files ?? []).map((f) => ({ path: f.path, bytes: f.bytes, sha256: f.sha256 })),
      });
    }
    await audit.append('lifecycle', { from: null, to: 'queued' });
    const live: LiveRun = {
      id,
      spec,
      input,
      cancelRequested: false,
      timedOut: false,
      stop: new AbortController(),
      seq: 0,
      audit,
      terminal: new RunTerminal(runTerminalId(id), id, path.join(paths.dir, 'terminal.log'), (c) => this.terminalEmitter.fire(c)),
      disposables: new DisposableStore(),
      commands: new CommandLedger(),
      hostCommands: new Set(),
      changeHints: new Set(),
      commandEnv: {},
      pendingApprovals: new Map(),
      agentErrors: [],
      status: 'queued',
      done: Promise.resolve(record),
    };
    this.live.set(id, live);
    live.done = this.execute(live, options?.slot).finally(() => this.live.delete(id));
    this.statusEmitter.fire(record);
    return { record, live };
  }

  /** Resolves with the final record once the run has ended (at once for a finished run). */
  async wait(runId: string): Promise<StoredRun> {
    const live = this.live.get(runId);
    return live ? live.done : this.deps.store.get(runId);
  }

  /** Stops the agent; the diff so far is kept for review and the sandbox is wiped. */
  async cancel(runId: string): Promise<StoredRun> {
    const live = this.live.get(runId);
    if (!live) return this.deps.store.get(runId); // already finished: nothing to cancel
    if (!live.cancelRequested) {
      live.cancelRequested = true;
      live.stop.abort();
      await this.note(live, 'cancel requested by the user');
      live.agentProcess?.kill('SIGTERM');
      if (live.spec.kind === 'session') live.spec.control.end('cancelled');
    }
    return this.deps.store.get(runId);
  }

  /** Answers an approval request of a run in `ask` mode. */
  async approve(runId: string, requestId: string, approved: boolean): Promise<boolean> {
    const live = this.live.get(runId);
    const command = live?.pendingApprovals.get(requestId);
    if (!live || command === undefined || !live.agentProcess) return false;
    live.pendingApprovals.delete(requestId);
    const response: AgentEvent = { type: 'approval_response', id: requestId, approved };
    live.agentProcess.write(`${JSON.stringify(response)}\n`);
    await live.audit.append('approval', { id: requestId, command, approved, by: 'user' });
    this.emitEvent(live, response);
    await this.update(live, { pendingApproval: undefined });
    return true;
  }

  /**
   * Publishes a port of a live run's sandbox on a random 127.0.0.1 port of the host (never another
   * interface); it closes when the run ends.
   */
  async publishPort(runId: string, sandboxPort: number): Promise<{ sandboxPort: number; hostPort: number; url: string }> {
    const live = this.live.get(runId);
    if (!live?.previews) throw new AirlockError('CONFLICT', 'The run has no live sandbox (not started yet, or already ended); ports are published while it runs.');
    const p = await live.previews.publish(sandboxPort);
    await this.note(live, `published sandbox port ${sandboxPort} at ${p.url}`);
    return { sandboxPort, hostPort: p.hostPort, url: p.url };
  }

  /** The ports a live run has published (none once it has ended). */
  previewPorts(runId: string): Array<{ sandboxPort: number; hostPort: number; url: string }> {
    return this.live.get(runId)?.previews?.list() ?? [];
  }

  /** Every port published by a live run (the desktop app opens only these loopback links). */
  allPreviewPorts(): Array<{ sandboxPort: number; hostPort: number; url: string }> {
    return [...this.live.values()].flatMap((l) => l.previews?.list() ?? []);
  }

  /** Allows a host the run's egress proxy denied (allow-list policy), while the run goes on. */
  async allowNetwork(runId: string, host: string, port: number | undefined, scope: 'once' | 'run' | 'project'): Promise<void> {
    const live = this.live.get(runId);
    if (!live?.network) throw new AirlockError('CONFLICT', 'The run is not live under the allow-list network policy; nothing to allow.');
    await live.network.allow(host, port, scope);
    await live.audit.append('network', { policy: live.input.network, host, ...(port ? { port } : {}), allowed: true });
    await this.note(live, `network: ${host}${port ? `:${port}` : ''} allowed (${scope}) by the user`);
  }

  /** Answers a network question of a live run (a waiting request, or an agent-proposed rule). */
  async answerNetwork(runId: string, id: string, answer: NetworkAnswer): Promise<boolean> {
    const live = this.live.get(runId);
    const approvals = live?.network?.approvals;
    if (!live || !approvals) return false;
    // Recorded by the approvals' own resolve event (answer and who gave it).
    return approvals.answer(id, answer);
  }

  /** Answers an MCP question of a live run (a call through its gateway waits, docs/architecture.md §20). */
  answerMcp(runId: string, id: string, answer: McpAnswer): boolean {
    // Recorded by the questions' own resolve event (answer and who gave it).
    return this.live.get(runId)?.mcp?.gateway.questions?.answer(id, answer) ?? false;
  }

  /** Stops every live run (cancel + wipe) and waits for them. */
  async shutdown(): Promise<void> {
    const runs = [...this.live.values()];
    await Promise.all(runs.map((r) => this.cancel(r.id).catch(() => undefined)));
    await Promise.all(runs.map((r) => r.done.catch(() => undefined)));
  }

  dispose(): void {
    this.subscriptions.dispose();
    void this.shutdown();
  }

  // --- the run itself -------------------------------------------------------------------------

  /** Runs the steps under the run's wall-clock limit, then records how the run ended. */
  private async execute(live: LiveRun, slot?: LaunchOptions['slot']): Promise<StoredRun> {
    // An attempt waits `queued` for a slot of its group (attempt-group.ts); its clock starts with it.
    const held = slot ? await slot() : undefined;
    try {
      return await this.executeSteps(live);
    } finally {
      held?.dispose();
    }
  }

  private async executeSteps(live: LiveRun): Promise<StoredRun> {
    const { input } = live;
    const wallClock = setTimeout(() => {
      live.timedOut = true;
      live.stop.abort();
      void this.note(live, `run timed out after ${input.limits.timeoutSec} s`);
      live.agentProcess?.kill('SIGTERM');
      if (live.spec.kind === 'session') live.spec.control.end(`time limit of ${input.limits.timeoutSec} s reached`);
    }, input.limits.timeoutSec * 1000);
    live.disposables.add(toDisposable(() => clearTimeout(wallClock)));
    const { failure, wipe } = await runSteps(this.host, live);
    return this.settle(live, failure, wipe);
  }

  /** Starts the agent in the sandbox and pumps its output into events until it exits. */
  private async runAgent(live: LiveRun, agent: AgentAdapter, argv: string[], env: Record<string, string>, cwd = '/workspace'): Promise<void> {
    const sandbox = live.sandbox as Sandbox;
    const parser = agent.createParser();
    const proc = sandbox.channel.spawn({ argv, cwd, env });
    live.agentProcess = proc;
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
    live.agentProcess = undefined;
    // A command the agent asked for does not outlive it.
    for (const c of live.hostCommands) c.kill('SIGKILL');
    if (live.cancelRequested) return;
    if (live.timedOut) throw new AirlockError('COMMAND_TIMEOUT', `The run reached its time limit (${live.input.limits.timeoutSec} s); the agent was stopped.`);
    // Judged on the host: the proxy refused a call for the budget (the agent's own words are not trusted).
    const budget = this.deps.proxy.budgetStop(live.id);
    if (budget) throw new AirlockError('BUDGET_EXCEEDED', `${budgetMessage(budget)} The changes made so far are kept for review.`);
    // The built-in agent exits 2 when it reached its step limit: a normal stop, its diff is the result.
    const stepLimit = exit.exitCode === 2 && live.finishReason === 'max_steps';
    if (stepLimit) live.terminal.write('\r\n[airlock] the agent stopped at its step limit\r\n');
    if (exit.exitCode !== 0 && !stepLimit) {
      // Judged on the host from what the proxy saw: the sandbox's own words cannot tell a refused
      // run token from a refused provider key.
      if (live.keyRefused) {
        const { provider, status } = live.keyRefused;
        throw new AirlockError('UNAUTHORIZED', `The provider refused your ${provider} key (HTTP ${status}). Replace the key, then run again.`);
      }
      if (live.upstreamFailed) throw upstreamFailure(live.upstreamFailed);
      const last = live.agentErrors.at(-1)?.message;
      throw new AirlockError('SANDBOX_FAILED', `The agent exited with ${exit.exitCode ?? exit.signal}${last ? `: ${last}` : ''}.`);
    }
  }

  /**
   * One event of the run. `observed` is true only for the host's own account of a command it ran
   * (host-run commands); the same event types from the agent's output are claims.
   */
  private onAgentEvent(live: LiveRun, event: AgentEvent, observed = false): void {
    const source = observed ? 'observed' : 'claimed';
    switch (event.type) {
      case 'command_request':
        // Protocol, not history: the command's own events follow, as the host observed them.
        void runHostCommand(live, event, (e) => this.onAgentEvent(live, e, true));
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
        this.auditLater(live, record.type, record.data);
        if (event.timedOut) live.terminal.write(`\r\n[airlock: command timed out]\r\n`);
        break;
      }
      case 'approval_request': {
        live.pendingApprovals.set(event.id, event.command);
        this.updateLater(live, { pendingApproval: { requestId: event.id, command: event.command, requestedAt: new Date().toISOString() } });
        this.deps.notify?.({ runId: live.id, title: 'Airlock: approval needed', body: event.command.slice(0, 200) });
        break;
      }
      case 'agent_error':
        live.agentErrors.push({ message: event.message, ...(event.status !== undefined ? { status: event.status } : {}) });
        live.terminal.write(`\r\n\x1b[31m[agent error] ${event.message}\x1b[0m\r\n`);
        break;
      case 'finished':
        live.summary = event.summary;
        live.finishReason = event.reason;
        break;
      default:
        break;
    }
    this.emitEvent(live, event);
  }

  private onModelCall(e: ModelCallEvent): void {
    const live = this.live.get(e.runId);
    if (!live) return;
    // The proxy records only calls it admitted and sent upstream (its own refusals, a bad run token
    // included, are not calls), so a 401/403 here is the provider refusing the real key.
    if (e.status === 401 || e.status === 403) live.keyRefused ??= { provider: e.provider, status: e.status };
    if (e.unreachable) live.upstreamFailed = { provider: e.provider, baseUrl: e.unreachable.baseUrl, code: e.unreachable.code, status: e.status };
    else if (e.status >= 500) live.upstreamFailed = { provider: e.provider, status: e.status };
    else if (e.status < 400) live.upstreamFailed = undefined;
    this.auditLater(live, 'model_call', {
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
    this.updateLater(live, { usage });
  }

  /** After the wipe: the final status, the sealed audit log and the final record. */
  private async settle(live: LiveRun, failure: ErrorInfo | undefined, wipe: StoredRun['wipe']): Promise<StoredRun> {
    live.terminal.exit(null);
    await live.terminal.flush();
    await this.deps.store.flushEvents(live.id);
    const status: RunStatus = live.cancelRequested ? 'cancelled' : failure ? 'failed' : 'done';
    await live.audit.append('lifecycle', { from: live.status, to: status, ...(failure ? { reason: failure.message } : {}) });
    await live.audit.seal();
    live.status = status;
    const record = await this.deps.store.update(live.id, {
      status,
      phase: undefined,
      pendingApproval: undefined,
      endedAt: new Date().toISOString(),
      ...(failure && !live.cancelRequested ? { error: failure } : {}),
      ...(live.summary ? { summary: live.summary } : {}),
      ...(wipe ? { wipe } : {}),
      audit: { count: live.audit.count, head: live.audit.head },
    });
    this.emitEvent(live, { type: 'status', status, ...(failure ? { error: failure } : {}) });
    await this.deps.store.flushEvents(live.id);
    this.statusEmitter.fire(record);
    return record;
  }

  private async transition(live: LiveRun, to: RunStatus, phase?: string): Promise<void> {
    const from = live.status;
    live.status = to;
    await live.audit.append('lifecycle', { from, to });
    await this.update(live, {
      status: to,
      ...(phase ? { phase } : {}),
      ...(to === 'running' ? { startedAt: new Date().toISOString() } : {}),
    });
    this.emitEvent(live, { type: 'status', status: to, ...(phase ? { phase } : {}) });
  }

  private async update(live: LiveRun, patch: RunUpdate): Promise<void> {
    const record = await this.deps.store.update(live.id, patch);
    this.statusEmitter.fire(record);
  }

  /** Appends without waiting (event handlers); a record after the seal is dropped, never thrown. */
  private auditLater<T extends AuditRecordType>(live: LiveRun, type: T, data: AuditRecordData[T]): void {
    live.audit.append(type, data).catch(debugLog.swallow('run.audit.append'));
  }

  /** Updates without waiting (event handlers); a failed write is retried by the next update. */
  private updateLater(live: LiveRun, patch: RunUpdate): void {
    this.update(live, patch).catch(debugLog.swallow('run.record.update'));
  }

  private async note(live: LiveRun, message: string): Promise<void> {
    await live.audit.append('note', { message }).catch(debugLog.swallow('run.audit.note'));
  }

  private emitEvent(live: LiveRun, event: RunEventBody): void {
    const runEvent: RunEvent = { runId: live.id, seq: live.seq++, at: new Date().toISOString(), event };
    // Command output is kept once, in the terminal log; the event log would hold it a second time.
    if (event.type !== 'command_output' && !(event.type === 'setup' && event.phase === 'output')) this.deps.store.appendEvents(live.id, [runEvent]);
    this.eventEmitter.fire(runEvent);
  }
}

/**
 * How a run shows in lists, the record and the audit log: an agent run by its task, agent and model;
 * a session by its client, under the agent name `mcp` with no provider (the contract's RunSummary
 * has these fields for every run; the record's `kind` says which run it is).
 */
function shownAs(spec: RunSpec): { task: string; agent: StoredRun['agent']; mcpClient?: string; provider: string; model: string; approval: 'auto' | 'ask' } {
  if (spec.kind === 'agent') return { task: spec.args.task, agent: spec.agent.id, provider: spec.args.provider, model: spec.args.model, approval: spec.args.approval };
  return { task: `MCP session (${spec.control.client})`, agent: 'mcp', mcpClient: spec.control.client, provider: 'none', model: '', approval: 'auto' };
}

/**
 * A run stopped because the provider failed, in the words of the Keys screen's Test connection
 * (where, why, what to do) — judged from the proxy's own calls, never the agent's output.
 */
function upstreamFailure(f: NonNullable<LiveRun['upstreamFailed']>): AirlockError {
  const what = f.baseUrl && f.code ? unreachableMessage(f.baseUrl, f.code) : `${f.provider}'s server answered HTTP ${f.status}; it may be down or overloaded, try again later or check the base URL`;
  return new AirlockError('UPSTREAM_ERROR', `The agent stopped: ${what}. Test the connection to ${f.provider} (Keys & providers), then run again.`, { field: 'provider' });
}
