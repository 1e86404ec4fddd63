import { randomBytes } from 'node:crypto';
import { Emitter, type Disposable, type Event } from './disposable';

/** Who settled a question: the user, the wait running out, or the caller or run going away. */
export type SettledBy = 'user' | 'timeout' | 'closed';

/** A question as put to the user: host-made id and deadline, the rest the caller's. */
export interface PendingQuestion {
  id: string;
  expiresAt: string;
}

/**
 * Questions a run holds for the user while a request or a call waits (network approvals, §2.8; MCP
 * tool calls, §20): each waits at most `waitMs`, at most `max` at once (more are refused at once, so
 * an agent cannot flood the user), and is settled once — by the user, the timeout, or its caller's
 * signal — with `refuse` unless the user answered otherwise.
 */
export class PendingQuestions<Q extends PendingQuestion, A extends string> implements Disposable {
  private readonly pending = new Map<string, { question: Q; settle(answer: A, by: SettledBy): void }>();
  private readonly asked = new Emitter<Q>();
  private readonly resolved = new Emitter<{ id: string; answer: A; by: SettledBy; question: Q }>();
  readonly onDidAsk: Event<Q> = this.asked.event;
  readonly onDidResolve: Event<{ id: string; answer: A; by: SettledBy; question: Q }> = this.resolved.event;

  constructor(private readonly opts: { waitMs: number; max: number; idPrefix: string; refuse: A }) {}

  /** The questions open now. */
  open(): Q[] {
    return [...this.pending.values()].map((p) => p.question);
  }

  /** An open question, or undefined. */
  get(id: string): Q | undefined {
    return this.pending.get(id)?.question;
  }

  /** Puts a question to the user; resolves with the answer and who gave it. */
  ask(body: Omit<Q, 'id' | 'expiresAt'>, signal?: AbortSignal): Promise<{ answer: A; by: SettledBy }> {
    const { refuse, waitMs } = this.opts;
    if (this.pending.size >= this.opts.max || signal?.aborted) return Promise.resolve({ answer: refuse, by: 'closed' });
    const id = `${this.opts.idPrefix}-${randomBytes(6).toString('hex')}`;
    const question = { id, ...body, expiresAt: new Date(Date.now() + waitMs).toISOString() } as Q;
    return new Promise((resolve) => {
      const timer = setTimeout(() => settle(refuse, 'timeout'), waitMs);
      const onAbort = () => settle(refuse, 'closed');
      const settle = (answer: A, by: SettledBy) => {
        if (!this.pending.delete(id)) return;
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.resolved.fire({ id, answer, by, question });
        resolve({ answer, by });
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, { question, settle });
      this.asked.fire(question);
    });
  }

  /** The user's answer; false when the question is no longer open. */
  answer(id: string, answer: A): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    p.settle(answer, 'user');
    return true;
  }

  dispose(): void {
    for (const p of [...this.pending.values()]) p.settle(this.opts.refuse, 'closed');
    this.asked.dispose();
    this.resolved.dispose();
  }
}
