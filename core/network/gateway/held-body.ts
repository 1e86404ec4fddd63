/**
 * A request body kept (up to a bound) while it is forwarded, so the gateway can send the request
 * once more after a 401 with a fresh secret (docs/architecture.md §2.8). A body over the bound is
 * dropped at once and the request is never sent again: its 401 goes to the client as it came.
 */
export const RETRY_BODY_LIMIT = 1024 * 1024;

export class HeldBody {
  private chunks: Buffer[] = [];
  private size = 0;
  private state: 'open' | 'ended' | 'dropped' = 'open';
  private readonly waiters: Array<(body: Buffer | undefined) => void> = [];

  constructor(private readonly limit: number = RETRY_BODY_LIMIT) {}

  add(chunk: Buffer): void {
    if (this.state !== 'open') return;
    this.size += chunk.length;
    if (this.size > this.limit) this.drop();
    else this.chunks.push(chunk);
  }

  /** The client sent the whole body. */
  end(): void {
    if (this.state !== 'open') return;
    this.state = 'ended';
    this.wake();
  }

  /** Too large, or the client went away: nothing to send again. */
  drop(): void {
    if (this.state === 'dropped') return;
    this.state = 'dropped';
    this.chunks = [];
    this.wake();
  }

  /** The whole body once the client sent it, or undefined when it was dropped. */
  whole(): Promise<Buffer | undefined> {
    if (this.state === 'open') return new Promise((resolve) => this.waiters.push(resolve));
    return Promise.resolve(this.state === 'ended' ? Buffer.concat(this.chunks) : undefined);
  }

  private wake(): void {
    const body = this.state === 'ended' ? Buffer.concat(this.chunks) : undefined;
    for (const w of this.waiters.splice(0)) w(body);
  }
}
