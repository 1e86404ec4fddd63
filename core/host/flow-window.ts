/**
 * Flow control of terminal output toward one page: the page acknowledges (a running total) what
 * its terminals drew or skipped, and the host sends no more while the unacknowledged output is over
 * the window. The host then keeps only the newest output (TerminalBatcher), so the page is only
 * sent what it can draw and the producer never waits.
 */
export class FlowWindow {
  private sentTotal = 0;
  private ackedTotal = 0;

  constructor(readonly size: number) {}

  /** Output (bytes, or characters on a text transport) handed to the page. */
  sent(n: number): void {
    this.sentTotal += n;
  }

  /** True while the page has more than a window of output it has not acknowledged. */
  get full(): boolean {
    return this.sentTotal - this.ackedTotal > this.size;
  }

  /**
   * The page's running total. A late or repeated ack changes nothing, and it never counts for more
   * than was sent. Returns true when it made room.
   */
  ack(total: number): boolean {
    const next = Math.min(total, this.sentTotal);
    if (!(next > this.ackedTotal)) return false;
    this.ackedTotal = next;
    return true;
  }
}

/** About what a page draws in a few frames: more would only be skipped there, after costing the transport and the page's CPU. */
export const TERMINAL_FLOW_WINDOW = 64 * 1024;
