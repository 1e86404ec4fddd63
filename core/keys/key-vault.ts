import { AirlockError } from '../../contracts/errors';
import type { KeychainStatus, KeyInfo, KeyStorage, KeyTestResult } from '../../contracts/keys';
import { Emitter, type Event } from '../common/disposable';
import { ChatgptSession } from './chatgpt-session';
import { testConnection } from './connection-test';
import { checkKeyFormat } from './key-format';
import { keyBackendOf, type KeyBackend, type KeychainAccess } from './keychain-backend';
import type { ProviderCatalog } from './provider-catalog';
import { Secret } from './secret';
import { testChatgptSignin, testClaudeSubscription } from './subscription-test';
import { deserializeSignin, parseClaudeSetupToken, parseCodexAuthJson, serializeSignin, storeCommand, type ChatgptSignin } from './subscription-credentials';

/** A key ready for use, and where it came from. */
export interface ResolvedKey {
  secret: Secret;
  storage: KeyStorage;
}

/**
 * Provider keys: persisted in the OS keychain (service `airlock`, one entry per provider), or held in
 * memory for this session only (an explicit choice, e.g. when no keychain exists), or taken from a
 * named host environment variable (headless CLI, `--key-env VAR`). Never a plaintext file.
 * Keys leave this class only as `Secret`; what is shown is `KeyInfo` (hasKey, last4, …).
 */
export class KeyVault {
  private readonly backend: KeyBackend;
  private readonly session = new Map<string, { secret: Secret; addedAt: string }>();
  private readonly fromEnv = new Map<string, { secret: Secret; addedAt: string }>();
  private readonly didChange = new Emitter<{ provider: string }>();
  /** One live session per stored ChatGPT sign-in, shared by the proxy and "Test": one refresh serves all. */
  private readonly chatgptSessions = new Map<string, ChatgptSession>();
  /** Fires when a key is set or removed (for `keys:onDidChange`). */
  readonly onDidChange: Event<{ provider: string }> = this.didChange.event;

  constructor(
    private readonly catalog: ProviderCatalog,
    access: KeychainAccess,
  ) {
    this.backend = keyBackendOf(access);
  }

  /** Whether keys can be stored persistently; the message says how to fix it when not. */
  async status(): Promise<KeychainStatus> {
    try {
      await this.backend.probe();
      return { available: true };
    } catch (err) {
      return { available: false, message: err instanceof Error ? err.message : String(err) };
    }
  }

  /** Stores a provider's key (keychain by default, or `session` for memory only). */
  async set(provider: string, key: string | Secret, opts: { storage?: 'keychain' | 'session'; baseUrl?: string } = {}): Promise<KeyInfo> {
    const config = await this.catalog.get(provider);
    if (config.credential) {
      throw new AirlockError('INVALID_INPUT', `'${provider}' holds a subscription sign-in, not an API key; store it with \`${storeCommand(provider, config.credential)}\` or under Settings → Keys.`, { field: 'key' });
    }
    const secret = key instanceof Secret ? key : new Secret(key);
    const value = secret.reveal().trim();
    if (value.length < 8 || /[\s\u0000-\u001f]/.test(value)) {
      throw new AirlockError('INVALID_INPUT', 'that does not look like an API key (too short, or it contains spaces/control characters); paste the whole key', { field: 'key' });
    }
    checkKeyFormat(config, opts.baseUrl ?? config.baseUrl, value);
    if (opts.baseUrl) await this.catalog.setBaseUrl(provider, opts.baseUrl);
    return this.store(provider, value, opts.storage ?? 'keychain');
  }

  /** Stores a Claude Pro/Max setup token (`claude setup-token`) as the `claude-subscription` credential. */
  async setClaudeSubscription(token: string | Secret, opts: { storage?: 'keychain' | 'session' } = {}): Promise<KeyInfo> {
    const value = parseClaudeSetupToken(token instanceof Secret ? token.reveal() : token);
    return this.store('claude-subscription', value, opts.storage ?? 'keychain');
  }

  /** Imports a ChatGPT sign-in from the text of Codex's auth.json as the `chatgpt-signin` credential. */
  async importChatgptSignin(authJson: string | Secret, opts: { storage?: 'keychain' | 'session' } = {}): Promise<KeyInfo> {
    const signin = parseCodexAuthJson(authJson instanceof Secret ? authJson.reveal() : authJson);
    return this.store('chatgpt-signin', serializeSignin(signin), opts.storage ?? 'keychain');
  }

  /** The stored ChatGPT sign-in and where it lives, or undefined without one. */
  async chatgptSignin(provider = 'chatgpt-signin'): Promise<{ signin: Secret<ChatgptSignin>; storage: KeyStorage } | undefined> {
    const found = await this.resolve(provider);
    return found ? { signin: new Secret(deserializeSignin(found.secret.reveal())), storage: found.storage } : undefined;
  }

  /**
   * The session for the stored ChatGPT sign-in (undefined without one). It is replaced when the
   * stored sign-in changed under it (re-imported), so a refresh never uses a spent refresh token.
   */
  async chatgptSession(provider: string, authBaseUrl: string): Promise<ChatgptSession | undefined> {
    const stored = await this.chatgptSignin(provider);
    if (!stored) return undefined;
    let session = this.chatgptSessions.get(provider);
    if (!session?.holds(stored.signin)) {
      session = new ChatgptSession(stored.signin, { authBaseUrl, persist: (next) => this.updateChatgptSignin(next, stored.storage, provider) });
      this.chatgptSessions.set(provider, session);
    }
    return session;
  }

  /** Replaces a refreshed ChatGPT sign-in where it was kept (keychain or this session). */
  async updateChatgptSignin(signin: ChatgptSignin, storage: KeyStorage, provider = 'chatgpt-signin'): Promise<void> {
    const value = serializeSignin(signin);
    if (storage === 'keychain') await this.backend.set(provider, value);
    else (storage === 'env' ? this.fromEnv : this.session).set(provider, { secret: new Secret(value), addedAt: new Date().toISOString() });
    this.didChange.fire({ provider });
  }

  private async store(provider: string, value: string, storage: 'keychain' | 'session'): Promise<KeyInfo> {
    const addedAt = new Date().toISOString();
    if (storage === 'keychain') {
      await this.backend.set(provider, value);
      this.session.delete(provider);
    } else {
      this.session.set(provider, { secret: new Secret(value), addedAt });
    }
    // Only persisted keys get a record; a session key leaves no trace on disk.
    if (storage === 'keychain') await this.catalog.setKeyRecord(provider, { addedAt, storage });
    this.didChange.fire({ provider });
    return this.info(provider);
  }

  /**
   * Points a provider at another upstream (a gateway, a local server) and keeps its key as it is:
   * nothing is written to the keychain; the answer is the usual `KeyInfo` (last 4 only).
   */
  async setBaseUrl(provider: string, baseUrl: string): Promise<KeyInfo> {
    await this.catalog.setBaseUrl(provider, baseUrl);
    this.didChange.fire({ provider });
    return this.info(provider);
  }

  /**
   * Takes a provider's key from a host environment variable for this process (headless use).
   * It is then used exactly like a keychain key and, like one, never reaches a sandbox.
   */
  useEnvKey(provider: string, variable: string, env: NodeJS.ProcessEnv): void {
    const value = env[variable]?.trim();
    if (!value) {
      throw new AirlockError('KEY_MISSING', `environment variable ${variable} is empty or not set; export it with the ${provider} key, or store the key with \`airlock keys set ${provider}\``);
    }
    // A subscription from the environment: a setup token (e.g. CLAUDE_CODE_OAUTH_TOKEN), or auth.json text.
    const stored = provider === 'claude-subscription' ? parseClaudeSetupToken(value) : provider === 'chatgpt-signin' ? serializeSignin(parseCodexAuthJson(value)) : value;
    this.fromEnv.set(provider, { secret: new Secret(stored), addedAt: new Date().toISOString() });
    this.didChange.fire({ provider });
  }

  /** The key to use for a provider: env (explicit) > this session > keychain. */
  async resolve(provider: string): Promise<ResolvedKey | undefined> {
    const env = this.fromEnv.get(provider);
    if (env) return { secret: env.secret, storage: 'env' };
    const mem = this.session.get(provider);
    if (mem) return { secret: mem.secret, storage: 'session' };
    const stored = await this.backend.get(provider);
    return stored ? { secret: new Secret(stored), storage: 'keychain' } : undefined;
  }

  /** The key, or KEY_MISSING saying how to add one. */
  async require(provider: string): Promise<Secret> {
    const found = await this.resolve(provider);
    if (!found) {
      throw new AirlockError('KEY_MISSING', `no key stored for '${provider}'; add one with \`airlock keys set ${provider}\` (reads the key from stdin) or in Settings → Keys`);
    }
    return found.secret;
  }

  async remove(provider: string): Promise<boolean> {
    const hadSession = this.session.delete(provider);
    const hadEnv = this.fromEnv.delete(provider);
    let hadKeychain = false;
    try {
      hadKeychain = await this.backend.delete(provider);
    } catch (err) {
      if (!hadSession && !hadEnv) throw err;
    }
    await this.catalog.setKeyRecord(provider, undefined);
    this.didChange.fire({ provider });
    return hadSession || hadEnv || hadKeychain;
  }

  /** What may be shown about one provider's key. */
  async info(provider: string): Promise<KeyInfo> {
    const config = await this.catalog.get(provider);
    const key = await this.resolveForDisplay(provider);
    const record = await this.catalog.keyRecord(provider);
    const memAddedAt = this.fromEnv.get(provider)?.addedAt ?? this.session.get(provider)?.addedAt;
    // A sign-in shows when it expires, never a hint of its tokens.
    const signin = key && config.credential === 'chatgpt-signin' ? safeSignin(key.secret) : undefined;
    return {
      provider,
      hasKey: key !== undefined,
      last4: key && config.credential !== 'chatgpt-signin' ? key.secret.last4() || null : null,
      ...(config.credential ? { credential: config.credential } : {}),
      ...(signin?.expiresAt ? { expiresAt: signin.expiresAt } : {}),
      baseUrl: config.baseUrl,
      addedAt: key ? (key.storage === 'keychain' ? (record?.addedAt ?? null) : (memAddedAt ?? null)) : null,
      ...(key ? { storage: key.storage } : {}),
    };
  }

  /** Every known provider's key status. Without a keychain, persisted keys show as absent. */
  async list(): Promise<KeyInfo[]> {
    const providers = await this.catalog.list();
    return Promise.all(providers.map((p) => this.info(p.id)));
  }

  private async resolveForDisplay(provider: string): Promise<ResolvedKey | undefined> {
    try {
      return await this.resolve(provider);
    } catch (err) {
      if (err instanceof AirlockError && err.kind === 'KEYCHAIN_UNAVAILABLE') return undefined;
      throw err;
    }
  }

  /**
   * "Test connection": ok / bad-key / unreachable / rate-limited, through the proxy's upstream client.
   * A subscription credential gets its own check (subscription-test.ts, docs/architecture.md §6).
   */
  async test(provider: string): Promise<KeyTestResult> {
    const config = await this.catalog.get(provider);
    if (config.credential === 'chatgpt-signin') {
      const session = await this.chatgptSession(provider, config.authBaseUrl ?? '');
      if (!session) return { provider, status: 'bad-key', message: `no ChatGPT sign-in stored for '${provider}'; import one first (${storeCommand(provider, config.credential)})` };
      return testChatgptSignin(config, session);
    }
    if (config.credential === 'claude-subscription') {
      const token = await this.resolve(provider);
      if (!token) return { provider, status: 'bad-key', message: `no Claude subscription token stored for '${provider}'; add one first (${storeCommand(provider, config.credential)})` };
      return testClaudeSubscription(config, token.secret);
    }
    const key = await this.resolve(provider);
    if (!key && config.requiresKey) {
      return { provider, status: 'bad-key', message: `no key stored for '${provider}'; add one first` };
    }
    return testConnection(config, key?.secret);
  }

  dispose(): void {
    this.session.clear();
    this.fromEnv.clear();
    this.chatgptSessions.clear();
    this.didChange.dispose();
  }
}

function safeSignin(secret: Secret): ChatgptSignin | undefined {
  try {
    return deserializeSignin(secret.reveal());
  } catch {
    return undefined;
  }
}
