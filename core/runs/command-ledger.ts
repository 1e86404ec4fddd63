import { createHash } from 'node:crypto';
import type { AgentEventOf } from '../../contracts/agent-events';
import type { AuditRecordData } from '../audit';

interface Trace {
  command: string;
  cwd: string;
  hash: ReturnType<typeof createHash>;
  bytes: number;
}

/** Where an account of a command comes from: the host ran and watched it, or the agent says so. */
export type CommandSource = 'observed' | 'claimed';

/**
 * The commands of a run, for the audit log. Commands the host ran itself (host-run commands) become
 * `command` records; command events in the agent's own output (a CLI agent running its tools, or a
 * hostile agent making things up) become `command_claim` records. The two are kept apart by source,
 * so a claim can never end, rename or stand in for a command the host is running.
 */
export class CommandLedger {
  private readonly traces = { observed: new Map<string, Trace>(), claimed: new Map<string, Trace>() };

  started(source: CommandSource, id: string, command: string, cwd: string): void {
    this.traces[source].set(id, { command, cwd, hash: createHash('sha256'), bytes: 0 });
  }

  output(source: CommandSource, id: string, bytes: Buffer): void {
    const t = this.traces[source].get(id);
    if (!t) return;
    t.hash.update(bytes);
    t.bytes += bytes.length;
  }

  /** The audit record for a command that ended. */
  exited(
    source: CommandSource,
    event: AgentEventOf<'command_exited'>,
  ): { type: 'command' | 'command_claim'; data: AuditRecordData['command'] } {
    const map = this.traces[source];
    const t = map.get(event.id);
    map.delete(event.id);
    return {
      type: source === 'observed' ? 'command' : 'command_claim',
      data: {
        id: event.id,
        command: t?.command ?? '',
        cwd: t?.cwd ?? '/workspace',
        exitCode: event.exitCode,
        durationMs: event.durationMs,
        timedOut: event.timedOut,
        outputBytes: event.outputBytes ?? t?.bytes ?? 0,
        outputSha256: (t?.hash ?? createHash('sha256')).digest('hex'),
      },
    };
  }
}
