/**
 * Whether the page's terminal views still have output to draw. The transports (the browser's
 * terminal stream, Electron IPC) acknowledge what they received only once none has, so the host
 * sends no more than the page can draw and skips the rest there, before it costs the transport and
 * the page (docs/architecture.md §5).
 */
export class TerminalFlow {
  private readonly busy = new Set<object>();
  private readonly idleListeners = new Set<() => void>();

  /** A view (its sink) has output waiting or being parsed, or has none left. */
  setBusy(owner: object, busy: boolean): void {
    if (busy) {
      this.busy.add(owner);
      return;
    }
    if (!this.busy.delete(owner) || this.busy.size) return;
    for (const listener of [...this.idleListeners]) listener();
  }

  get isBusy(): boolean {
    return this.busy.size > 0;
  }

  /** Called each time the last busy view becomes idle; returns the unsubscribe function. */
  onIdle(listener: () => void): () => void {
    this.idleListeners.add(listener);
    return () => this.idleListeners.delete(listener);
  }
}

/** The page's one flow: terminal views report to it, the transports read it. */
export const terminalFlow = new TerminalFlow();

/**
 * A transport's side of the flow: counts the terminal output it received and acknowledges it (a
 * running total) once no view has any left to draw.
 */
export class TerminalAcks {
  private received = 0;
  private acked = 0;
  private readonly stopIdle: () => void;

  constructor(
    private readonly state: Pick<TerminalFlow, 'isBusy' | 'onIdle'>,
    private readonly send: (total: number) => void,
  ) {
    this.stopIdle = state.onIdle(() => this.maybeAck());
  }

  /** A data chunk's size, counted the way the host counts it (bytes, or characters over IPC). */
  add(n: number): void {
    this.received += n;
  }

  /** A new connection: counting starts again. */
  reset(): void {
    this.received = 0;
    this.acked = 0;
  }

  maybeAck(): void {
    if (this.received === this.acked || this.state.isBusy) return;
    this.acked = this.received;
    this.send(this.acked);
  }

  dispose(): void {
    this.stopIdle();
  }
}
