import { createHash, randomUUID } from 'node:crypto';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { newRunId } from '../../contracts/ids';
import { DEFAULT_GIT_HISTORY, isFinalStatus, type ContinueRunArgs, type RunAttempt, type StartRunArgs } from '../../contracts/runs';
import { runTerminalId } from '../../contracts/terminals';
import type { AgentAdapter } from '../agents';
import { AuditLog } from '../audit';
import { DisposableStore, toDisposable, type Disposable } from '../common/disposable';
import { PROCESS_OWNER } from '../common/process-alive';
import type { SandboxManager } from '../sandbox/sandbox';
import { CommandLedger } from './command-ledger';
import type { LiveRun, LiveSessionRun, RunServiceDeps, StepHost } from './run-context';
import { ownerIsGone } from './run-owner';
import type { RunRecorder } from './run-recorder';
import type { StoredRun } from './run-record';
import type { RunSpec, SandboxArgs } from './run-spec';
import { runSteps } from './run-steps';
import { RunTerminal } from './run-terminal';
import { resolveContinuation, type Continuation } from './run-thread';

/** The VM driver each OS uses for `--isolation vm` (see core/app.ts). */
const VM_KIND = process.platform === 'darwin' ? 'lima' : process.platform === 'win32' ? 'wsl' : 'qemu';

/** How an attempt of an attempt group starts (docs/architecture.md §18). */
export interface LaunchOptions {
  /** Recorded on the run: the group and the attempt's place in it. */
  attempt?: RunAttempt;
  /** Resolves once the run may start (it stays `queued` until then); disposing the slot frees it. */
  slot?: () => Promise<Disposable>;
}

/**
 * A run's lifecycle (docs/architecture.md §1): queued and recorded, its pipeline (run-steps.ts) run
 * under its wall-clock limit, cancelled, ended with its sandbox wiped and its record final; and,
 * after a crash, the runs a gone process left marked `interrupted` and their sandboxes reaped.
 */
export class RunLifecycle {
  constructor(
    private readonly deps: RunServiceDeps,
    private readonly rec: RunRecorder,
    private readonly host: StepHost,
  ) {}

  /**
   * Crash recovery: runs left unfinished by a process that is gone are marked `interrupted` and their
   * sandboxes reaped. Runs owned by another live process are left alone. `othersOnly` (a process
   * already serving runs): sandboxes of this process are never touched, whatever their record says.
   */
  async recover(managers: SandboxManager[], opts: { othersOnly?: boolean } = {}): Promise<string[]> {
    const { runs } = await this.deps.store.list();
    const interrupted: string[] = [];
    for (const run of runs) {
      if (isFinalStatus(run.status) || this.rec.live.has(run.id) || !ownerIsGone(run.owner)) continue;
      await this.markInterrupted(run);
      interrupted.push(run.id);
    }
    const liveOwners = new Set(runs.filter((r) => !isFinalStatus(r.status) && !ownerIsGone(r.owner)).map((r) => r.id));
    for (const manager of managers) {
      await manager.reapOrphans((runId) => this.rec.live.has(runId) || liveOwners.has(runId), opts);
    }
    return interrupted;
  }

  /** A run whose process is gone: `interrupted`, its audit log sealed with the reason. */
  private async markInterrupted(run: StoredRun): Promise<void> {
    // A log too damaged to open reads as none (and is left alone below).
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
    this.rec.fireStatus(updated);
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
  async launch(spec: RunSpec, input: SandboxArgs, options?: LaunchOptions): Promise<{ record: StoredRun; live: LiveRun }> {
    const id = newRunId();
    const record = await this.createRecord(id, spec, input, options);
    const audit = await this.openAudit(record, spec, input);
    const live = this.liveRun(id, spec, input, audit, record);
    this.rec.live.set(id, live);
    live.done = this.execute(live, options?.slot).finally(() => this.rec.live.delete(id));
    this.rec.fireStatus(record);
    return { record, live };
  }

  /** The queued run's record: how it shows, the sandbox's settings, its limits, its place in a thread or group. */
  private createRecord(id: string, spec: RunSpec, input: SandboxArgs, options?: LaunchOptions): Promise<StoredRun> {
    const now = new Date().toISOString();
    const follow = spec.kind === 'agent' ? spec.continuation : undefined;
    return this.deps.store.create({
      id,
      kind: spec.kind,
      ...shownAs(spec),
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
  }

  /** The run's audit log, opened with what the run is (its task by digest) and, for a follow-up, what it carries. */
  private async openAudit(record: StoredRun, spec: RunSpec, input: SandboxArgs): Promise<AuditLog> {
    const shown = shownAs(spec);
    const audit = await AuditLog.open(this.deps.store.paths(record.id).audit);
    await audit.append('run_created', {
      runId: record.id,
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
    const follow = spec.kind === 'agent' ? spec.continuation : undefined;
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
    return audit;
  }

  /** A queued run's live state: nothing made yet; an agent run's agent fields, none for a session. */
  private liveRun(id: string, spec: RunSpec, input: SandboxArgs, audit: AuditLog, record: StoredRun): LiveRun {
    const base: Omit<LiveSessionRun, 'kind' | 'spec'> = {
      id,
      input,
      made: {},
      cancelRequested: false,
      timedOut: false,
      stop: new AbortController(),
      seq: 0,
      audit,
      terminal: new RunTerminal(runTerminalId(id), id, path.join(this.deps.store.paths(id).dir, 'terminal.log'), (c) => this.rec.fireTerminal(c)),
      disposables: new DisposableStore(),
      commands: new CommandLedger(),
      hostCommands: new Set(),
      changeHints: new Set(),
      commandEnv: {},
      status: 'queued',
      done: Promise.resolve(record),
    };
    return spec.kind === 'agent' ? { ...base, kind: 'agent', spec, agent: { pendingApprovals: new Map(), errors: [] } } : { ...base, kind: 'session', spec };
  }

  /** Resolves with the final record once the run has ended (at once for a finished run). */
  async wait(runId: string): Promise<StoredRun> {
    const live = this.rec.live.get(runId);
    return live ? live.done : this.deps.store.get(runId);
  }

  /** Stops the agent (or ends the session); the diff so far is kept for review and the sandbox is wiped. */
  async cancel(runId: string): Promise<StoredRun> {
    const live = this.rec.live.get(runId);
    if (!live) return this.deps.store.get(runId); // already finished: nothing to cancel
    if (!live.cancelRequested) {
      live.cancelRequested = true;
      live.stop.abort();
      await this.rec.note(live, 'cancel requested by the user');
      stopMiddle(live, 'cancelled');
    }
    return this.deps.store.get(runId);
  }

  /** Stops every live run (cancel + wipe) and waits for them. */
  async shutdown(): Promise<void> {
    const runs = [...this.rec.live.values()];
    // Each run's own end records why it failed; shutdown only waits for all of them to be wiped.
    await Promise.all(runs.map((r) => this.cancel(r.id).catch(() => undefined)));
    // As above: a run that failed says so in its own record.
    await Promise.all(runs.map((r) => r.done.catch(() => undefined)));
  }

  /** Runs the steps under the run's wall-clock limit, then records how the run ended. */
  private async execute(live: LiveRun, slot?: LaunchOptions['slot']): Promise<StoredRun> {
    // An attempt waits `queued` for a slot of its group (attempt-group.ts); its clock starts with it.
    const held = slot ? await slot() : undefined;
    try {
      const { input } = live;
      const wallClock = setTimeout(() => {
        live.timedOut = true;
        live.stop.abort();
        void this.rec.note(live, `run timed out after ${input.limits.timeoutSec} s`);
        stopMiddle(live, `time limit of ${input.limits.timeoutSec} s reached`);
      }, input.limits.timeoutSec * 1000);
      live.disposables.add(toDisposable(() => clearTimeout(wallClock)));
      const { failure, wipe } = await runSteps(this.host, live);
      return await this.rec.settle(live, failure, wipe);
    } finally {
      held?.dispose();
    }
  }
}

/** Ends a run's middle: the agent is stopped, a session ended (the pipeline then collects and wipes). */
function stopMiddle(live: LiveRun, reason: string): void {
  if (live.kind === 'agent') live.agent.process?.kill('SIGTERM');
  else live.spec.control.end(reason);
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
