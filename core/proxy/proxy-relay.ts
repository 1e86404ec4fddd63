import type { IncomingMessage, ServerResponse } from 'node:http';
import { AirlockError } from '../../contracts/errors';
import type { Secret } from '../keys/secret';
import { clientHeaders, keyRedactor, redactKey, sendUpstream } from '../upstream/upstream-client';
import { sendError } from './proxy-intake';
import type { ModelCallEvent } from './proxy-ledger';
import type { AdmittedCall } from './proxy-policy';
import { currentKey } from './upstream-resolver';
import { noUsage, SseUsageScanner, usageFromJson, type CallUsage } from './usage-meter';

/**
 * The model proxy's relay (docs/architecture.md §2.1, §8): an admitted call goes upstream with the
 * real key, and its answer comes back — SSE chunk by chunk with backpressure, errors buffered —
 * with any echo of the key removed. Each call ends exactly once, in `RelayHooks.record`.
 */

const MAX_ERROR_BODY = 1024 * 1024;
const MAX_USAGE_BODY = 8 * 1024 * 1024;

/** What the relay tells the proxy about a call. */
export interface RelayHooks {
  /** The call is complete (answered, refused upstream, unreachable or abandoned): meter it once. */
  record(call: AdmittedCall, outcome: { status: number; usage: CallUsage; aborted?: boolean; unreachable?: ModelCallEvent['unreachable'] }): void;
  /** A ChatGPT sign-in was refreshed because the upstream refused its token. */
  signinRefreshed(call: AdmittedCall): void;
}

/**
 * Sends the call upstream with the real key and relays the answer; meters it once it is complete.
 * A ChatGPT sign-in that the upstream refuses (401) is refreshed and the call sent once more.
 */
export function forwardCall(res: ServerResponse, call: AdmittedCall, hooks: RelayHooks, retry = false): void {
  const { run, format, providerId, resolved } = call;
  const key = currentKey(resolved);
  const session = resolved.chatgpt;
  if (!retry) run.usage.requests += 1;
  let done = false;
  /** Marks the call complete; false when it already was (each call is metered once). */
  const settle = (): boolean => {
    if (done) return false;
    done = true;
    run.active.delete(handle);
    return true;
  };
  const record = (status: number, usage: CallUsage, aborted = false) => hooks.record(call, { status, usage, aborted });
  const handle = sendUpstream({
    provider: resolved.config,
    key,
    method: call.method,
    pathAndQuery: call.pathAndQuery,
    headers: call.headers,
    body: call.body,
    extraHeaders: session ? { 'chatgpt-account-id': session.accountId } : undefined,
    onError: (err) => {
      if (!settle()) return;
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      sendError(res, format, 502, redactKey(`could not reach ${providerId} upstream (${code})`, key));
      hooks.record(call, { status: 502, usage: noUsage(), unreachable: { baseUrl: resolved.config.baseUrl, code } });
    },
    onResponse: (up) => {
      const status = up.statusCode ?? 502;
      if (status === 401 && session && key) {
        up.resume();
        // This attempt ends here; the refreshed one records the call. One refresh per refused
        // token and one retry per call: a token refused right after its refresh is a clear error.
        if (!settle()) return;
        session.refreshAfterRefusal(key).then(
          (refreshed) => {
            if (refreshed) hooks.signinRefreshed(call);
            if (res.destroyed) record(499, noUsage(), true);
            else if (!retry) forwardCall(res, call, hooks, true);
            else {
              sendError(res, format, 401, 'ChatGPT refused the sign-in twice in a row; retry the request, or sign in again (`codex login`, then `airlock keys import-codex`) if it keeps happening.');
              record(401, noUsage());
            }
          },
          (err: unknown) => {
            sendError(res, format, 401, err instanceof AirlockError ? err.message : 'the ChatGPT sign-in could not be refreshed');
            record(401, noUsage());
          },
        );
        return;
      }
      if (status >= 400) relayError(up, res, key, () => settle() && record(status, noUsage()));
      else relayAnswer(up, res, key, settle, (usage) => record(status, usage));
    },
  });
  run.active.add(handle);
  res.on('close', () => {
    if (!settle()) return;
    // The client went away mid-answer: stop paying for tokens nobody reads.
    handle.abort();
    record(res.statusCode || 499, noUsage(), true);
  });
}

/**
 * Passes a successful answer on as it arrives (SSE chunk by chunk, with backpressure), with any
 * echo of the key removed, and reads its usage on the way. `settle` is false when the call was
 * already complete (the client went away): then the answer is neither ended nor metered again.
 */
function relayAnswer(up: IncomingMessage, res: ServerResponse, key: Secret | undefined, settle: () => boolean, onEnd: (usage: CallUsage) => void): void {
  const isSse = String(up.headers['content-type'] ?? '').includes('text/event-stream');
  const declared = Number(up.headers['content-length']);
  if (!isSse && Number.isInteger(declared) && declared >= 0 && declared <= MAX_USAGE_BODY) {
    relayWhole(up, res, key, settle, onEnd);
    return;
  }
  const scanner = isSse ? new SseUsageScanner() : undefined;
  const jsonChunks: Buffer[] = [];
  let jsonSize = 0;
  // An upstream that echoes the key must not hand it to the sandbox, even cut across chunks.
  const redactor = keyRedactor(key);
  const headers = clientHeaders(up.headers, key);
  // Redaction can shorten the body, so its length is not known up front: it goes out chunked.
  if (redactor) delete headers['content-length'];
  res.writeHead(up.statusCode ?? 200, headers);
  // Headers normally leave with the first event (one write, one wake-up for the client); if the
  // upstream is slow to send that event, they go out alone shortly after.
  let flushTimer: NodeJS.Timeout | undefined = isSse ? setTimeout(() => res.flushHeaders(), 10) : undefined;
  up.on('data', (chunk: Buffer) => {
    if (scanner) scanner.push(chunk);
    else if (jsonSize < MAX_USAGE_BODY) {
      jsonChunks.push(chunk);
      jsonSize += chunk.length;
    }
    const out = redactor ? redactor.push(chunk) : chunk;
    if (!out.length) return;
    if (flushTimer) {
      clearTimeout(flushTimer);
      flushTimer = undefined;
    }
    // Backpressure: a slow client slows the upstream read instead of growing memory.
    if (!res.write(out)) {
      up.pause();
      res.once('drain', () => up.resume());
    }
  });
  up.on('end', () => {
    if (flushTimer) clearTimeout(flushTimer);
    if (!settle()) return;
    const tail = redactor?.end();
    res.end(tail?.length ? tail : undefined);
    onEnd(scanner ? scanner.usage : usageFromJson((jsonChunks.length === 1 ? (jsonChunks[0] as Buffer) : Buffer.concat(jsonChunks)).toString('utf8')));
  });
  up.on('error', () => res.destroy());
  // The upstream died mid-answer: cut the client off too, so it does not take a torso for a body.
  up.on('close', () => {
    if (!up.complete) res.destroy();
  });
}

/**
 * A non-streamed answer of declared, bounded length (a JSON body: the meter reads it whole anyway)
 * goes out whole, redacted once, with its length: one write, where a streamed copy would be a
 * chunked head, the body, and the redactor's held-back tail at the end.
 */
function relayWhole(up: IncomingMessage, res: ServerResponse, key: Secret | undefined, settle: () => boolean, onEnd: (usage: CallUsage) => void): void {
  const chunks: Buffer[] = [];
  up.on('data', (c: Buffer) => chunks.push(c));
  up.on('end', () => {
    if (!settle()) return;
    const raw = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
    const redactor = keyRedactor(key);
    const body = redactor ? Buffer.concat([redactor.push(raw), redactor.end()]) : raw;
    const headers = clientHeaders(up.headers, key);
    headers['content-length'] = body.length;
    res.writeHead(up.statusCode ?? 200, headers);
    res.end(body);
    onEnd(usageFromJson(raw.toString('utf8')));
  });
  up.on('error', () => res.destroy());
  up.on('close', () => {
    if (!up.complete) res.destroy();
  });
}

/** Passes an upstream error on, buffered (bounded) so any echo of the key can be removed. */
function relayError(up: IncomingMessage, res: ServerResponse, key: Secret | undefined, onDone: () => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  up.on('data', (c: Buffer) => {
    if (size < MAX_ERROR_BODY) chunks.push(c);
    size += c.length;
  });
  up.on('end', () => {
    const text = redactKey(Buffer.concat(chunks).toString('utf8').slice(0, MAX_ERROR_BODY), key);
    const headers = clientHeaders(up.headers, key);
    headers['content-length'] = Buffer.byteLength(text);
    if (!res.headersSent && !res.destroyed) {
      res.writeHead(up.statusCode ?? 502, headers);
      res.end(text);
    }
    onDone();
  });
  up.on('error', () => res.destroy());
}
