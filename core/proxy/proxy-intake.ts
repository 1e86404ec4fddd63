import { isAscii } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { errorBody, type WireFormat } from './wire-format';

/**
 * The model proxy's intake (docs/architecture.md §2.1, §3): what a request is before anything trusts
 * it — its target split once, the base-URL probe, a bounded body read, and the answers that refuse
 * a request. Nothing here knows runs, keys or budgets.
 */

/** Largest request body accepted by default (agents send whole conversations). */
export const DEFAULT_MAX_BODY = 32 * 1024 * 1024;
/** How much of a refused request's body is drained so the client can read the answer. */
const MAX_DISCARD = 4 * 1024 * 1024;

/** Method, path and query string of a request, split once. */
export interface RequestTarget {
  method: string;
  path: string;
  /** `?…` or empty; passed upstream unchanged (Claude Code sends `?beta=true`). */
  query: string;
}

export function requestTarget(req: IncomingMessage): RequestTarget {
  const rawUrl = req.url ?? '/';
  const q = rawUrl.indexOf('?');
  return { method: req.method ?? 'GET', path: q < 0 ? rawUrl : rawUrl.slice(0, q), query: q < 0 ? '' : rawUrl.slice(q) };
}

/** Claude Code probes its base URL with `HEAD /` before the first call: answered at once, no token needed. */
export function answerProbe(target: RequestTarget, res: ServerResponse): boolean {
  if (target.path !== '/' || (target.method !== 'HEAD' && target.method !== 'GET')) return false;
  const head = target.method === 'HEAD';
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': head ? 0 : 2 });
  res.end(head ? undefined : 'ok');
  return true;
}

/** The wire format a refused request most likely speaks, for an answer its client can read. */
export function guessFormat(req: IncomingMessage, target: RequestTarget): WireFormat {
  return target.path.startsWith('/v1/messages') || req.headers['anthropic-version'] !== undefined ? 'anthropic' : 'openai';
}

/** The whole body, or `too-large` as soon as it (or its declared length) passes `maxBody`. */
export function readBody(req: IncomingMessage, maxBody: number): Promise<Buffer | 'too-large'> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxBody) {
      resolve('too-large');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (c: Buffer) => {
      if (over) return;
      size += c.length;
      if (size > maxBody) {
        over = true;
        chunks.length = 0;
        resolve('too-large');
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => {
      if (!over) resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks));
    });
    req.on('error', reject);
  });
}

/** The body as a JSON object, or undefined when it is anything else. */
export function jsonObject(body: Buffer): Record<string, unknown> | undefined {
  try {
    // ASCII (most bodies: JSON escapes what is not) decodes faster as latin1, to the same string.
    const value: unknown = JSON.parse(isAscii(body) ? body.toString('latin1') : body.toString('utf8'));
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** After refusing a request, drain a bounded amount of its body so the client can read the answer. */
export function discard(req: IncomingMessage): void {
  let drained = 0;
  req.on('data', (c: Buffer) => {
    drained += c.length;
    if (drained > MAX_DISCARD) req.destroy();
  });
  req.on('error', () => undefined);
  req.resume();
}

/** An error answer in the client's wire format (nothing when an answer has already started). */
export function sendError(res: ServerResponse, format: WireFormat, status: number, message: string, close = false): void {
  if (res.headersSent || res.destroyed) return;
  const body = errorBody(format, status, message);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...(close ? { connection: 'close' } : {}),
  });
  res.end(body);
}

/** Refuses a request before reading it: drains a bounded amount of its body so the client reads the answer. */
export function refuse(req: IncomingMessage, res: ServerResponse, format: WireFormat, status: number, message: string, close = false): void {
  discard(req);
  sendError(res, format, status, message, close);
}
