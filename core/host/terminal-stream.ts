import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TerminalChunk } from '../../contracts';
import type { ApiRouter } from '../api/router';
import { DisposableStore, toDisposable, type Disposable, type Event } from '../common/disposable';
import type { TerminalBytes, TerminalOutput } from '../common/terminal-output';
import { byteChunks, TerminalBatcher } from './terminal-batcher';

/** Past this many bytes queued on the response, output is dropped from the live view (a gap). */
const HIGH_WATER = 1024 * 1024;

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
 * stream faster than WebSocket messages (bench/terminal.bench.ts), and TCP backpressure tells the
 * batcher when the page is behind. The caller has checked Host, Origin and token.
 */
export function serveTerminalStream(req: IncomingMessage, res: ServerResponse, source: Event<TerminalOutput>, headers: Record<string, string>): Disposable {
  const store = new DisposableStore();
  res.writeHead(200, { ...headers, 'content-type': 'application/octet-stream', 'cache-control': 'no-store' });
  // Headers now, so the page's fetch resolves before any output exists.
  res.flushHeaders();
  const batcher = store.add(new TerminalBatcher(byteChunks, {
    send: (chunk) => {
      if (!res.destroyed) writeRecord(res, chunk);
    },
    isCongested: () => res.writableLength > HIGH_WATER,
  }));
  store.add(source((chunk) => batcher.push(chunk)));
  store.add(toDisposable(() => res.end()));
  const close = () => store.dispose();
  req.on('close', close);
  res.on('close', close);
  return store;
}
