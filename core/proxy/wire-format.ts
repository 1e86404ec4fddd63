import type { ProviderKind } from '../../contracts/keys';

/** The two wire formats the proxy speaks toward clients. OpenAI-compatible servers speak `openai`. */
export type WireFormat = 'anthropic' | 'openai';

export function formatOfKind(kind: ProviderKind): WireFormat {
  return kind === 'anthropic' ? 'anthropic' : 'openai';
}

/** The only routes the proxy forwards; anything else is a 404 without touching an upstream. */
const routes: Record<string, { format: WireFormat | 'either'; method: string }> = {
  '/v1/messages': { format: 'anthropic', method: 'POST' },
  '/v1/messages/count_tokens': { format: 'anthropic', method: 'POST' },
  '/v1/chat/completions': { format: 'openai', method: 'POST' },
  '/v1/responses': { format: 'openai', method: 'POST' },
  '/v1/embeddings': { format: 'openai', method: 'POST' },
  '/v1/models': { format: 'either', method: 'GET' },
};

export type RouteMatch =
  | { ok: true; format: WireFormat; path: string }
  | { ok: false; status: 404 | 405; format: WireFormat; message: string };

/**
 * Matches a request path exactly (no normalisation, so `/v1/../x` or `%2e%2e` never match).
 * `/v1/models` exists in both formats: an `anthropic-version` header or `x-api-key` (the Anthropic
 * SDKs' markers) picks Anthropic, otherwise `fallback` decides.
 */
export function matchRoute(method: string, path: string, headers: Record<string, string | string[] | undefined>, fallback: WireFormat): RouteMatch {
  const route = Object.prototype.hasOwnProperty.call(routes, path) ? routes[path] : undefined;
  const guess: WireFormat = path.startsWith('/v1/messages') || headers['anthropic-version'] !== undefined ? 'anthropic' : 'openai';
  if (!route) return { ok: false, status: 404, format: guess, message: `Airlock's model proxy has no route ${method} ${path.slice(0, 200)}` };
  const format = route.format === 'either' ? (headers['anthropic-version'] !== undefined ? 'anthropic' : fallback) : route.format;
  if (method !== route.method) return { ok: false, status: 405, format, message: `${path} accepts ${route.method}, not ${method.slice(0, 20)}` };
  return { ok: true, format, path };
}

const anthropicTypes: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  502: 'api_error',
};

const openaiTypes: Record<number, [string, string | null]> = {
  400: ['invalid_request_error', null],
  401: ['invalid_request_error', 'invalid_api_key'],
  403: ['invalid_request_error', 'forbidden'],
  404: ['invalid_request_error', 'unknown_url'],
  405: ['invalid_request_error', 'method_not_allowed'],
  413: ['invalid_request_error', 'request_too_large'],
  429: ['insufficient_quota', 'budget_exceeded'],
  502: ['server_error', 'upstream_unreachable'],
};

/** An error body in the provider's own format, so SDKs surface `message` as usual. */
export function errorBody(format: WireFormat, status: number, message: string): string {
  if (format === 'anthropic') {
    return JSON.stringify({ type: 'error', error: { type: anthropicTypes[status] ?? 'api_error', message } });
  }
  const [type, code] = openaiTypes[status] ?? ['server_error', null];
  return JSON.stringify({ error: { message, type, param: null, code } });
}
