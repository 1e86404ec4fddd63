import type { ContinueRunArgs, McpAnswer, NetworkAnswer, RunEvent, StartRunArgs } from '../../contracts/runs';
import { DisposableStore, type Disposable, type Event } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import type { Sandbox, SandboxManager } from '../sandbox/sandbox';
import type { CollectedResult } from '../workspace/collect';
import type { HostCommandResult } from './host-command';
import { RunAgentEvents } from './run-agent-events';
import { realWorkspace, type RunServiceDeps, type StepHost } from './run-context';
import { RunLifecycle, type LaunchOptions } from './run-lifecycle';
import { RunLiveControls, type PublishedPort } from './run-live-controls';
import { RunRecorder } from './run-recorder';
import type { StoredRun } from './run-record';
import { RunSessions, type SessionStartArgs } from './run-sessions';
import type { Continuation } from './run-thread';

export type { EgressAttempt, RunNetwork, RunServiceDeps } from './run-context';
export type { LaunchOptions } from './run-lifecycle';
export type { SessionStartArgs } from './run-sessions';

/**
 * Runs tasks: one run = one task on one project with one agent and one provider/model, in its own
 * sandbox with its own run token (docs/architecture.md §1), or an MCP session (§17). A façade over
 * its parts: the lifecycle (run-lifecycle.ts: start, continue, cancel, recover; the pipeline in
 * run-steps.ts always ends in the wipe), MCP sessions (run-sessions.ts), the agent's events
 * (run-agent-events.ts), what the user does to a live run (run-live-controls.ts), and how all of it
 * is recorded (run-recorder.ts).
 */
export class RunService implements Disposable {
  private readonly rec: RunRecorder;
  private readonly lifecycle: RunLifecycle;
  private readonly sessions: RunSessions;
  private readonly controls: RunLiveControls;
  private readonly subscriptions = new DisposableStore();

  /** A run changed status, phase, usage, changed-file count or pending approval. */
  readonly onDidChangeStatus: Event<StoredRun>;
  /** A new numbered event of a live run (also written to its event log). */
  readonly onDidEvent: Event<RunEvent>;
  /** Terminal output of a live run. */
  readonly onDidTerminalData: Event<TerminalOutput>;
  /** The changed files of a live run changed: refetch. */
  readonly onDidChangeFiles: Event<{ runId: string }>;

  constructor(deps: RunServiceDeps) {
    const rec = (this.rec = new RunRecorder(deps.store));
    const events = new RunAgentEvents(deps, rec);
    const workspace = deps.workspace ?? realWorkspace(deps.store.git);
    // What the steps (run-steps.ts) may do: record progress and start the agent.
    const host: StepHost = {
      deps,
      workspace,
      transition: (run, to, phase) => rec.transition(run, to, phase),
      update: (run, patch) => rec.update(run, patch),
      updateLater: (run, patch) => rec.updateLater(run, patch),
      auditLater: (run, type, data) => rec.auditLater(run, type, data),
      emitEvent: (run, event) => rec.emitEvent(run, event),
      filesChanged: (run) => rec.filesChanged(run),
      runAgent: (run, sandbox, argv, env, cwd) => events.runAgent(run, sandbox, argv, env, cwd),
    };
    this.lifecycle = new RunLifecycle(deps, rec, host);
    this.sessions = new RunSessions(rec, this.lifecycle, events, workspace);
    this.controls = new RunLiveControls(rec);
    this.onDidChangeStatus = rec.onDidChangeStatus;
    this.onDidEvent = rec.onDidEvent;
    this.onDidTerminalData = rec.onDidTerminalData;
    this.onDidChangeFiles = rec.onDidChangeFiles;
    this.subscriptions.add(deps.proxy.onDidCall((e) => events.onModelCall(e)));
    this.subscriptions.add(
      deps.proxy.onDidSideDoor((e) => {
        const live = rec.live.get(e.runId);
        if (live) rec.auditLater(live, 'side_door', { provider: e.provider, path: e.path, stripped: e.stripped, allowed: e.allowed, ...(e.refused ? { refused: e.refused } : {}) });
      }),
    );
    if (deps.proxy.onDidRefreshSignin) {
      this.subscriptions.add(
        deps.proxy.onDidRefreshSignin((e) => {
          const live = rec.live.get(e.runId);
          if (live) rec.auditLater(live, 'note', { message: `the proxy refreshed the ${e.provider} sign-in (${e.reason === 'expiring' ? 'its access token was about to expire' : 'the provider refused the access token'}); the new tokens were stored where the sign-in is kept` });
        }),
      );
    }
  }

  // --- lifecycle (run-lifecycle.ts) --------------------------------------------------------------

  /** Crash recovery: runs of a gone process are marked `interrupted`, their sandboxes reaped. */
  recover(managers: SandboxManager[], opts: { othersOnly?: boolean } = {}): Promise<string[]> {
    return this.lifecycle.recover(managers, opts);
  }

  /** Queues a follow-up turn of a finished run (docs/architecture.md §15). */
  continue(args: ContinueRunArgs): Promise<StoredRun> {
    return this.lifecycle.continue(args);
  }

  /** Queues a run and starts it in the background; resolves with the queued record. */
  start(input: StartRunArgs, follow?: { continuation: Continuation; sessionId: string }, options?: LaunchOptions): Promise<StoredRun> {
    return this.lifecycle.start(input, follow, options);
  }

  /** Resolves with the final record once the run has ended (at once for a finished run). */
  wait(runId: string): Promise<StoredRun> {
    return this.lifecycle.wait(runId);
  }

  /** Stops the agent; the diff so far is kept for review and the sandbox is wiped. */
  cancel(runId: string): Promise<StoredRun> {
    return this.lifecycle.cancel(runId);
  }

  /** Stops every live run (cancel + wipe) and waits for them. */
  shutdown(): Promise<void> {
    return this.lifecycle.shutdown();
  }

  // --- MCP sessions (run-sessions.ts) -------------------------------------------------------------

  /** Starts an MCP session (docs/architecture.md §17); resolves once its sandbox is hydrated and running. */
  startSession(input: SessionStartArgs): Promise<StoredRun> {
    return this.sessions.startSession(input);
  }

  /** Runs a command in a live MCP session's sandbox, as the host (no run token). */
  execInSession(runId: string, req: { command: string; cwd: string; timeoutSec: number; capBytes: number; signal?: AbortSignal }, onOutput?: (stream: 'stdout' | 'stderr', bytes: Buffer) => void): Promise<HostCommandResult> {
    return this.sessions.execInSession(runId, req, onOutput);
  }

  /** An MCP session's changes so far, derived on the host. */
  collectSession(runId: string): Promise<CollectedResult> {
    return this.sessions.collectSession(runId);
  }

  /** A live MCP session's sandbox, or CONFLICT saying why there is none. */
  sessionSandbox(runId: string): Sandbox {
    return this.sessions.sessionSandbox(runId);
  }

  /** Adds a note to a live run's audit log (what an MCP client did besides commands). */
  noteOn(runId: string, message: string, data?: Record<string, unknown>): Promise<void> {
    return this.sessions.noteOn(runId, message, data);
  }

  /** Ends an MCP session: its result is collected, its sandbox wiped; resolves with the final record. */
  endSession(runId: string, reason: string): Promise<StoredRun> {
    return this.sessions.endSession(runId, reason);
  }

  // --- a live run (run-live-controls.ts) ----------------------------------------------------------

  /** Runs still in progress in this process. */
  activeRunIds(): string[] {
    return this.controls.activeRunIds();
  }

  /** A live run's sandbox (for an interactive shell, diffs while running). */
  sandboxOf(runId: string): Sandbox | undefined {
    return this.controls.sandboxOf(runId);
  }

  /** Answers an approval request of a run in `ask` mode. */
  approve(runId: string, requestId: string, approved: boolean): Promise<boolean> {
    return this.controls.approve(runId, requestId, approved);
  }

  /** Publishes a port of a live run's sandbox on 127.0.0.1; it closes when the run ends. */
  publishPort(runId: string, sandboxPort: number): Promise<PublishedPort> {
    return this.controls.publishPort(runId, sandboxPort);
  }

  /** The ports a live run has published (none once it has ended). */
  previewPorts(runId: string): PublishedPort[] {
    return this.controls.previewPorts(runId);
  }

  /** Every port published by a live run. */
  allPreviewPorts(): PublishedPort[] {
    return this.controls.allPreviewPorts();
  }

  /** Allows a host the run's egress proxy denied (allow-list policy), while the run goes on. */
  allowNetwork(runId: string, host: string, port: number | undefined, scope: 'once' | 'run' | 'project'): Promise<void> {
    return this.controls.allowNetwork(runId, host, port, scope);
  }

  /** Answers a network question of a live run. */
  answerNetwork(runId: string, id: string, answer: NetworkAnswer): Promise<boolean> {
    return this.controls.answerNetwork(runId, id, answer);
  }

  /** Answers an MCP question of a live run (docs/architecture.md §20). */
  answerMcp(runId: string, id: string, answer: McpAnswer): boolean {
    return this.controls.answerMcp(runId, id, answer);
  }

  dispose(): void {
    this.subscriptions.dispose();
    void this.shutdown();
  }
}
