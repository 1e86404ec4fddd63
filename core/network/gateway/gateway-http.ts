import type http from 'node:http';
import http2 from 'node:http2';
import { headersObject } from './upstream-client';

/**
 * The client-facing HTTP of the egress gateway, the same for HTTP/1.1 and HTTP/2 (docs/architecture.md
 * §2.8): what a request says (its headers with HTTP/2's `:authority` read as `Host`) and how an answer
 * is written in either protocol (HTTP/2 has no reason phrase and refuses connection headers).
 */

export type GatewayRequest = http.IncomingMessage | http2.Http2ServerRequest;
export type GatewayResponse = http.ServerResponse | http2.Http2ServerResponse;

/** The request's headers as a flat list; for HTTP/2, `:authority` becomes `Host` and other pseudo-headers go. */
export function requestRawHeaders(req: GatewayRequest): string[] {
  if (!(req instanceof http2.Http2ServerRequest)) return req.rawHeaders;
  const raw: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i] as string;
    if (name === ':authority') raw.push('Host', req.rawHeaders[i + 1] as string);
    else if (!name.startsWith(':')) raw.push(name, req.rawHeaders[i + 1] as string);
  }
  return raw;
}

/** The one Host header (or `:authority`), lower-cased; '' when there are several (never a match). */
export function hostHeaderOf(raw: readonly string[]): string | undefined {
  const values: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if ((raw[i] as string).toLowerCase() === 'host') values.push((raw[i + 1] as string).trim().toLowerCase());
  if (values.length === 0) return undefined;
  return values.length === 1 ? (values[0] as string).replace(/\.$/, '').replace(/\.:/, ':') : '';
}

/** `/p?a=1&b=2` → `/p?a=…&b=…`: names stay (they say what was asked), values go (they may be secrets). */
export function redactQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const parts = url
    .slice(q + 1)
    .split('&')
    .map((kv) => {
      const eq = kv.indexOf('=');
      return eq < 0 ? kv : `${kv.slice(0, eq)}=…`;
    });
  return `${url.slice(0, q)}?${parts.join('&')}`;
}

/** A flat header list without the named headers (any case). */
export function withoutHeaders(raw: readonly string[], ...names: string[]): string[] {
  const drop = new Set(names);
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (!drop.has((raw[i] as string).toLowerCase())) out.push(raw[i] as string, raw[i + 1] as string);
  return out;
}

/** Writes the status and end-to-end headers (a flat list) in the client's protocol. */
export function writeHead(res: GatewayResponse, status: number, statusMessage: string, raw: string[]): void {
  if (res instanceof http2.Http2ServerResponse) res.writeHead(status, headersObject(raw));
  else res.writeHead(status, statusMessage || undefined, raw);
}

/**
 * A short plain-text answer of the gateway's own (a denial, a failed upstream). HTTP/1.1 closes the
 * connection after it (the rest of a refused upload is not read); HTTP/2 resets only that stream.
 */
export function answerPlain(res: GatewayResponse, status: number, body: string, marker: string): void {
  const headers: Record<string, string | number> = { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-airlock-egress': marker };
  if (!(res instanceof http2.Http2ServerResponse)) headers.connection = 'close';
  res.writeHead(status, headers);
  res.end(body);
}
