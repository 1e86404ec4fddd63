import { HOST_TERMINAL_STREAM_ACK_PARAM, HOST_TERMINAL_STREAM_PATH } from '../../../contracts/transport';
import { concatBytes } from '../lib/concat-bytes';
import { TerminalAcks, type TerminalFlow } from '../terminal/terminal-flow';

export interface TerminalStreamOptions {
  /** Defaults to this page's host. */
  url?: string;
  /** For tests. */
  fetch?: typeof fetch;
  /**
   * Flow control: output is acknowledged (`sendAck`, a running total of data bytes) only while
   * `flow` says no terminal view has any left to draw, so the host never sends more than the page draws.
   */
  flow?: { state: Pick<TerminalFlow, 'isBusy' | 'onIdle'>; sendAck(stream: string, bytes: number): void };
}

/**
 * Reads the records of the terminal stream (contracts/transport.ts) from byte chunks cut anywhere:
 * a JSON line, then for a data record its bytes, handed on as a Uint8Array (never decoded here:
 * xterm takes UTF-8 bytes).
 */
export class TerminalRecordReader {
  /** The part of a header line received so far. */
  private line: Uint8Array = new Uint8Array(0);
  private data: { header: Record<string, unknown>; need: number; parts: Uint8Array[]; have: number } | undefined;
  private readonly decoder = new TextDecoder();

  constructor(private readonly onChunk: (chunk: unknown) => void) {}

  push(value: Uint8Array): void {
    let input = value;
    while (input.length) {
      if (this.data) {
        const d = this.data;
        const take = Math.min(d.need - d.have, input.length);
        d.parts.push(input.subarray(0, take));
        d.have += take;
        input = input.subarray(take);
        if (d.have === d.need) {
          this.data = undefined;
          this.onChunk({ ...d.header, data: d.parts.length === 1 ? d.parts[0] : concatBytes(d.parts, d.need) });
        }
        continue;
      }
      // A header line: gather bytes until its newline (headers are small).
      const nl = input.indexOf(10);
      const upto = nl < 0 ? input.length : nl;
      this.line = this.line.length ? concatBytes([this.line, input.subarray(0, upto)]) : input.subarray(0, upto);
      if (nl < 0) return;
      input = input.subarray(nl + 1);
      const header = JSON.parse(this.decoder.decode(this.line)) as Record<string, unknown>;
      this.line = new Uint8Array(0);
      if (header.kind === 'data' && typeof header.bytes === 'number') {
        const { bytes, ...rest } = header;
        if (bytes === 0) this.onChunk({ ...rest, data: new Uint8Array(0) });
        else this.data = { header: rest, need: bytes, parts: [], have: 0 };
      } else this.onChunk(header);
    }
  }
}


/**
 * Receives every terminal's output from `airlock serve` as one streamed response. The browser
 * takes a fetch stream faster than WebSocket messages. Reconnects with backoff until disposed.
 */
export function openTerminalStream(onChunk: (chunk: unknown) => void, opts: TerminalStreamOptions = {}): () => void {
  const flow = opts.flow;
  const base = opts.url ?? `${location.origin}${HOST_TERMINAL_STREAM_PATH}`;
  const url = flow ? `${base}${base.includes('?') ? '&' : '?'}${HOST_TERMINAL_STREAM_ACK_PARAM}=1` : base;
  const doFetch = opts.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  let abort: AbortController | undefined;
  let disposed = false;
  let retry = 0;
  // This connection's flow: its id (from the hello record), and the bytes it received and acknowledged.
  let stream: string | undefined;
  const acks = flow ? new TerminalAcks(flow.state, (total) => { if (stream !== undefined) flow.sendAck(stream, total); }) : undefined;
  const onRecord = (chunk: unknown) => {
    const c = chunk as { kind?: unknown; stream?: unknown; data?: unknown };
    if (c.kind === 'hello') {
      stream = typeof c.stream === 'string' ? c.stream : undefined;
      acks?.reset();
      return;
    }
    onChunk(chunk);
    if (c.data instanceof Uint8Array) acks?.add(c.data.length);
  };

  const connect = async () => {
    while (!disposed) {
      abort = new AbortController();
      stream = undefined;
      try {
        const res = await doFetch(url, { method: 'POST', signal: abort.signal, cache: 'no-store' });
        if (res.ok && res.body) {
          const reader = res.body.getReader();
          const records = new TerminalRecordReader(onRecord);
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            retry = 0;
            records.push(value);
            acks?.maybeAck();
          }
        }
      } catch {
        // Dropped or refused: try again below, unless disposed.
      }
      if (disposed) return;
      retry = Math.min(retry + 1, 6);
      await new Promise((r) => setTimeout(r, 200 * 2 ** retry));
    }
  };
  void connect();
  return () => {
    disposed = true;
    acks?.dispose();
    abort?.abort();
  };
}
