import http, { type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import type { ProviderConfig } from '../keys/provider-catalog';
import type { Secret } from '../keys/secret';
import { HOP_BY_HOP } from '../common/hop-headers';
import { REDACTED, StreamRedactor } from '../common/stream-redactor';
import { bodyLength, type BodyParts } from './json-body';

/** Keep-alive pools: a fresh TCP (and TLS) handshake per call would cost more than the whole proxy budget. */
const httpAgent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, scheduling: 'lifo' });
const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 256, scheduling: 'lifo' });

/** Hop-by-hop headers (RFC 9110 §7.6.1) plus every header a client could carry a credential in. */
const DROP_REQUEST = new Set([
  ...HOP_BY_HOP, 'host', 'content-length', 'accept-encoding', 'expect',
  'authorization', 'x-api-key', 'api-key', 'cookie', 'x-goog-api-key', 'openai-organization', 'openai-project',
  'chatgpt-account-id', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip', 'via',
]);

const DROP_RESPONSE = new Set([...HOP_BY_HOP, 'set-cookie']);

/** The upstream URL for an incoming `/v1/...` path (query string kept). */
export function upstreamUrl(provider: ProviderConfig, pathAndQuery: string): URL {
  // OpenAI-style base URLs already end in their version segment (…/v1, …/api/v1): drop ours.
  const rest = provider.kind === 'anthropic' ? pathAndQuery : pathAndQuery.replace(/^\/v1(?=[/?]|$)/, '');
  return new URL(provider.baseUrl.replace(/\/+$/, '') + rest);
}

/** Claude Code's marker for a subscription (OAuth) token; the API refuses such a token without it. */
export const OAUTH_BETA = 'oauth-2025-04-20';

/**
 * Copies the client's headers minus hop-by-hop and credential headers; sets the real key: `x-api-key`
 * for Anthropic, `Authorization: Bearer` for OpenAI and for subscription credentials (which also get
 * their vendor's headers: the OAuth beta for Claude, the account id for ChatGPT via `extra`).
 */
export function upstreamHeaders(provider: ProviderConfig, incoming: IncomingHttpHeaders, key: Secret | undefined, bodyLength: number | undefined, extra?: OutgoingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (value === undefined || DROP_REQUEST.has(name)) continue;
    out[name] = value;
  }
  // No compression: the proxy must see SSE events as they come and pass them on unchanged.
  out['accept-encoding'] = 'identity';
  if (bodyLength !== undefined) out['content-length'] = bodyLength;
  if (key) {
    if (provider.kind === 'anthropic' && !provider.credential) out['x-api-key'] = key.reveal();
    else out.authorization = `Bearer ${key.reveal()}`;
  }
  if (provider.credential === 'claude-subscription') {
    const betas = String(out['anthropic-beta'] ?? '').split(',').map((b) => b.trim()).filter(Boolean);
    if (!betas.includes(OAUTH_BETA)) out['anthropic-beta'] = [...betas, OAUTH_BETA].join(',');
  }
  if (extra) Object.assign(out, extra);
  return out;
}

/**
 * Response headers safe to hand back to the client, with any echo of `key` redacted. Content-length
 * is kept: drop it when the body is redacted too, since that can change its length.
 */
export function clientHeaders(upstream: IncomingHttpHeaders, key?: Secret): OutgoingHttpHeaders {
  const echoes = keyEchoes(key);
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value === undefined || DROP_RESPONSE.has(name)) continue;
    out[name] = !echoes.length ? value : typeof value === 'string' ? redactEchoes(value, echoes) : value.map((v) => redactEchoes(v, echoes));
  }
  return out;
}

export interface UpstreamCall {
  provider: ProviderConfig;
  key: Secret | undefined;
  method: string;
  pathAndQuery: string;
  headers: IncomingHttpHeaders;
  /** Whole, or in parts written one after another (a re-serialised body, json-body.ts). */
  body: Buffer | BodyParts | undefined;
  /** Headers the proxy sets itself (a sign-in's account id); they replace the client's. */
  extraHeaders?: OutgoingHttpHeaders;
  /** Called with the upstream response (headers received, body still streaming). */
  onResponse(res: IncomingMessage): void;
  /** Connection-level failure: refused, reset, DNS, TLS. Never includes the key. */
  onError(err: Error): void;
}

/** The request in flight; `abort()` when the client goes away. */
export interface UpstreamHandle {
  abort(): void;
}

/**
 * Sends one request to a provider. Shared by the proxy and "test connection", so a key that tests
 * ok works for runs. A reset on a reused keep-alive socket before any answer is retried once on a
 * fresh socket (the upstream closed an idle connection as we reused it).
 */
interface Target {
  secure: boolean;
  hostname: string;
  port: number;
  basePath: string;
}

/** Parsed base URLs, so the hot path does not parse a URL per call. */
const targets = new Map<string, Target>();

function targetOf(provider: ProviderConfig): Target {
  let t = targets.get(provider.baseUrl);
  if (!t) {
    const u = new URL(provider.baseUrl);
    const secure = u.protocol === 'https:';
    t = { secure, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port) || (secure ? 443 : 80), basePath: u.pathname.replace(/\/+$/, '') };
    if (targets.size > 1000) targets.clear();
    targets.set(provider.baseUrl, t);
  }
  return t;
}

export function sendUpstream(call: UpstreamCall): UpstreamHandle {
  const target = targetOf(call.provider);
  const rest = call.provider.kind === 'anthropic' ? call.pathAndQuery : call.pathAndQuery.replace(/^\/v1(?=[/?]|$)/, '');
  const headers = upstreamHeaders(call.provider, call.headers, call.key, (call.body ? bodyLength(call.body) : undefined) ?? (call.method === 'GET' || call.method === 'HEAD' ? undefined : 0), call.extraHeaders);
  headers.host = target.port === (target.secure ? 443 : 80) ? target.hostname : `${target.hostname}:${target.port}`;
  const secure = target.secure;
  let aborted = false;
  let current: http.ClientRequest | undefined;

  const attempt = (retry: boolean) => {
    const options: https.RequestOptions = { hostname: target.hostname, port: target.port, path: target.basePath + rest, method: call.method, headers, agent: secure ? httpsAgent : httpAgent };
    if (secure) options.servername = target.hostname;
    const req = (secure ? https : http).request(options);
    current = req;
    req.on('response', (res) => call.onResponse(res));
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (aborted) return;
      if (retry && req.reusedSocket && err.code === 'ECONNRESET') {
        attempt(false);
        return;
      }
      call.onError(err);
    });
    const body = call.body;
    if (body === undefined || Buffer.isBuffer(body)) {
      req.end(body);
    } else {
      // Corked: headers and every part leave in one writev, as one buffer would.
      req.cork();
      for (const part of body) req.write(part);
      req.end();
      req.uncork();
    }
  };
  attempt(true);
  return {
    abort() {
      aborted = true;
      current?.destroy();
    },
  };
}

/** What an echo of the key looks like: the key, and for a long key its distinctive head and tail. */
function keyEchoes(key: Secret | undefined): string[] {
  const k = key?.reveal() ?? '';
  // A very short "key" (a placeholder for a local server) would redact ordinary words.
  if (k.length < 8) return [];
  return k.length >= 24 ? [k, k.slice(0, 16), k.slice(-12)] : [k];
}

/** Replaces any echo of the key (whole, or its distinctive head/tail) in an upstream error body or header. */
export function redactKey(text: string, key: Secret | undefined): string {
  return redactEchoes(text, keyEchoes(key));
}

function redactEchoes(text: string, echoes: string[]): string {
  let out = text;
  for (const echo of echoes) if (out.includes(echo)) out = out.split(echo).join(REDACTED);
  return out;
}

/** A redactor of the key's echoes for one streamed upstream body; undefined when there is nothing to redact. */
export function keyRedactor(key: Secret | undefined): StreamRedactor | undefined {
  const echoes = keyEchoes(key);
  return echoes.length ? new StreamRedactor(echoes.map((e) => Buffer.from(e))) : undefined;
}
