import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { AgentEvent, AgentEventOf } from '../../contracts/agent-events';
import { AirlockError, toErrorInfo, type ErrorInfo } from '../../contracts/errors';
import type { RunEvent, RunEventBody, RunStatus, StartRunArgs } from '../../contracts/runs';
import type { TerminalOutput } from '../common/terminal-output';
import { runTerminalId } from '../../contracts/terminals';
import { commandOutputBytes, commandOutputEvent, type AgentAdapter, type AgentCommandContext } from '../agents';
import { commandEnv } from '../common/command-env';
import { OutputCapture } from '../common/output-capture';
import { StreamRedactor } from '../common/stream-redactor';
import { Utf8Carry } from '../common/utf8';
import { AuditLog, type AuditRecordData, type AuditRecordType } from '../audit';
import type { ChannelProcess } from '../channel/channel-client';
import { DisposableStore, Emitter, toDisposable, type Disposable, type Event } from '../common/disposable';
import type { ModelCallEvent, ModelProxy } from '../proxy/model-proxy';
import { proxyEnvFor } from '../proxy/model-proxy';
import type { ImageProgress, SandboxLimits } from '../sandbox/driver';
import { DEFAULT_LIMITS } from '../sandbox/driver';
import type { Sandbox, SandboxManager } from '../sandbox/sandbox';
import { watchChanges, type FileChange } from '../workspace/changes';
import { collectResult } from '../workspace/collect';
import { HostRepo } from '../workspace/host-repo';
import { resultPaths, storeRunResult } from './run-apply';
import { hydrate } from '../workspace/hydrate';
import { snapshotProject } from '../workspace/snapshot';
import { PreviewPorts } from '../network/preview-ports';
import { newRunId } from '../../contracts/ids';
import { isFinalStatus } from '../../contracts/runs';
import { toChangedFile, type StoredRun } from './run-record';
import type { RunStore, RunUpdate } from './run-store';
import { RunTerminal } from './run-terminal';
import { OWNER, ownerIsGone } from './run-owner';

/** What a run needs from the rest of the core; `core/app.ts` wires the real parts. */
export interface RunServiceDeps {
  store: RunStore;
  /** The sandbox manager for an isolation level (throws VM_UNAVAILABLE where there is none). */
  sandboxes(isolation: 'container' | 'vm'): Promise<SandboxManager>;
  /** The image for an agent's variant on an isolation level, built on first use. */
  image(variant: 'base' | 'agents', onProgress: (p: ImageProgress) => void, isolation: 'container' | 'vm'): Promise<string>;
  proxy: ModelProxy;
  /** The model proxy's loopback port on the host. */
  proxyPort: number;
  /** Which wire format a provider speaks. */
  providerFormat(provider: string): Promise<'anthropic' | 'openai'>;
  agent(kind: StartRunArgs['agent']): AgentAdapter;
  /**
   * Sets up a wider network policy than `none` for a started sandbox (egress proxy through the
   * channel); returns the environment the agent needs and what to record.
   */
  network?(
    sandbox: Sandbox,
    run: { runId: string; policy: 'allowlist' | 'open'; allowlist: string[]; projectDir: string },
  ): Promise<RunNetwork>;
  limits?: SandboxLimits;
  /** Called after an approval request is raised (desktop notification). */
  notify?(message: { runId: string; title: string; body: string }): void;
}

/** A wider network policy in force for one run. */
export interface RunNetwork extends Disposable {
  env: Record<string, string>;
  record: { policy: string; allow: string[]; warning?: string };
  onDidConnect: Event<EgressAttempt>;
  /** Lets a denied host through: this once, for the rest of the run, or for every run of the project. */
  allow(host: string, port: number | undefined, scope: 'once' | 'run' | 'project'): Promise<void>;
}

/** One connection attempt through a run's egress proxy (allow-list policy). */
export interface EgressAttempt {
  host: string;
  port: number;
  method: string;
  allowed: boolean;
  reason?: string;
  bytesUp: number;
  bytesDown: number;
  durationMs: number;
}

interface LiveRun {
  id: string;
  input: StartRunArgs;
  sandbox?: Sandbox;
  previews?: PreviewPorts;
  network?: RunNetwork;
  agentProcess?: ChannelProcess;
  /** Commands the host runs for the agent (host-run commands), killed when the agent ends. */
  hostCommands: Set<ChannelProcess>;
  /** Their environment: the agent's minus its provider settings and token. */
  commandEnv: Record<string, string>;
  /** The run token as bytes, removed from command output before it is logged or shown. */
  tokenBytes?: Buffer;
  cancelRequested: boolean;
  timedOut: boolean;
  seq: number;
  audit: AuditLog;
  terminal: RunTerminal;
  disposables: DisposableStore;
  /** Output digest per command id, for the audit record. */
  commands: Map<string, { command: string; cwd: string; hash: ReturnType<typeof createHash>; bytes: number }>;
  pendingApprovals: Map<string, string>;
  agentErrors: Array<{ message: string; status?: number }>;
  /** The provider answered 401/403 to a call with the real key (seen by the proxy, not the sandbox). */
  keyRefused?: { provider: string; status: number };
  summary?: string;
  finishReason?: string;
  done: Promise<StoredRun>;
  /** The lifecycle state last written (the audit's `from`). */
  status: RunStatus;
}

/** The VM driver each OS uses for `--isolation vm` (see core/app.ts). */
const VM_KIND = process.platform === 'darwin' ? 'lima' : process.platform === 'win32' ? 'wsl' : 'qemu';

const MAX_TERMINAL_ECHO = 2000;

/** An agent failure, saying whether there is anything to review (only when there is). */
function withChangesNote(err: unknown, changed: number): unknown {
  if (!(err instanceof AirlockError) || !changed) return err;
  const note = `The ${changed === 1 ? 'change' : `${changed} changed files`} so far ${changed === 1 ? 'is' : 'are'} kept for review.`;
  return new AirlockError(err.kind, `${err.message} ${note}`, err.field ? { field: err.field } : undefined);
}

/**
 * Runs tasks: one run = one task on one project with one agent and one provider/model, in its own
 * sandbox with its own run token (docs/architecture.md §1). Every transition is an event and an audit record;
 * the sandbox is always wiped and verified gone, also on failure and cancel.
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

  constructor(private readonly deps: RunServiceDeps) {
    this.subscriptions.add(deps.proxy.onDidCall((e) => this.onModelCall(e)));
    this.subscriptions.add(
      deps.proxy.onDidSideDoor((e) => {
        const live = this.live.get(e.runId);
        if (live) this.auditLater(live, 'side_door', { provider: e.provider, path: e.path, stripped: e.stripped, allowed: e.allowed, ...(e.refused ? { refused: e.refused } : {}) });
      }),
    );
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
   * sandboxes reaped. Runs owned by another live process are left alone.
   */
  async recover(managers: SandboxManager[]): Promise<string[]> {
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
      await manager.reapOrphans((runId) => this.live.has(runId) || liveOwners.has(runId));
    }
    return interrupted;
  }

  /** Queues a run and starts it in the background; resolves with the queued record. */
  async start(input: StartRunArgs): Promise<StoredRun> {
    const agent = this.deps.agent(input.agent);
    if (input.approval === 'ask' && !agent.supportsApproval) {
      throw new AirlockError('INVALID_INPUT', `The ${input.agent} agent cannot pause for approvals; use approval mode "auto" (the sandbox is the boundary) or the built-in agent.`);
    }
    const format = await this.deps.providerFormat(input.provider);
    if (!agent.providerFormats.includes(format)) {
      throw new AirlockError('INVALID_INPUT', `The ${input.agent} agent does not speak the ${format} format of provider ${input.provider}; choose a ${agent.providerFormats.join(' or ')} provider.`);
    }
    const id = newRunId();
    const now = new Date().toISOString();
    const record = await this.deps.store.create({
      id,
      task: input.task,
      projectDir: path.resolve(input.projectDir),
      agent: input.agent,
      ...(input.customCommand ? { customCommand: input.customCommand } : {}),
      provider: input.provider,
      model: input.model,
      status: 'queued',
      approval: input.approval,
      createdAt: now,
      updatedAt: now,
      isolation: input.isolation,
      network: input.network,
      sandbox: { driver: input.isolation === 'vm' ? VM_KIND : 'docker' },
      limits: {
        timeoutSec: input.limits.timeoutSec,
        ...(input.limits.budgetTokens ? { budgetTokens: input.limits.budgetTokens } : {}),
        ...(input.limits.budgetUsd ? { budgetUsd: input.limits.budgetUsd } : {}),
      },
      owner: OWNER,
      ...(input.allowlist ? { allowlist: input.allowlist } : {}),
    });
    const paths = this.deps.store.paths(id);
    const audit = await AuditLog.open(paths.audit);
    await audit.append('run_created', {
      runId: id,
      projectDir: record.projectDir,
      agent: input.agent,
      provider: input.provider,
      model: input.model,
      isolation: input.isolation,
      network: input.network,
      approval: input.approval,
      taskSha256: createHash('sha256').update(input.task).digest('hex'),
    });
    await audit.append('lifecycle', { from: null, to: 'queued' });
    const live: LiveRun = {
      id,
      input,
      cancelRequested: false,
      timedOut: false,
      seq: 0,
      audit,
      terminal: new RunTerminal(runTerminalId(id), id, path.join(paths.dir, 'terminal.log'), (c) => this.terminalEmitter.fire(c)),
      disposables: new DisposableStore(),
      commands: new Map(),
      hostCommands: new Set(),
      commandEnv: {},
      pendingApprovals: new Map(),
      agentErrors: [],
      status: 'queued',
      done: Promise.resolve(record),
    };
    this.live.set(id, live);
    live.done = this.execute(live, agent).finally(() => this.live.delete(id));
    this.statusEmitter.fire(record);
    return record;
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
      await this.note(live, 'cancel requested by the user');
      live.agentProcess?.kill('SIGTERM');
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
    await this.note(live, `published sandbox port ${sandboxPort} on 127.0.0.1:${p.hostPort}`);
    return { sandboxPort, hostPort: p.hostPort, url: p.url };
  }

  /** Allows a host the run's egress proxy denied (allow-list policy), while the run goes on. */
  async allowNetwork(runId: string, host: string, port: number | undefined, scope: 'once' | 'run' | 'project'): Promise<void> {
    const live = this.live.get(runId);
    if (!live?.network) throw new AirlockError('CONFLICT', 'The run is not live under the allow-list network policy; nothing to allow.');
    await live.network.allow(host, port, scope);
    await live.audit.append('network', { policy: live.input.network, host, ...(port ? { port } : {}), allowed: true });
    await this.note(live, `network: ${host}${port ? `:${port}` : ''} allowed (${scope}) by the user`);
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

  private async execute(live: LiveRun, agent: AgentAdapter): Promise<StoredRun> {
    const { input, id } = live;
    const wallClock = setTimeout(() => {
      live.timedOut = true;
      void this.note(live, `run timed out after ${input.limits.timeoutSec} s`);
      live.agentProcess?.kill('SIGTERM');
    }, input.limits.timeoutSec * 1000);
    live.disposables.add(toDisposable(() => clearTimeout(wallClock)));
    let failure: ErrorInfo | undefined;
    try {
      await this.transition(live, 'preparing', 'reading project');
      const snapshot = await snapshotProject(input.projectDir);
      if (snapshot.excluded.length) {
        await live.audit.append('excluded_files', { files: snapshot.excluded.map((e) => ({ path: e.path, reason: e.reason })) });
      }
      await this.update(live, { excludedFiles: snapshot.excluded.map((e) => ({ path: e.path, reason: e.reason })), phase: 'preparing image' });
      this.throwIfStopped(live);

      const image = await this.deps.image(
        agent.imageVariant,
        (p) => {
          if (p.phase === 'build') this.updateLater(live, { phase: `building image: ${p.message}`.slice(0, 200) });
        },
        input.isolation,
      );
      await this.update(live, { phase: 'starting sandbox' });
      const manager = await this.deps.sandboxes(input.isolation);
      const sandbox = await manager.create({
        runId: id,
        image,
        limits: this.deps.limits ?? DEFAULT_LIMITS,
        network: input.network === 'open' ? 'open' : 'none',
      });
      live.sandbox = sandbox;
      // Published preview ports close with the run.
      live.previews = live.disposables.add(new PreviewPorts(sandbox.channel));
      live.disposables.add(
        live.previews.onDidChange((e) => {
          if (e.type === 'published') live.terminal.write(`\r\n\x1b[36m[airlock] preview: sandbox port ${e.sandboxPort} → ${e.url}\x1b[0m\r\n`);
        }),
      );
      const accel = vmAccelOf(sandbox.info);
      await this.update(live, (r) => ({ ...r, sandbox: { ...r.sandbox, image, id: sandbox.info.id, ...accel } }));
      if (accel.accelNote) await this.note(live, `VM accelerator ${accel.accel}: ${accel.accelNote}`);
      if (input.network === 'none') await live.audit.append('network', { policy: 'none' });
      this.throwIfStopped(live);

      await this.update(live, { phase: 'copying project' });
      // The agent starts once the copy is in place; change queries wait for the baseline commit.
      // The host keeps its own baseline (same bytes) in the run's object store: results are computed against it.
      const repo = await HostRepo.create(resultPaths(this.deps.store, id).objects);
      const hydrated = await hydrate(sandbox.channel, snapshot, { waitForBaseline: false, hostRepo: repo });
      this.throwIfStopped(live);

      // The model proxy appears inside the sandbox on loopback, through the channel (docs/architecture.md §4).
      const grant = this.deps.proxy.issueToken({
        runId: id,
        providers: [input.provider],
        budget: {
          ...(input.limits.budgetTokens ? { maxTokens: input.limits.budgetTokens } : {}),
          ...(input.limits.budgetUsd ? { maxCostUsd: input.limits.budgetUsd } : {}),
        },
      });
      live.disposables.add(grant);
      const exposed = await sandbox.channel.exposeHostService(0, () => connect(this.deps.proxyPort, '127.0.0.1'));
      live.disposables.add(exposed);
      let networkEnv: Record<string, string> = {};
      if (input.network !== 'none') {
        if (!this.deps.network) throw new AirlockError('INTERNAL', 'network policies are not wired in this build');
        const net = await this.deps.network(sandbox, { runId: id, policy: input.network, allowlist: input.allowlist ?? [], projectDir: path.resolve(input.projectDir) });
        live.disposables.add(net);
        live.network = net;
        networkEnv = net.env;
        await live.audit.append('network', { policy: input.network, allow: net.record.allow });
        if (net.record.warning) live.terminal.write(`\x1b[33m[airlock] ${net.record.warning}\x1b[0m\r\n`);
        live.disposables.add(
          net.onDidConnect((e) => {
            this.auditLater(live, 'network', { policy: input.network, host: e.host, port: e.port, allowed: e.allowed });
            if (!e.allowed) live.terminal.write(`\r\n\x1b[33m[airlock] blocked ${e.method} ${e.host}:${e.port}: ${e.reason ?? 'not on the allow-list'}\x1b[0m\r\n`);
          }),
        );
      }

      const changeHints = new Set<string>();
      live.disposables.add(
        await watchChanges(sandbox.channel, (paths) => {
          // Kept as a hint for collect (bounded): the result itself is read and derived on the host.
          for (const p of paths) if (changeHints.size < 100_000) changeHints.add(p);
          this.emitEvent(live, { type: 'file_changed', paths });
          this.filesEmitter.fire({ runId: id });
        }),
      );

      await this.transition(live, 'running', 'agent working');
      const format = await this.deps.providerFormat(input.provider);
      const ctx: AgentCommandContext = {
        task: input.task,
        model: input.model,
        providerFormat: format,
        proxyBaseUrl: `http://127.0.0.1:${exposed.port}`,
        token: grant.token,
        approval: input.approval,
        ...(input.customCommand ? { customCommand: input.customCommand } : {}),
      };
      const command = agent.command(ctx);
      const env = { ...proxyEnvFor(exposed.port, grant.token), ...networkEnv, ...command.env };
      live.commandEnv = commandEnv(env);
      live.tokenBytes = Buffer.from(grant.token);
      // An agent that fails (budget, timeout, crash) still leaves its diff so far for review.
      const agentFailure = await this.runAgent(live, agent, command.argv, env, command.cwd).then(
        () => undefined,
        (err: unknown) => err,
      );

      await this.transition(live, 'collecting', 'collecting the result');
      const { result, patch } = await collectResult(sandbox.channel, {
        repo,
        baseCommit: await (hydrated.hostBaseline as Promise<string>),
        manifest: hydrated.manifest,
        ...(snapshot.headCommit ? { headCommit: snapshot.headCommit } : {}),
        hints: changeHints,
        isIgnored: snapshot.isIgnored,
      });
      const paths = this.deps.store.paths(id);
      await storeRunResult(this.deps.store, id, { result, patch });
      if (result.changes.length) {
        await live.audit.append('file_change', { changes: result.changes.map((c) => ({ path: c.path, kind: c.status, ...(c.oldPath ? { oldPath: c.oldPath } : {}) })) });
      }
      await this.update(live, {
        changedFiles: result.changes.map((c) => toChangedFile(c)),
        patchPath: paths.patch,
        baseline: { commit: result.baseCommit, ...(result.headCommit ? { headCommit: result.headCommit } : {}) },
      });
      if (agentFailure) throw withChangesNote(agentFailure, result.changes.length);
    } catch (err) {
      failure = toErrorInfo(err);
      if (!(err instanceof AirlockError)) {
        failure = { kind: 'INTERNAL', message: `unexpected error: ${failure.message}` };
        // Stacks never reach records (they may hold paths); AIRLOCK_DEBUG shows them to the developer.
        if (process.env.AIRLOCK_DEBUG) process.stderr.write(`[airlock debug] run ${id}: ${(err as Error).stack ?? String(err)}\n`);
      }
      await live.audit.append('error', { kind: failure.kind, message: failure.message }).catch(() => undefined);
    } finally {
      live.disposables.dispose();
    }
    return this.finish(live, failure);
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
    const budget = live.agentErrors.find((e) => e.status === 429 && /budget/i.test(e.message));
    if (budget) throw new AirlockError('BUDGET_EXCEEDED', budget.message);
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
      const last = live.agentErrors.at(-1)?.message;
      throw new AirlockError('SANDBOX_FAILED', `The agent exited with ${exit.exitCode ?? exit.signal}${last ? `: ${last}` : ''}.`);
    }
  }

  private onAgentEvent(live: LiveRun, event: AgentEvent): void {
    switch (event.type) {
      case 'command_request':
        // Protocol, not history: the command's own events follow.
        void this.runHostCommand(live, event);
        return;
      case 'command_started': {
        live.commands.set(event.id, { command: event.command, cwd: event.cwd, hash: createHash('sha256'), bytes: 0 });
        live.terminal.write(`\r\n\x1b[1m$ ${event.command.slice(0, MAX_TERMINAL_ECHO)}\x1b[0m\r\n`);
        break;
      }
      case 'command_output': {
        // Bytes from the parser, never decoded here; the UI's run terminal converts bare newlines.
        const bytes = commandOutputBytes(event);
        const c = live.commands.get(event.id);
        c?.hash.update(bytes);
        if (c) c.bytes += bytes.length;
        live.terminal.write(bytes);
        break;
      }
      case 'command_exited': {
        const c = live.commands.get(event.id);
        live.commands.delete(event.id);
        this.auditLater(live, 'command', {
          id: event.id,
          command: c?.command ?? '',
          cwd: c?.cwd ?? '/workspace',
          exitCode: event.exitCode,
          durationMs: event.durationMs,
          timedOut: event.timedOut,
          outputBytes: event.outputBytes ?? c?.bytes ?? 0,
          outputSha256: (c?.hash ?? createHash('sha256')).digest('hex'),
        });
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

  /**
   * Runs a command for the agent through the channel (host-run commands): its output reaches the
   * terminal, the hash and the audit first-hand, without a relay through the agent, and the agent
   * gets what the model should see (head and tail) as a command_result line.
   */
  private async runHostCommand(live: LiveRun, req: AgentEventOf<'command_request'>): Promise<void> {
    const started = Date.now();
    this.onAgentEvent(live, { type: 'command_started', id: req.id, command: req.command, argv: ['bash', '-lc', req.command], cwd: req.cwd });
    const capture = new OutputCapture(req.capBytes);
    const carry = { stdout: new Utf8Carry(), stderr: new Utf8Carry() };
    // A command can read the agent's environment (same user): the token never reaches the log, even
    // cut across batches. Redaction comes before the cut at characters (the token is ASCII).
    const secrets = live.tokenBytes ? [live.tokenBytes] : [];
    const redactor = { stdout: new StreamRedactor(secrets), stderr: new StreamRedactor(secrets) };
    const emitOutput = (stream: 'stdout' | 'stderr', bytes: Buffer) => this.onAgentEvent(live, commandOutputEvent(req.id, stream, bytes));
    // Frames are gathered for a few ms (or 256 KB) per stream and handed on together, uncopied: the
    // channel delivers a flood in frames of a few KB, and the terminal log takes a tick's worth as one writev.
    const waiting: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
    let waitingBytes = 0;
    let timer: NodeJS.Timeout | undefined;
    const flush = () => {
      if (timer) clearTimeout(timer);
      timer = undefined;
      waitingBytes = 0;
      for (const stream of ['stdout', 'stderr'] as const) {
        const parts = waiting[stream].splice(0);
        if (!parts.length) continue;
        for (const part of parts) {
          const whole = carry[stream].cut(redactor[stream].push(part));
          if (whole.length) emitOutput(stream, whole);
        }
      }
    };
    const onOutput = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
      capture.add(chunk);
      // The other stream's output goes first, so the two stay in order.
      if (waiting[stream === 'stdout' ? 'stderr' : 'stdout'].length) flush();
      waiting[stream].push(chunk);
      waitingBytes += chunk.length;
      if (waitingBytes >= 256 * 1024) flush();
      else timer ??= setTimeout(flush, 4);
    };
    let exitCode: number | null = null;
    let timedOut = false;
    let failure: string | undefined;
    const sandbox = live.sandbox;
    if (!sandbox || !live.agentProcess) failure = 'the run is ending';
    else {
      try {
        const proc = sandbox.channel.spawn({ argv: ['bash', '-lc', req.command], cwd: req.cwd, env: live.commandEnv, timeoutMs: Math.round(req.timeoutSec * 1000) });
        live.hostCommands.add(proc);
        const subs = [proc.onStdout(onOutput('stdout')), proc.onStderr(onOutput('stderr'))];
        try {
          const exit = await proc.exited;
          exitCode = exit.exitCode;
          timedOut = exit.timedOut;
        } finally {
          for (const d of subs) d.dispose();
          live.hostCommands.delete(proc);
        }
      } catch (err) {
        failure = (err as Error).message;
      }
    }
    flush();
    for (const stream of ['stdout', 'stderr'] as const) {
      const tail = carry[stream].cut(redactor[stream].end());
      if (tail.length) emitOutput(stream, tail);
      const rest = carry[stream].rest();
      if (rest) emitOutput(stream, rest);
    }
    const durationMs = Date.now() - started;
    const outputBytes = capture.bytes;
    this.onAgentEvent(live, { type: 'command_exited', id: req.id, exitCode, durationMs, timedOut, outputBytes });
    if (failure) capture.add(Buffer.from(`failed to start: ${failure}`));
    const result: AgentEventOf<'command_result'> = { type: 'command_result', id: req.id, exitCode, timedOut, durationMs, output: capture.text(), truncated: capture.truncated, outputBytes };
    live.agentProcess?.write(`${JSON.stringify(result)}\n`);
  }

  private onModelCall(e: ModelCallEvent): void {
    const live = this.live.get(e.runId);
    if (!live) return;
    // The proxy records only calls it admitted and sent upstream (its own refusals, a bad run token
    // included, are not calls), so a 401/403 here is the provider refusing the real key.
    if (e.status === 401 || e.status === 403) live.keyRefused ??= { provider: e.provider, status: e.status };
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

  /** Final state, wipe (always) and its verification. */
  private async finish(live: LiveRun, failure: ErrorInfo | undefined): Promise<StoredRun> {
    await this.transition(live, 'wiping', 'wiping the sandbox');
    let wipe: StoredRun['wipe'];
    if (live.sandbox) {
      try {
        const proof = await live.sandbox.destroy();
        wipe = { verified: proof.leftovers.length === 0, removed: proof.removed, leftovers: proof.leftovers, durationMs: proof.durationMs, at: proof.verifiedAt };
        await live.audit.append('wipe', { removed: wipe.removed, leftovers: wipe.leftovers, durationMs: proof.durationMs, verifiedAt: wipe.at, verified: wipe.verified });
        if (proof.leftovers.length) failure ??= { kind: 'SANDBOX_FAILED', message: `The sandbox could not be fully removed: ${proof.leftovers.join(', ')} remain. 'airlock doctor' reaps leftovers.` };
      } catch (err) {
        const info = toErrorInfo(err);
        failure ??= { kind: info.kind, message: `Wiping the sandbox failed: ${info.message}` };
        await live.audit.append('error', { kind: info.kind, message: `wipe failed: ${info.message}` });
      }
    }
    this.deps.proxy.revokeRun(live.id);
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

  private throwIfStopped(live: LiveRun): void {
    if (live.cancelRequested) throw new AirlockError('CANCELLED', 'The run was cancelled.');
    if (live.timedOut) throw new AirlockError('COMMAND_TIMEOUT', `The run reached its time limit (${live.input.limits.timeoutSec} s).`);
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
    live.audit.append(type, data).catch(() => undefined);
  }

  /** Updates without waiting (event handlers); a failed write is retried by the next update. */
  private updateLater(live: LiveRun, patch: RunUpdate): void {
    this.update(live, patch).catch(() => undefined);
  }

  private async note(live: LiveRun, message: string): Promise<void> {
    await live.audit.append('note', { message }).catch(() => undefined);
  }

  private emitEvent(live: LiveRun, event: RunEventBody): void {
    const runEvent: RunEvent = { runId: live.id, seq: live.seq++, at: new Date().toISOString(), event };
    // Command output is kept once, in the terminal log; the event log would hold it a second time.
    if (event.type !== 'command_output') this.deps.store.appendEvents(live.id, [runEvent]);
    this.eventEmitter.fire(runEvent);
  }
}

/** A VM sandbox's accelerator and why (QemuSandboxInfo), for the run record; nothing for containers. */
function vmAccelOf(info: object): { accel?: 'kvm' | 'hvf' | 'tcg'; accelNote?: string } {
  const i = info as { accel?: unknown; accelReason?: unknown; accelRetry?: unknown };
  if (i.accel !== 'kvm' && i.accel !== 'hvf' && i.accel !== 'tcg') return {};
  const note = typeof i.accelRetry === 'string' && i.accelRetry ? i.accelRetry : typeof i.accelReason === 'string' ? i.accelReason : '';
  return { accel: i.accel, ...(note ? { accelNote: note } : {}) };
}
