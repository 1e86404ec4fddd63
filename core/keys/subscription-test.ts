import { performance } from 'node:perf_hooks';
import { AirlockError } from '../../contracts/errors';
import type { KeyTestResult } from '../../contracts/keys';
import type { ChatgptSession } from './chatgpt-session';
import { redactKey, sendUpstream } from '../upstream/upstream-client';
import type { ProviderConfig } from './provider-catalog';
import type { Secret } from './secret';

const TIMEOUT_MS = 20_000;
/** Codex asks the ChatGPT backend for its models with its version; any released version will do. */
const CODEX_CLIENT_VERSION = '0.50.0';
/** Claude Code's own system line: the API serves a subscription token for Claude Code's requests. */
const CLAUDE_CODE_SYSTEM = "You are Claude Code, Anthropic's official CLI for Claude.";

type Answer = { status: number } | { unreachable: string };

/** One request through the proxy's upstream client (same headers, same credential placement). */
function call(provider: ProviderConfig, key: Secret, req: { method: string; pathAndQuery: string; headers: Record<string, string>; body?: unknown; extra?: Record<string, string> }): Promise<Answer> {
  const body = req.body === undefined ? undefined : Buffer.from(JSON.stringify(req.body));
  return new Promise((resolve) => {
    let settled = false;
    const settle = (a: Answer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      handle.abort();
      resolve(a);
    };
    const handle = sendUpstream({
      provider,
      key,
      method: req.method,
      pathAndQuery: req.pathAndQuery,
      headers: { accept: 'application/json', ...(body ? { 'content-type': 'application/json' } : {}), ...req.headers },
      body,
      ...(req.extra ? { extraHeaders: req.extra } : {}),
      onError: (err) => settle({ unreachable: `could not reach ${provider.baseUrl} (${(err as NodeJS.ErrnoException).code ?? err.message})` }),
      onResponse: (res) => {
        res.resume();
        settle({ status: res.statusCode ?? 0 });
      },
    });
    const timer = setTimeout(() => settle({ unreachable: `${provider.baseUrl} did not answer within ${TIMEOUT_MS / 1000} s` }), TIMEOUT_MS);
  });
}

/** Plain words for an answer; a refusal says how to replace the credential. */
function verdict(provider: ProviderConfig, vendor: string, what: string, replace: string, answer: Answer, key: Secret | undefined, started: number): KeyTestResult {
  const done = (status: KeyTestResult['status'], message: string): KeyTestResult => ({ provider: provider.id, status, message: redactKey(message, key), latencyMs: Math.round(performance.now() - started) });
  if ('unreachable' in answer) return done('unreachable', `${answer.unreachable}; check your connection (and the base URL), then test again`);
  const s = answer.status;
  if (s >= 200 && s < 300) return done('ok', `the ${what} works (${vendor} accepted it)`);
  if (s === 401 || s === 403) return done('bad-key', `the ${what} was refused (HTTP ${s}); replace it: ${replace}`);
  if (s === 429) return done('rate-limited', `the ${what} is valid but rate-limited or out of quota right now (HTTP 429)`);
  return done('error', `${provider.label} answered HTTP ${s}; the ${what} could not be checked, try again later`);
}

/**
 * "Test" for a Claude subscription token (docs/architecture.md §6 "Test"): the smallest Messages call, sent
 * the way the proxy sends it (`Authorization: Bearer`, the OAuth beta, no `x-api-key`).
 */
export async function testClaudeSubscription(provider: ProviderConfig, token: Secret): Promise<KeyTestResult> {
  const started = performance.now();
  const model = provider.models.find((m) => m.includes('haiku')) ?? provider.models[0] ?? 'claude-haiku-4-5';
  const answer = await call(provider, token, {
    method: 'POST',
    pathAndQuery: '/v1/messages',
    headers: { 'anthropic-version': '2023-06-01' },
    body: { model, max_tokens: 1, system: CLAUDE_CODE_SYSTEM, messages: [{ role: 'user', content: 'ping' }] },
  });
  return verdict(provider, 'Anthropic', 'Claude subscription token', 'store a new token from `claude setup-token`', answer, token, started);
}

/**
 * "Test" for a ChatGPT sign-in: refreshes first when the access token is near expiry (the proxy's
 * own session, so new tokens are stored and shared), then `GET <backend>/models` with the Bearer
 * token and `chatgpt-account-id`; a 401 refreshes once and asks again, as the proxy does.
 */
export async function testChatgptSignin(provider: ProviderConfig, session: ChatgptSession): Promise<KeyTestResult> {
  const started = performance.now();
  const what = 'ChatGPT sign-in';
  const replace = 'sign in again with `codex login` on this machine, then import the sign-in again';
  const refreshFailed = (err: unknown): KeyTestResult => {
    const refused = err instanceof AirlockError && err.kind === 'UNAUTHORIZED';
    const message = refused ? `the ${what} was refused: ChatGPT would not refresh it; replace it: ${replace}` : `could not refresh the ${what} (${err instanceof Error ? err.message : String(err)})`;
    return { provider: provider.id, status: refused ? 'bad-key' : 'unreachable', message, latencyMs: Math.round(performance.now() - started) };
  };
  if (session.expiresSoon()) {
    try {
      await session.refresh();
    } catch (err) {
      return refreshFailed(err);
    }
  }
  const ask = (token: Secret) => call(provider, token, { method: 'GET', pathAndQuery: `/v1/models?client_version=${CODEX_CLIENT_VERSION}`, headers: {}, extra: { 'chatgpt-account-id': session.accountId } });
  let token = session.accessToken;
  let answer = await ask(token);
  if ('status' in answer && answer.status === 401) {
    try {
      await session.refresh(token);
    } catch (err) {
      return refreshFailed(err);
    }
    token = session.accessToken;
    answer = await ask(token);
  }
  return verdict(provider, 'ChatGPT', what, replace, answer, token, started);
}
