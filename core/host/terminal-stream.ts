import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TerminalChunk } from '../../contracts';
import type { ApiRouter } from '../api/router';
import { DisposableStore, toDisposable, type Disposable, type Event } from '../common/disposable';
import type { TerminalBytes, TerminalOutput } from '../common/terminal-output';
import { FlowWindow, TERMINAL_FLOW_WINDOW } from './flow-window';
import { byteChunks, TerminalBatcher } from './terminal-batcher';

/** Past this many bytes queued on the response, output is dropped from the live view (a gap). */
const HIGH_WATER = 1024 * 1024;

/** One open terminal stream. */
export interface TerminalStream extends Disposable {
  readonly id: string;
  /** The page drew (or skipped) this many of the data bytes sent so far: a running total. */
  ack(bytes: number): void;
}

/** Terminal output as bytes from the router's text event, for services that have no byte source (fakes). */
export function bytesFromRouter(router: ApiRouter): Event<TerminalOutput> {
  return (listener) => router.subscribe('terminals:onDidData', (payload) => {
    const c = payload as TerminalChunk;
    listener(c.kind === 'data' ? { kind: 'bytes', terminalId: c.terminalId, runId: c.runId, seq: c.seq, ...(c.end !== undefined ? { end: c.end } : {}), bytes: Buffer.from(c.data) } : c);
  });
}

/** One record of the stream (contracts/transport.ts): a JSON line, and a data record's bytes after it. */
function writeRecord(res: ServerResponse, c: TerminalBytes | Exclude<TerminalChunk, { kind: 'data' }>): void {
  if (c.kind !== 'bytes') {
    res.write(`${JSON.stringify(c)}\n`);
    return;
  }
  const { bytes, kind: _kind, ...fields } = c;
  res.cork();
  res.write(`${JSON.stringify({ kind: 'data', ...fields, bytes: bytes.length })}\n`);
  res.write(bytes);
  process.nextTick(() => res.uncork());
}

/**
 * Terminal output for the browser as one streamed HTTP response of binary records: output stays
 * bytes from the sandbox to xterm (no decoding, no JSON escaping), a browser receives a fetch
 * stream faster than WebSocket messages (bench/terminal.bench.ts). With `flow`, the page
 * acknowledges what it drew and the host keeps at most TERMINAL_FLOW_WINDOW bytes unacknowledged;
 * without, TCP backpressure alone tells the batcher when the page is behind. Either way a page
 * that is behind gets the newest output after a gap, and the producer never waits. The caller has
 * checked Host, Origin and token.
 */
export function serveTerminalStream(req: IncomingMessage, res: ServerResponse, source: Event<TerminalOutput>, headers: Record<string, string>, flow = false): TerminalStream {
  const store = new DisposableStore();
  const id = randomUUID();
  const window = flow ? new FlowWindow(TERMINAL_FLOW_WINDOW) : undefined;
  res.writeHead(200, { ...headers, 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
  // Headers now, so the page's fetch resolves before any output exists.
  res.flushHeaders();
  if (flow) res.write(`${JSON.stringify({ kind: 'hello', stream: id, window: TERMINAL_FLOW_WINDOW })}\n`);
  const batcher = store.add(new TerminalBatcher(byteChunks, {
    send: (chunk) => {
      if (res.destroyed) return;
      if (chunk.kind === 'bytes') window?.sent(chunk.bytes.length);
      writeRecord(res, chunk);
    },
    isCongested: () => res.writableLength > HIGH_WATER || Boolean(window?.full),
    // What a page that is behind gets next: the newest output, no more than it would take anyway.
    ...(flow ? { maxBatch: TERMINAL_FLOW_WINDOW } : {}),
  }));
  store.add(source((chunk) => batcher.push(chunk)));
  store.add(toDisposable(() => res.end()));
  const close = () => store.dispose();
  req.on('close', close);
  res.on('close', close);
  return {
    id,
    ack(bytes) {
      if (window?.ack(bytes)) batcher.flush();
    },
    dispose: close,
  };
}
