/**
 * What a model sees of a command's output: all of it up to `capBytes`, else the first and last
 * half, with the middle cut and said so. Keeps at most about `capBytes` of a flood in memory.
 * Runs on Node 18 too (the built-in agent bundles it).
 */
export class OutputCapture {
  private readonly head: Buffer[] = [];
  private headBytes = 0;
  private readonly tail: Buffer[] = [];
  private tailBytes = 0;
  /** Every byte seen. */
  bytes = 0;

  constructor(private readonly capBytes: number) {}

  add(chunk: Buffer): void {
    this.bytes += chunk.length;
    let rest = chunk;
    if (this.headBytes < this.capBytes && this.tailBytes === 0) {
      const room = this.capBytes - this.headBytes;
      this.head.push(rest.subarray(0, room));
      this.headBytes += Math.min(room, rest.length);
      if (rest.length <= room) return;
      rest = rest.subarray(room);
    }
    const half = Math.floor(this.capBytes / 2);
    this.tail.push(rest);
    this.tailBytes += rest.length;
    while (this.tail.length > 1 && this.tailBytes - (this.tail[0] as Buffer).length >= half) this.tailBytes -= (this.tail.shift() as Buffer).length;
  }

  get truncated(): boolean {
    return this.tailBytes > 0;
  }

  /** The text for the model. */
  text(): string {
    const head = Buffer.concat(this.head);
    if (!this.truncated) return head.toString('utf8');
    const half = Math.floor(this.capBytes / 2);
    const tail = Buffer.concat([head, ...this.tail]).subarray(-half);
    return `${head.subarray(0, half).toString('utf8')}\n… [${this.bytes} bytes of output; middle cut] …\n${tail.toString('utf8')}`;
  }
}
