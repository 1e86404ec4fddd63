import type { ErrorInfo } from '../../contracts/errors';
import type { RunEvent, RunEventBody, RunStatus } from '../../contracts/runs';
import type { AuditRecordData, AuditRecordType } from '../audit';
import { debugLog } from '../common/debug-log';
import { Emitter, type Event } from '../common/disposable';
import type { TerminalOutput } from '../common/terminal-output';
import type { LiveRun } from './run-context';
import type { StoredRun } from './run-record';
import type { RunStore, RunUpdate } from './run-store';

/**
 * The runs live in this process and how their progress is recorded (docs/architecture.md §1): every
 * transition is an audit record, a stored status and an event. Shared by the run service's parts
 * (lifecycle, sessions, the agent's events, live controls); the steps reach it as their `StepHost`.
 */
export class RunRecorder {
  readonly live = new Map<string, LiveRun>();
  private readonly statusEmitter = new Emitter<StoredRun>();
  private readonly eventEmitter = new Emitter<RunEvent>();
  private readonly terminalEmitter = new Emitter<TerminalOutput>();
  private readonly filesEmitter = new Emitter<{ runId: string }>();

  /** A run changed status, phase, usage, changed-file count or pending approval. */
  readonly onDidChangeStatus: Event<StoredRun> = this.statusEmitter.event;
  /** A new numbered event of a live run (also written to its event log). */
  readonly onDidEvent: Event<RunEvent> = this.eventEmitter.event;
  /** Terminal output of a live run. */
  readonly onDidTerminalData: Event<TerminalOutput> = this.terminalEmitter.event;
  /** The changed files of a live run changed: refetch. */
  readonly onDidChangeFiles: Event<{ runId: string }> = this.filesEmitter.event;

  constructor(readonly store: RunStore) {}

  /** A live run's record changed (or a run's, recovered). */
  fireStatus(record: StoredRun): void {
    this.statusEmitter.fire(record);
  }

  fireTerminal(output: TerminalOutput): void {
    this.terminalEmitter.fire(output);
  }

  filesChanged(live: LiveRun): void {
    this.filesEmitter.fire({ runId: live.id });
  }

  async transition(live: LiveRun, to: RunStatus, phase?: string): Promise<void> {
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

  async update(live: LiveRun, patch: RunUpdate): Promise<void> {
    const record = await this.store.update(live.id, patch);
    this.statusEmitter.fire(record);
  }

  /** Updates without waiting (event handlers); a failed write is retried by the next update. */
  updateLater(live: LiveRun, patch: RunUpdate): void {
    this.update(live, patch).catch(debugLog.swallow('run.record.update'));
  }

  /** Appends without waiting (event handlers); a record after the seal is dropped, never thrown. */
  auditLater<T extends AuditRecordType>(live: LiveRun, type: T, data: AuditRecordData[T]): void {
    live.audit.append(type, data).catch(debugLog.swallow('run.audit.append'));
  }

  async note(live: LiveRun, message: string): Promise<void> {
    await live.audit.append('note', { message }).catch(debugLog.swallow('run.audit.note'));
  }

  emitEvent(live: LiveRun, event: RunEventBody): void {
    const runEvent: RunEvent = { runId: live.id, seq: live.seq++, at: new Date().toISOString(), event };
    // Command output is kept once, in the terminal log; the event log would hold it a second time.
    if (event.type !== 'command_output' && !(event.type === 'setup' && event.phase === 'output')) this.store.appendEvents(live.id, [runEvent]);
    this.eventEmitter.fire(runEvent);
  }

  /** After the wipe: the final status, the sealed audit log and the final record. */
  async settle(live: LiveRun, failure: ErrorInfo | undefined, wipe: StoredRun['wipe']): Promise<StoredRun> {
    live.terminal.exit(null);
    await live.terminal.flush();
    await this.store.flushEvents(live.id);
    const status: RunStatus = live.cancelRequested ? 'cancelled' : failure ? 'failed' : 'done';
    await live.audit.append('lifecycle', { from: live.status, to: status, ...(failure ? { reason: failure.message } : {}) });
    await live.audit.seal();
    live.status = status;
    const record = await this.store.update(live.id, {
      status,
      phase: undefined,
      pendingApproval: undefined,
      endedAt: new Date().toISOString(),
      ...(failure && !live.cancelRequested ? { error: failure } : {}),
      ...(live.kind === 'agent' && live.agent.summary ? { summary: live.agent.summary } : {}),
      ...(wipe ? { wipe } : {}),
      audit: { count: live.audit.count, head: live.audit.head },
    });
    this.emitEvent(live, { type: 'status', status, ...(failure ? { error: failure } : {}) });
    await this.store.flushEvents(live.id);
    this.statusEmitter.fire(record);
    return record;
  }
}
