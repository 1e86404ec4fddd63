import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TerminalChunk } from '../../contracts';
import type { ApiRouter } from '../api/router';
import { DisposableStore, toDisposable, type Disposable } from '../common/disposable';
import { TerminalBatcher } from './terminal-batcher';

/** Past this many bytes queued on the response, output is dropped from the live view (a gap). */
const HIGH_WATER = 1024 * 1024;

/**
 * Terminal output for the browser as one streamed HTTP response: newline-delimited JSON, one
 * `TerminalChunk` a line. A browser receives a fetch stream several times faster than WebSocket
 * messages (measured in bench/terminal.bench.ts), and TCP backpressure tells the batcher when the
 * page is behind. The caller has checked Host, Origin and token.
 */
export function serveTerminalStream(req: IncomingMessage, res: ServerResponse, router: ApiRouter, headers: Record<string, string>): Disposable {
  const store = new DisposableStore();
  res.writeHead(200, { ...headers, 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store' });
  // Headers now, so the page's fetch resolves before any output exists.
  res.flushHeaders();
  const batcher = store.add(new TerminalBatcher({
    send: (chunk) => {
      if (!res.destroyed) res.write(`${JSON.stringify(chunk)}\n`);
    },
    isCongested: () => res.writableLength > HIGH_WATER,
  }));
  store.add(router.subscribe('terminals:onDidData', (payload) => batcher.push(payload as TerminalChunk)));
  store.add(toDisposable(() => res.end()));
  const close = () => store.dispose();
  req.on('close', close);
  res.on('close', close);
  return store;
}
