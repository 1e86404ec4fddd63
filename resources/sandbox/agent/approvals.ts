import { createInterface, type Interface } from 'node:readline';

/**
 * Reads `{"type":"approval_response","id":…,"approved":…}` lines from stdin. Answers may arrive
 * before they are awaited; a closed stdin denies everything still pending.
 */
export class ApprovalReader {
  private rl: Interface | undefined;
  private readonly answers = new Map<string, boolean>();
  private readonly waiting = new Map<string, (approved: boolean) => void>();
  private closed = false;

  start(): void {
    this.rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
    this.rl.on('line', (line) => {
      let msg: { type?: unknown; id?: unknown; approved?: unknown };
      try {
        msg = JSON.parse(line) as typeof msg;
      } catch {
        return;
      }
      if (msg.type !== 'approval_response' || typeof msg.id !== 'string') return;
      const approved = msg.approved === true;
      const waiter = this.waiting.get(msg.id);
      if (waiter) {
        this.waiting.delete(msg.id);
        waiter(approved);
      } else {
        this.answers.set(msg.id, approved);
      }
    });
    this.rl.on('close', () => {
      this.closed = true;
      for (const [id, waiter] of this.waiting) {
        this.waiting.delete(id);
        waiter(false);
      }
    });
  }

  wait(id: string): Promise<boolean> {
    const early = this.answers.get(id);
    if (early !== undefined) {
      this.answers.delete(id);
      return Promise.resolve(early);
    }
    if (this.closed) return Promise.resolve(false);
    return new Promise((resolve) => this.waiting.set(id, resolve));
  }

  close(): void {
    this.rl?.close();
    process.stdin.destroy();
  }
}
