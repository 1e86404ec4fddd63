import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KeyBackend } from './keychain-backend';
import { KeyVault } from './key-vault';
import { ProviderCatalog } from './provider-catalog';

/** In memory: these tests are about the vault's rules, not the keychain (keys-vault.test.ts covers that). */
function memoryBackend(): KeyBackend & { entries: Map<string, string> } {
  const entries = new Map<string, string>();
  return {
    entries,
    get: async (a) => entries.get(a),
    set: async (a, v) => void entries.set(a, v),
    delete: async (a) => entries.delete(a),
    probe: async () => undefined,
  };
}

const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

describe('KeyVault: subscription credentials', () => {
  let home: string;
  let vault: KeyVault;
  let backend: ReturnType<typeof memoryBackend>;
  beforeEach(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-vault-subs-'));
    backend = memoryBackend();
    vault = new KeyVault(new ProviderCatalog({ home }), { backend });
  });
  afterEach(async () => {
    vault.dispose();
    await rm(home, { recursive: true, force: true });
  });

  it('refuses an API key under a subscription provider, naming the right command', async () => {
    await expect(vault.set('claude-subscription', 'sk-ant-oat01-abcdefghijklmnopqrstuvwxyz')).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringContaining('airlock keys set-subscription claude') });
    await expect(vault.set('chatgpt-signin', 'sk-proj-abcdefghijklmnop')).rejects.toMatchObject({ message: expect.stringContaining('airlock keys import-codex') });
    expect(backend.entries.size).toBe(0);
  });

  it('takes a subscription from the environment (--key-env): a setup token, or auth.json text', async () => {
    vault.useEnvKey('claude-subscription', 'CLAUDE_CODE_OAUTH_TOKEN', { CLAUDE_CODE_OAUTH_TOKEN: 'sk-ant-oat01-abcdefghijklmnopqrstuvwxyz' });
    expect(await vault.info('claude-subscription')).toMatchObject({ hasKey: true, storage: 'env', credential: 'claude-subscription' });
    const id = `${part({ alg: 'RS256' })}.${part({ 'https://api.openai.com/auth': { chatgpt_account_id: 'acct-env' } })}.sig`;
    vault.useEnvKey('chatgpt-signin', 'CODEX_AUTH', { CODEX_AUTH: JSON.stringify({ tokens: { id_token: id, access_token: 'at-env-1', refresh_token: 'rt-env-1' } }) });
    const found = await vault.chatgptSignin();
    expect(found?.storage).toBe('env');
    expect(found?.signin.reveal()).toMatchObject({ accessToken: 'at-env-1', refreshToken: 'rt-env-1', accountId: 'acct-env' });
    // A refresh keeps env-sourced tokens in memory, never in the keychain.
    await vault.updateChatgptSignin({ ...found!.signin.reveal(), accessToken: 'at-env-2' }, 'env');
    expect((await vault.chatgptSignin())?.signin.reveal().accessToken).toBe('at-env-2');
    expect(backend.entries.size).toBe(0);
    expect(() => vault.useEnvKey('chatgpt-signin', 'X', { X: 'not json' })).toThrow(/not valid JSON/);
  });
});
