import { realpath } from 'node:fs/promises';
import { keychainError } from './keychain-backend';
import { loadKeyring } from './native-keyring';
import { Secret } from './secret';
import { sha256Hex } from '../common/sha256';

/*
 * (docs/architecture.md §6 "Where the Codex import looks") Where Codex CLI keeps its sign-in when `cli_auth_credentials_store = "keyring"` (or "auto" with a
 * keyring present), read from its public source, openai/codex `codex-rs/core/src/auth/storage.rs`
 * (commits f793618e7b4d32961d4891b75550dcaced1f033b and 0786633811edd2d01dd664d893cd720adbdab215)
 * and `codex-rs/keyring-store/src/lib.rs` (commit dfc7c9ecf8688519c289d045b217f6cca29b76ed), through
 * the Rust `keyring` crate, the same one under @napi-rs/keyring (same Secret Service attributes):
 *   service `Codex Auth`; account `cli|<first 16 hex digits of SHA-256 of the canonical CODEX_HOME>`;
 *   value: the auth.json document as compact JSON (one entry). Some builds split a long value into
 *   chunks (`CODEX_CHUNKED:<n>:<part 1>`, then accounts `<account>:1`…), and a newer layout keeps each
 *   field in its own entry: `<account>|v2|active` names a revision, and `<account>|v2|<rev>|manifest`,
 *   `…|tokens.id_token`, `…|tokens.access_token`, `…|tokens.refresh_token`, `…|tokens.account_id` hold it.
 * Codex reads the v2 layout first and the single entry otherwise; so does this module.
 */

/** The keyring service Codex CLI stores its sign-in under. */
export const CODEX_KEYRING_SERVICE = 'Codex Auth';
const CHUNKED = 'CODEX_CHUNKED:';
const MAX_CHUNKS = 64;
const TIMEOUT_MS = 10_000;

/** The keyring account Codex uses for a CODEX_HOME (it hashes the canonical path). */
export async function codexKeyringAccount(codexHome: string): Promise<string> {
  const canonical = await realpath(codexHome).catch(() => codexHome);
  return `cli|${sha256Hex(canonical).slice(0, 16)}`;
}

/**
 * Reads Codex's sign-in for `codexHome` from the OS keyring as auth.json text (a Secret), or
 * undefined when Codex stored none there. Throws KEYCHAIN_UNAVAILABLE when the keyring cannot be used.
 */
export async function readCodexKeyring(codexHome: string, service = CODEX_KEYRING_SERVICE): Promise<Secret | undefined> {
  const base = await codexKeyringAccount(codexHome);
  const { AsyncEntry, findCredentialsAsync } = await loadKeyring();
  // Reading an entry succeeds silently without a Secret Service; listing fails loudly, so probe first.
  await findCredentialsAsync(service, null, AbortSignal.timeout(TIMEOUT_MS)).catch((err: unknown) => {
    throw keychainError(err);
  });
  const get = async (account: string): Promise<string | undefined> => {
    try {
      return (await new AsyncEntry(service, account).getPassword(AbortSignal.timeout(TIMEOUT_MS))) ?? undefined;
    } catch (err) {
      throw keychainError(err);
    }
  };
  const revision = await get(`${base}|v2|active`);
  if (revision) {
    const at = (field: string) => get(`${base}|v2|${revision}|${field}`);
    const manifest = parseObject(await at('manifest'));
    if (manifest?.has_tokens !== true) return undefined;
    const [idToken, accessToken, refreshToken, accountId] = await Promise.all([at('tokens.id_token'), at('tokens.access_token'), at('tokens.refresh_token'), at('tokens.account_id')]);
    const doc = {
      tokens: { id_token: idToken, access_token: accessToken, refresh_token: refreshToken, ...(accountId ? { account_id: accountId } : {}) },
      ...(typeof manifest.last_refresh === 'string' ? { last_refresh: manifest.last_refresh } : {}),
    };
    return new Secret(JSON.stringify(doc));
  }
  const value = await get(base);
  if (value === undefined) return undefined;
  if (!value.startsWith(CHUNKED)) return new Secret(value);
  const rest = value.slice(CHUNKED.length);
  const colon = rest.indexOf(':');
  const count = Number(rest.slice(0, colon));
  if (colon < 0 || !Number.isInteger(count) || count < 1 || count > MAX_CHUNKS) return new Secret(value);
  let whole = rest.slice(colon + 1);
  for (let i = 1; i < count; i++) whole += (await get(`${base}:${i}`)) ?? '';
  return new Secret(whole);
}

function parseObject(text: string | undefined): Record<string, unknown> | undefined {
  if (!text) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
