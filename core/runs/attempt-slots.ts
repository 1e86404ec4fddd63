import os from 'node:os';
import { toDisposable, type Disposable } from '../common/disposable';

/** Memory one attempt is given room for when the default concurrency is worked out. */
const MEMORY_PER_ATTEMPT = 2 * 1024 ** 3;

/**
 * How many attempts run at once when the `attemptsConcurrency` setting is absent: one per core, no
 * more than memory holds at about 2 GiB each, at least 1 and at most 8.
 */
export function defaultAttemptConcurrency(cores = os.availableParallelism(), memoryBytes = os.totalmem()): number {
  return Math.max(1, Math.min(8, cores, Math.floor(memoryBytes / MEMORY_PER_ATTEMPT)));
}

/** A counting semaphore: `acquire` resolves (first come, first served) once fewer than `limit` are held. */
export class Slots {
  private held = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly limit: number) {}

  acquire(): Promise<Disposable> {
    return new Promise((resolve) => {
      const grant = () => {
        this.held++;
        let released = false;
        resolve(
          toDisposable(() => {
            if (released) return;
            released = true;
            this.held--;
            this.waiting.shift()?.();
          }),
        );
      };
      if (this.held < this.limit) grant();
      else this.waiting.push(grant);
    });
  }

  /** Held now, and waiting. */
  get state(): { held: number; waiting: number } {
    return { held: this.held, waiting: this.waiting.length };
  }
}
