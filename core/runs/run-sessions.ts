import { randomUUID } from 'node:crypto';
import { AirlockError } from '../../contracts/errors';
import { DEFAULT_GIT_HISTORY, type StartRunArgs } from '../../contracts/runs';
import { debugLog } from '../common/debug-log';
import type { Sandbox } from '../sandbox/sandbox';
import type { CollectedResult } from '../workspace/collect';
import { executeHostCommand, type HostCommandResult } from './host-command';
import type { LiveRun, LiveSessionRun, RunWorkspace } from './run-context';
import type { RunAgentEvents } from './run-agent-events';
import type { RunLifecycle } from './run-lifecycle';
import type { RunRecorder } from './run-recorder';
import type { StoredRun } from './run-record';
import { sessionControl, type SandboxArgs } from './run-spec';

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

/**
 * MCP sessions (docs/architecture.md §17): runs with no agent and no run token whose sandbox a
 * client on the host drives — its commands, file reads and writes, its changes so far — until the
 * session ends. They start and end through the run lifecycle, like every run.
 */
export class RunSessions {
  constructor(
    private readonly rec: RunRecorder,
    private readonly lifecycle: RunLifecycle,
    private readonly events: RunAgentEvents,
    private readonly workspace: RunWorkspace,
  ) {}

  /**
   * Starts an MCP session: recorded, audited and wiped like every run; resolves once the sandbox is
   * hydrated and running (`execInSession` then drives it until `endSession`).
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
    const { record, live } = await this.lifecycle.launch({ kind: 'session', control: session }, args);
    const outcome = await Promise.race([session.ready.then(() => undefined), live.done]);
    if (outcome) {
      const failed = outcome.error ?? { kind: 'SANDBOX_FAILED', message: `The sandbox ended before it was ready (${outcome.status}).` };
      throw new AirlockError(failed.kind, failed.message);
    }
    return this.rec.store.get(record.id).catch(() => record);
  }

  /**
   * Runs a command in a live MCP session's sandbox, as the host: recorded first-hand (terminal, events,
   * audit `command`), with `onOutput` seeing its output as it comes. The command gets no run token.
   */
  async execInSession(runId: string, req: { command: string; cwd: string; timeoutSec: number; capBytes: number; signal?: AbortSignal }, onOutput?: (stream: 'stdout' | 'stderr', bytes: Buffer) => void): Promise<HostCommandResult> {
    const live = this.liveSession(runId);
    const id = `mcp-${randomUUID()}`;
    // `bash -c` in the sandbox's environment: no login profile to read before each command.
    return executeHostCommand(live, { id, ...req, loginShell: false }, (e) => this.events.onAgentEvent(live, e, true), onOutput);
  }

  /**
   * An MCP session's changes so far, derived on the host (the same collect as at the end of a run,
   * docs/architecture.md §11): the change list, the patch and its digest.
   */
  async collectSession(runId: string): Promise<CollectedResult> {
    const live = this.liveSession(runId);
    const ws = live.made.workspace;
    if (!ws) throw new AirlockError('CONFLICT', `Sandbox ${runId} is still starting; ask again once sandbox_create has returned.`);
    return this.workspace.collect(ws.sandbox, { snapshot: ws.snapshot, hydrated: ws.hydrated, hints: live.changeHints });
  }

  /** A live MCP session's sandbox (file reads, writes, listings), or CONFLICT saying why there is none. */
  sessionSandbox(runId: string): Sandbox {
    const sandbox = this.liveSession(runId).made.sandbox;
    if (!sandbox) throw new AirlockError('CONFLICT', `Sandbox ${runId} is still starting.`);
    return sandbox;
  }

  /** Adds a note to a live run's audit log (what an MCP client did besides commands: file writes). */
  async noteOn(runId: string, message: string, data?: Record<string, unknown>): Promise<void> {
    const live = this.rec.live.get(runId);
    if (live) await live.audit.append('note', { message, ...(data ?? {}) }).catch(debugLog.swallow('run.audit.note'));
  }

  /** Ends an MCP session: its result is collected, its sandbox wiped; resolves with the final record. */
  async endSession(runId: string, reason: string): Promise<StoredRun> {
    const live = this.rec.live.get(runId);
    if (!live) return this.rec.store.get(runId);
    if (live.kind !== 'session') throw new AirlockError('CONFLICT', `Run ${runId} is an agent run, not an MCP session; cancel it instead.`);
    live.spec.control.end(reason);
    return live.done;
  }

  private liveSession(runId: string): LiveSessionRun {
    const live: LiveRun | undefined = this.rec.live.get(runId);
    if (live?.kind !== 'session' || !live.spec.control.open) throw new AirlockError('CONFLICT', `Sandbox ${runId} is not live (destroyed, timed out, or never made here); create one with sandbox_create.`);
    return live;
  }
}
