import { HOST_TERMINAL_STREAM_PATH } from '../../../contracts/transport';

export interface TerminalStreamOptions {
  /** Defaults to this page's host. */
  url?: string;
  /** For tests. */
  fetch?: typeof fetch;
}

/**
 * Receives every terminal's output from `airlock serve` as one streamed response (newline-delimited
 * JSON, one chunk a line; see contracts/transport.ts). The browser takes a fetch stream several
 * times faster than WebSocket messages. Reconnects with backoff until disposed.
 */
export function openTerminalStream(onChunk: (chunk: unknown) => void, opts: TerminalStreamOptions = {}): () => void {
  const url = opts.url ?? `${location.origin}${HOST_TERMINAL_STREAM_PATH}`;
  const doFetch = opts.fetch ?? ((input: RequestInfo | URL, init?: RequestInit) => fetch(input, init));
  let abort: AbortController | undefined;
  let disposed = false;
  let retry = 0;

  const readLines = async (body: ReadableStream<Uint8Array>) => {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let pending = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      retry = 0;
      pending += decoder.decode(value, { stream: true });
      let start = 0;
      let nl: number;
      while ((nl = pending.indexOf('\n', start)) >= 0) {
        onChunk(JSON.parse(pending.slice(start, nl)));
        start = nl + 1;
      }
      pending = start ? pending.slice(start) : pending;
    }
  };

  const connect = async () => {
    while (!disposed) {
      abort = new AbortController();
      try {
        const res = await doFetch(url, { method: 'POST', signal: abort.signal, cache: 'no-store' });
        if (res.ok && res.body) await readLines(res.body);
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
    abort?.abort();
  };
}
