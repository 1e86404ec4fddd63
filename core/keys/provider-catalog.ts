import path from 'node:path';
import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { ProviderId } from '../../contracts/ids';
import type { KeyStorage, ProviderKind } from '../../contracts/keys';
import { StoredFile } from '../common/stored-file';
import { parseStoredJson } from '../common/stored-json';
import type { CredentialKind } from './subscription-credentials';

/** A model provider as the proxy sees it: where to send requests and in which wire format. */
export interface ProviderConfig {
  id: string;
  label: string;
  kind: ProviderKind;
  /**
   * Upstream base URL. Anthropic: without `/v1` (`https://api.anthropic.com`). OpenAI and
   * OpenAI-compatible: including the version segment (`https://api.openai.com/v1`,
   * `http://127.0.0.1:11434/v1`), the way OPENAI_BASE_URL is written.
   */
  baseUrl: string;
  requiresKey: boolean;
  builtin: boolean;
  models: string[];
  /**
   * Side doors (provider-side tools, `mcp_servers`, `anthropic-beta:<value>`, `url_content`; see proxy/side-doors.ts)
   * the user allowed for this provider by name. Empty by default: the proxy strips them all.
   */
  allowSideDoors?: string[];
  /** A subscription credential instead of an API key: it serves only its vendor's client (§6). */
  credential?: CredentialKind;
  /** Where a ChatGPT sign-in is refreshed (`<authBaseUrl>/oauth/token`). */
  authBaseUrl?: string;
}

/** Non-secret facts about a stored key, kept in providers.json (the key itself is in the keychain). */
export interface KeyRecord {
  addedAt: string;
  storage: KeyStorage;
}

export const BUILTIN_PROVIDERS: readonly ProviderConfig[] = [
  {
    id: 'anthropic',
    label: 'Anthropic',
    kind: 'anthropic',
    baseUrl: 'https://api.anthropic.com',
    requiresKey: true,
    builtin: true,
    models: ['claude-sonnet-4-5', 'claude-opus-4-1', 'claude-haiku-4-5'],
  },
  {
    id: 'openai',
    label: 'OpenAI',
    kind: 'openai',
    baseUrl: 'https://api.openai.com/v1',
    requiresKey: true,
    builtin: true,
    models: ['gpt-5', 'gpt-5-mini', 'gpt-4.1'],
  },
  {
    id: 'claude-subscription',
    label: 'Claude subscription (Claude Code only)',
    kind: 'anthropic',
    baseUrl: 'https://api.anthropic.com',
    requiresKey: true,
    builtin: true,
    models: ['claude-sonnet-4-5', 'claude-opus-4-1', 'claude-haiku-4-5'],
    credential: 'claude-subscription',
  },
  {
    id: 'chatgpt-signin',
    label: 'ChatGPT sign-in (Codex CLI only)',
    kind: 'openai',
    // The ChatGPT backend Codex talks to when signed in; the proxy appends `/responses`.
    baseUrl: 'https://chatgpt.com/backend-api/codex',
    requiresKey: true,
    builtin: true,
    models: ['gpt-5', 'gpt-5-codex'],
    credential: 'chatgpt-signin',
    authBaseUrl: 'https://auth.openai.com',
  },
];

const CustomProvider = z.object({
  id: ProviderId,
  label: z.string(),
  kind: z.enum(['anthropic', 'openai', 'openai-compatible']),
  baseUrl: z.string(),
  requiresKey: z.boolean(),
  models: z.array(z.string()),
});

const CatalogFile = z.object({
  version: z.literal(1),
  custom: z.array(CustomProvider).default([]),
  /** Base URL overrides for the built-ins (enterprise gateways, tests). */
  baseUrls: z.record(z.string(), z.string()).default({}),
  keys: z.record(z.string(), z.object({ addedAt: z.string(), storage: z.enum(['keychain', 'session', 'env']) })).default({}),
  /** Per provider: side doors the user allowed by name (explicit; each use is in the run's audit log). */
  sideDoors: z.record(z.string(), z.array(z.string().min(1).max(200))).default({}),
  /** Auth endpoint overrides for sign-in credentials (enterprise proxies, tests). */
  authBaseUrls: z.record(z.string(), z.string()).default({}),
});
type CatalogFile = z.infer<typeof CatalogFile>;

/** Validates and normalises a base URL (http/https, no trailing slash, no credentials, no query). */
export function normalizeBaseUrl(raw: string, kind: ProviderKind): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new AirlockError('INVALID_INPUT', `'${raw}' is not a URL; give a base URL such as http://127.0.0.1:11434/v1`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new AirlockError('INVALID_INPUT', `base URL must start with http:// or https:// (got ${url.protocol})`);
  }
  if (url.username || url.password) {
    throw new AirlockError('INVALID_INPUT', 'put the key in the keychain (`airlock keys set`), not in the base URL');
  }
  if (url.search || url.hash) {
    throw new AirlockError('INVALID_INPUT', 'a base URL cannot have a query string or fragment');
  }
  let p = url.pathname.replace(/\/+$/, '');
  // The Anthropic SDK convention is a base URL without the version; the proxy appends /v1/….
  if (kind === 'anthropic') p = p.replace(/\/v1$/, '');
  return `${url.protocol}//${url.host}${p}`;
}

const CATALOG_FIX = 'fix or remove it (custom providers, base URLs and key labels are kept there; the keys themselves stay in the keychain).';
const emptyCatalog = (): CatalogFile => ({ version: 1, custom: [], baseUrls: {}, keys: {}, sideDoors: {}, authBaseUrls: {} });

/**
 * The providers Airlock knows: the built-ins and user-added OpenAI-compatible servers. Persisted
 * WITHOUT keys in `<airlockHome>/providers.json`.
 */
export class ProviderCatalog {
  private readonly stored: StoredFile<CatalogFile>;
  private cache: CatalogFile | undefined;

  constructor(opts: { home: string }) {
    // A damaged file is an error, never an empty catalog: the next save would overwrite the user's providers.
    this.stored = new StoredFile<CatalogFile>(path.join(opts.home, 'providers.json'), { parse: (file, text) => parseStoredJson(CatalogFile, file, text, CATALOG_FIX), empty: emptyCatalog });
  }

  private async load(): Promise<CatalogFile> {
    this.cache ??= await this.stored.read();
    return this.cache;
  }

  private async save(mutate: (data: CatalogFile) => void): Promise<void> {
    // Serialised with every other writer of this file, in this process and others (StoredFile):
    // two quick edits cannot lose one another.
    await this.stored.update((data) => {
      mutate(data);
      this.cache = data;
      return data;
    });
  }

  async list(): Promise<ProviderConfig[]> {
    const data = await this.load();
    const doors = (id: string) => (data.sideDoors[id]?.length ? { allowSideDoors: [...(data.sideDoors[id] as string[])] } : {});
    const auth = (p: ProviderConfig) => (p.authBaseUrl ? { authBaseUrl: data.authBaseUrls[p.id] ?? p.authBaseUrl } : {});
    const builtins = BUILTIN_PROVIDERS.map((p) => ({ ...p, models: [...p.models], baseUrl: data.baseUrls[p.id] ?? p.baseUrl, ...doors(p.id), ...auth(p) }));
    return [...builtins, ...data.custom.map((c) => ({ ...c, builtin: false, ...doors(c.id) }))];
  }

  /**
   * Sets the side doors the proxy lets through for a provider (names as in proxy/side-doors.ts,
   * e.g. `web_search`, `mcp_servers`, `anthropic-beta:<value>`, `url_content`); an empty list closes them all again.
   */
  async setAllowedSideDoors(id: string, names: string[]): Promise<void> {
    await this.get(id);
    const clean = [...new Set(names.map((n) => n.trim()).filter(Boolean))];
    await this.save((data) => {
      if (clean.length) data.sideDoors[id] = clean;
      else delete data.sideDoors[id];
    });
  }

  async find(id: string): Promise<ProviderConfig | undefined> {
    return (await this.list()).find((p) => p.id === id);
  }

  /** The provider, or PROVIDER_UNKNOWN naming the known ones. */
  async get(id: string): Promise<ProviderConfig> {
    const all = await this.list();
    const found = all.find((p) => p.id === id);
    if (!found) {
      throw new AirlockError('PROVIDER_UNKNOWN', `unknown provider '${id}'; known: ${all.map((p) => p.id).join(', ')}. Add one with \`airlock providers add ${id} --base-url URL\``);
    }
    return found;
  }

  /** Adds or updates a custom provider (OpenAI-compatible unless told otherwise). */
  async add(input: { id: string; baseUrl: string; label?: string; kind?: ProviderKind; requiresKey?: boolean; models?: string[] }): Promise<ProviderConfig> {
    const id = ProviderId.safeParse(input.id);
    if (!id.success) throw new AirlockError('INVALID_INPUT', `'${input.id}' is not a valid provider id: use lowercase letters, digits and dashes`);
    if (BUILTIN_PROVIDERS.some((p) => p.id === input.id)) {
      throw new AirlockError('CONFLICT', `'${input.id}' is built in; change its base URL with \`airlock keys set ${input.id} --base-url URL\``);
    }
    const kind = input.kind ?? 'openai-compatible';
    const entry = {
      id: input.id,
      label: input.label ?? input.id,
      kind,
      baseUrl: normalizeBaseUrl(input.baseUrl, kind),
      requiresKey: input.requiresKey ?? true,
      models: input.models ?? [],
    };
    await this.save((data) => {
      data.custom = [...data.custom.filter((c) => c.id !== entry.id), entry];
    });
    return { ...entry, builtin: false };
  }

  /** Removes a custom provider (and its key record); built-ins only lose their base URL override. */
  async remove(id: string): Promise<boolean> {
    const data = await this.load();
    const existed = data.custom.some((c) => c.id === id) || id in data.baseUrls;
    await this.save((d) => {
      d.custom = d.custom.filter((c) => c.id !== id);
      delete d.baseUrls[id];
      delete d.keys[id];
    });
    return existed;
  }

  /** Points a provider (built-in or custom) at another base URL. */
  async setBaseUrl(id: string, baseUrl: string): Promise<ProviderConfig> {
    const provider = await this.get(id);
    const normalized = normalizeBaseUrl(baseUrl, provider.kind);
    await this.save((data) => {
      if (provider.builtin) data.baseUrls[id] = normalized;
      else data.custom = data.custom.map((c) => (c.id === id ? { ...c, baseUrl: normalized } : c));
    });
    return { ...provider, baseUrl: normalized };
  }

  /** Points a sign-in credential's refresh at another auth server (`<url>/oauth/token`). */
  async setAuthBaseUrl(id: string, url: string): Promise<ProviderConfig> {
    const provider = await this.get(id);
    if (!provider.authBaseUrl) throw new AirlockError('INVALID_INPUT', `'${id}' has no sign-in to refresh; only chatgpt-signin has an auth URL`);
    const normalized = normalizeBaseUrl(url, 'openai');
    await this.save((data) => {
      data.authBaseUrls[id] = normalized;
    });
    return { ...provider, authBaseUrl: normalized };
  }

  async keyRecord(id: string): Promise<KeyRecord | undefined> {
    return (await this.load()).keys[id];
  }

  async setKeyRecord(id: string, record: KeyRecord | undefined): Promise<void> {
    await this.save((data) => {
      if (record) data.keys[id] = record;
      else delete data.keys[id];
    });
  }
}
