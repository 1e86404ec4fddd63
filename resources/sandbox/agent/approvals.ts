import { createInterface, type Interface } from 'node:readline';
import type { AgentEventOf } from '../../../contracts/agent-events';

export type CommandResult = Omit<AgentEventOf<'command_result'>, 'type' | 'id'>;

/**
 * Reads the host's lines on stdin: `approval_response` (approval mode `ask`) and `command_result`
 * (host-run commands). Answers may arrive before they are awaited; a closed stdin denies every
 * pending approval and fails every pending command.
 */
export class ApprovalReader {
  private rl: Interface | undefined;
  private readonly early = new Map<string, unknown>();
  private readonly waiting = new Map<string, (answer: unknown) => void>();
  private closed = false;

  start(): void {
    this.rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
    this.rl.on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (typeof msg.id !== 'string') return;
      if (msg.type === 'approval_response') this.answer(`approval:${msg.id}`, msg.approved === true);
      else if (msg.type === 'command_result') this.answer(`command:${msg.id}`, msg);
    });
    this.rl.on('close', () => {
      this.closed = true;
      for (const [key, waiter] of this.waiting) {
        this.waiting.delete(key);
        waiter(undefined);
      }
    });
  }

  private answer(key: string, value: unknown): void {
    const waiter = this.waiting.get(key);
    if (waiter) {
      this.waiting.delete(key);
      waiter(value);
    } else {
      this.early.set(key, value);
    }
  }

  private waitFor(key: string): Promise<unknown> {
    if (this.early.has(key)) {
      const v = this.early.get(key);
      this.early.delete(key);
      return Promise.resolve(v);
    }
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiting.set(key, resolve));
  }

  async wait(id: string): Promise<boolean> {
    return (await this.waitFor(`approval:${id}`)) === true;
  }

  /** The result of a host-run command; a closed stdin gives a failed one. */
  async command(id: string): Promise<CommandResult> {
    const r = (await this.waitFor(`command:${id}`)) as Partial<CommandResult> | undefined;
    if (!r || typeof r.output !== 'string') {
      return { exitCode: null, timedOut: false, durationMs: 0, output: 'the host did not run the command (the run is ending)', truncated: false, outputBytes: 0 };
    }
    return { exitCode: typeof r.exitCode === 'number' ? r.exitCode : null, timedOut: r.timedOut === true, durationMs: Number(r.durationMs) || 0, output: r.output, truncated: r.truncated === true, outputBytes: Number(r.outputBytes) || 0 };
  }

  close(): void {
    this.rl?.close();
    process.stdin.destroy();
  }
}
