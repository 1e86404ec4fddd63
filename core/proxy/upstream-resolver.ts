import type { ChatgptSession } from '../keys/chatgpt-session';
import type { KeyVault } from '../keys/key-vault';
import type { ProviderCatalog, ProviderConfig } from '../keys/provider-catalog';
import type { Secret } from '../keys/secret';

/** A provider ready to be called: where, in which format, with which key. */
export interface ResolvedUpstream {
  config: ProviderConfig;
  key?: Secret;
  /** A ChatGPT sign-in: its current access token replaces `key`, and it refreshes itself. */
  chatgpt?: ChatgptSession;
}

/** Looks up a provider's configuration and key (keychain, session or env), once per run. */
export type UpstreamResolver = (providerId: string) => Promise<ResolvedUpstream>;

/** The credential to present upstream now (a sign-in's token changes when it is refreshed). */
export function currentKey(resolved: ResolvedUpstream): Secret | undefined {
  return resolved.chatgpt?.accessToken ?? resolved.key;
}

/**
 * Builds a resolver over the catalog and the vault. A provider that needs no key gets none. A
 * ChatGPT sign-in becomes the vault's one session per stored sign-in, shared by runs, so a refresh happens once.
 */
export function vaultResolver(catalog: ProviderCatalog, vault: KeyVault): UpstreamResolver {
  return async (providerId) => {
    const config = await catalog.get(providerId);
    if (config.credential === 'chatgpt-signin') {
      // The vault's session: shared with "Test", so a refresh there is the one runs use too.
      const session = await vault.chatgptSession(providerId, config.authBaseUrl ?? '');
      return session ? { config, chatgpt: session } : { config };
    }
    if (config.credential) return { config, ...(await vault.resolve(providerId).then((k) => (k ? { key: k.secret } : {}))) };
    const key = config.requiresKey ? await vault.require(providerId) : (await vault.resolve(providerId))?.secret;
    return key ? { config, key } : { config };
  };
}
