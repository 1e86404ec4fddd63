import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { KeyVault } from '../../core/keys/key-vault';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { ModelProxy, vaultResolver } from '../../core/proxy/model-proxy';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';

const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

/** A JWT-shaped token (the fake does not check signatures; neither does Codex). */
export function jwt(payload: Record<string, unknown>): string {
  return `${part({ alg: 'RS256', typ: 'JWT' })}.${part(payload)}.${randomBytes(24).toString('base64url')}`;
}

/** A unique secret-looking value, searched for afterwards wherever it must not be. */
export const canary = (label: string): string => `${label}-${randomBytes(20).toString('hex')}-CANARY`;

/** The real keychain (a service of the test's own), proxy and catalog, with both subscription providers aimed at the fake upstream. */
export interface SubscriptionRig {
  service: string;
  home: string;
  catalog: ProviderCatalog;
  vault: KeyVault;
  proxy: ModelProxy;
  up: FakeUpstream;
  /** The proxy's base URL. */
  base: string;
  /** Every credential the test made: none may appear in anything Airlock wrote under `home`. */
  secrets: string[];
  /** Forgets the fake upstream's requests, script, auth answers and expected key (before each test). */
  reset(): void;
  /** Removes the stored sign-ins, stops everything, checks `home` holds no secret, and deletes it. */
  close(): Promise<void>;
}

/**
 * Starts the set-up the subscription tests share (docs/architecture.md §6): the fake upstream plays
 * Anthropic, the ChatGPT backend (`/backend-api/codex`) and the OpenAI auth server.
 */
export async function startSubscriptionRig(name: string): Promise<SubscriptionRig> {
  const service = `airlock-test-${name}-${randomBytes(4).toString('hex')}`;
  const home = await mkdtemp(path.join(os.tmpdir(), `airlock-${name}-`));
  const up = await startFakeUpstream();
  const catalog = new ProviderCatalog({ home });
  await catalog.setBaseUrl('claude-subscription', up.url);
  await catalog.setBaseUrl('chatgpt-signin', `${up.url}/backend-api/codex`);
  await catalog.setAuthBaseUrl('chatgpt-signin', up.url);
  const vault = new KeyVault(catalog, { service });
  const proxy = new ModelProxy({ resolveUpstream: vaultResolver(catalog, vault) });
  const base = `http://127.0.0.1:${(await proxy.start()).port}`;
  const secrets: string[] = [];
  return {
    service, home, catalog, vault, proxy, up, base, secrets,
    reset() {
      up.requests.length = 0;
      up.setScript([]);
      up.setAuth(undefined);
      up.setExpectedKey(undefined);
    },
    async close() {
      await vault.remove('claude-subscription').catch(() => undefined);
      await vault.remove('chatgpt-signin').catch(() => undefined);
      vault.dispose();
      await proxy.stop();
      await up.close();
      // Nothing Airlock wrote holds a credential.
      for (const e of await readdir(home, { withFileTypes: true, recursive: true })) {
        if (!e.isFile()) continue;
        const text = await readFile(path.join(e.parentPath, e.name), 'utf8');
        for (const s of secrets) expect(text).not.toContain(s);
      }
      await rm(home, { recursive: true, force: true });
    },
  };
}
