import { performance } from 'node:perf_hooks';
import type { KeyTestResult } from '../../contracts/keys';
import { redactKey, sendUpstream } from '../upstream/upstream-client';
import type { ProviderConfig } from './provider-catalog';
import type { Secret } from './secret';

const TIMEOUT_MS = 15_000;

/**
 * What to tell a person when a provider's server did not answer: the same words from Test
 * connection, a failed run, the CLI and the setup check.
 */
export function unreachableMessage(baseUrl: string, code: string): string {
  return `could not reach ${baseUrl} (${code}); check the base URL and that the server is running`;
}

/**
 * "Test connection": a cheap authenticated call (`GET /v1/models`) through the proxy's own upstream
 * client, so a key that tests ok is a key the proxy can use. Never includes the key in the result.
 */
export function testConnection(provider: ProviderConfig, key: Secret | undefined): Promise<KeyTestResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    let settled = false;
    const settle = (status: KeyTestResult['status'], message: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      handle.abort();
      resolve({ provider: provider.id, status, message: redactKey(message, key), latencyMs: Math.round(performance.now() - started) });
    };
    const headers: Record<string, string> = { accept: 'application/json' };
    if (provider.kind === 'anthropic') headers['anthropic-version'] = '2023-06-01';
    const handle = sendUpstream({
      provider,
      key,
      method: 'GET',
      pathAndQuery: '/v1/models',
      headers,
      body: undefined,
      onError: (err) => {
        const code = (err as NodeJS.ErrnoException).code ?? err.message;
        settle('unreachable', unreachableMessage(provider.baseUrl, code));
      },
      onResponse: (res) => {
        res.resume();
        const status = res.statusCode ?? 0;
        if (status >= 200 && status < 300) settle('ok', `connected to ${provider.label}; the key works`);
        else if (status === 401 || status === 403) settle('bad-key', `${provider.label} refused your ${provider.id} key (HTTP ${status}); replace it with a valid one and test again`);
        else if (status === 429) settle('rate-limited', `${provider.label} answered 429: the key works but is rate-limited or out of quota right now`);
        else settle('error', `${provider.label} answered HTTP ${status} to GET /v1/models`);
      },
    });
    const timer = setTimeout(() => settle('unreachable', `${provider.baseUrl} did not answer within ${TIMEOUT_MS / 1000} s`), TIMEOUT_MS);
  });
}
