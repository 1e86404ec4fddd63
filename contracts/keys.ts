import { z } from 'zod';
import { ProviderId } from './ids';

/**
 * Keys and providers. The renderer only ever sees `KeyInfo` (docs/architecture.md §6): whether a key exists and
 * its last four characters — never the key itself. The only contract that carries a key is
 * `keys:set`, renderer → core.
 */

/** Where a key lives: the OS keychain, memory for this session only, or a host env variable (CLI). */
export const KeyStorage = z.enum(['keychain', 'session', 'env']);
export type KeyStorage = z.infer<typeof KeyStorage>;

/** What may be shown about a provider's key. */
export const KeyInfo = z.object({
  provider: ProviderId,
  hasKey: z.boolean(),
  /** Last four characters of the key, or null without a key. */
  last4: z.string().max(4).nullable(),
  /** The upstream base URL in use for this provider. */
  baseUrl: z.string().nullable(),
  /** ISO time the key was saved, when known. */
  addedAt: z.string().nullable(),
  storage: KeyStorage.optional(),
  /** A subscription credential instead of an API key; it serves only its vendor's client. */
  credential: z.enum(['claude-subscription', 'chatgpt-signin']).optional(),
  /** When a sign-in's access token expires (the proxy refreshes it). */
  expiresAt: z.string().optional(),
});
export type KeyInfo = z.infer<typeof KeyInfo>;

/** The wire format a provider speaks. */
export const ProviderKind = z.enum(['anthropic', 'openai', 'openai-compatible']);
export type ProviderKind = z.infer<typeof ProviderKind>;

export const ProviderInfo = z.object({
  id: ProviderId,
  label: z.string(),
  kind: ProviderKind,
  baseUrl: z.string(),
  /** Local servers (Ollama, LM Studio…) may need no key. */
  requiresKey: z.boolean(),
  /** Built-in providers (anthropic, openai) cannot be removed, only re-pointed. */
  builtin: z.boolean(),
  /** Suggested model ids for the new-run form. */
  models: z.array(z.string()),
  hasKey: z.boolean(),
  /** Set for subscription credentials; `agent` is the only agent they serve. */
  credential: z.object({ kind: z.enum(['claude-subscription', 'chatgpt-signin']), agent: z.string() }).optional(),
});
export type ProviderInfo = z.infer<typeof ProviderInfo>;

/** Whether keys can be stored persistently here. */
export const KeychainStatus = z.object({
  available: z.boolean(),
  /** Why not, and how to fix it, when unavailable. */
  message: z.string().optional(),
});
export type KeychainStatus = z.infer<typeof KeychainStatus>;

const HttpUrl = z.url({ protocol: /^https?$/, error: 'base URL must be an http(s) URL, e.g. http://127.0.0.1:11434/v1' });

export const SetKeyInput = z.strictObject({
  provider: ProviderId,
  /** The secret. Travels once, renderer → core; it is never sent back. */
  key: z.string().trim().min(8, 'that key looks too short; paste the whole key').max(4096),
  baseUrl: HttpUrl.optional(),
  /** `session` keeps the key in memory only (no keychain available, or by choice). */
  storage: z.enum(['keychain', 'session']).default('keychain'),
});

/** A provider's new upstream base URL (its key stays as it is). */
export const SetBaseUrlInput = z.strictObject({ provider: ProviderId, baseUrl: HttpUrl });

/** Result of "test connection". */
export const KeyTestResult = z.object({
  provider: ProviderId,
  status: z.enum(['ok', 'bad-key', 'unreachable', 'rate-limited', 'error']),
  message: z.string(),
  latencyMs: z.number().nonnegative().optional(),
});
export type KeyTestResult = z.infer<typeof KeyTestResult>;

export const AddProviderInput = z.strictObject({
  id: ProviderId,
  label: z.string().trim().min(1).max(80).optional(),
  kind: ProviderKind.default('openai-compatible'),
  baseUrl: HttpUrl,
  /** false for servers that need no key (Ollama, llama.cpp…). */
  requiresKey: z.boolean().default(true),
  /** Optional key to store with the provider, same rules as `keys:set`. */
  key: z.string().trim().min(1).max(4096).optional(),
  models: z.array(z.string().min(1).max(200)).max(100).default([]),
});

/** A subscription credential, renderer → core once: a Claude setup token, or the text of Codex's auth.json. */
export const SetSubscriptionInput = z.strictObject({
  kind: z.enum(['claude-subscription', 'chatgpt-signin']),
  /** The setup token or the auth.json text. Never sent back. */
  secret: z.string().trim().min(8, 'paste the whole token or auth.json').max(65_536),
  storage: z.enum(['keychain', 'session']).default('keychain'),
});

const ProviderRef = z.strictObject({ provider: ProviderId });
const Empty = z.strictObject({}).default({});

export const keysContracts = {
  /** Every provider's key status (never the key). */
  'keys:list': { input: Empty, output: z.array(KeyInfo) },
  /** Stores a provider's key in the keychain (or this session only). */
  'keys:set': { input: SetKeyInput, output: KeyInfo },
  /** Changes a provider's upstream base URL; the stored key is left as it is (never sent, never rewritten). */
  'keys:setBaseUrl': { input: SetBaseUrlInput, output: KeyInfo },
  /** Stores a subscription credential (serves only Claude Code / Codex CLI). */
  'keys:setSubscription': { input: SetSubscriptionInput, output: KeyInfo },
  /** Imports this machine's Codex sign-in: `$CODEX_HOME/auth.json` (default `~/.codex`), else Codex's OS keyring entry for that home. */
  'keys:importCodex': { input: z.strictObject({ storage: z.enum(['keychain', 'session']).default('keychain') }), output: KeyInfo },
  'keys:remove': { input: ProviderRef, output: z.object({ removed: z.boolean() }) },
  /** A cheap authenticated call through the proxy's code path. */
  'keys:test': { input: ProviderRef, output: KeyTestResult },
  'keys:status': { input: Empty, output: KeychainStatus },
  'providers:list': { input: Empty, output: z.array(ProviderInfo) },
  /** Adds (or updates) an OpenAI-compatible provider with its base URL and optional key. */
  'providers:add': { input: AddProviderInput, output: ProviderInfo },
  'providers:remove': { input: z.strictObject({ id: ProviderId }), output: z.object({ removed: z.boolean() }) },
} as const;

export const keysEvents = {
  /** A key or provider was added, changed or removed: refetch `keys:list` / `providers:list`. */
  'keys:onDidChange': z.object({ provider: ProviderId }),
} as const;
