import { AirlockError } from '../../contracts/errors';
import { loadKeyring } from './native-keyring';

/** Where keys persist. The OS keychain in production; tests may pass another service name. */
export interface KeyBackend {
  get(account: string): Promise<string | undefined>;
  set(account: string, value: string): Promise<void>;
  delete(account: string): Promise<boolean>;
  /** Throws KEYCHAIN_UNAVAILABLE (with how to fix it) when the store cannot be used. */
  probe(): Promise<void>;
}

/** A keychain that does not answer (a prompt no one can see) must not hang the app. */
const TIMEOUT_MS = 10_000;

function howToFix(): string {
  switch (process.platform) {
    case 'darwin':
      return 'Unlock the login keychain (Keychain Access) and try again';
    case 'win32':
      return 'Make sure the Windows Credential Manager service is running';
    default:
      return 'Start a Secret Service and unlock it: log in to a desktop session with GNOME Keyring or KWallet, or on a headless machine run `dbus-run-session -- sh` then `gnome-keyring-daemon --unlock --components=secrets`';
  }
}

/** Maps the binding's errors to KEYCHAIN_UNAVAILABLE. Binding messages never contain the secret. */
export function keychainError(err: unknown): AirlockError {
  const raw = err instanceof Error ? err.message : String(err);
  const first = raw.split('\n')[0]?.trim() ?? '';
  let why = 'the OS keychain could not be used';
  if (/no secret service|dbus session/i.test(raw)) why = 'no OS keychain is running (no Secret Service on the D-Bus session)';
  else if (/AccessDenied/i.test(raw)) why = 'the OS keychain is not reachable (no D-Bus session, or access denied)';
  else if (/prompt was dismissed|locked/i.test(raw)) why = 'the OS keychain is locked';
  else if (/abort|timed? ?out/i.test(raw)) why = 'the OS keychain did not answer (it may be waiting for an unlock prompt)';
  return new AirlockError(
    'KEYCHAIN_UNAVAILABLE',
    `${why} (${first.slice(0, 160)}). ${howToFix()}. Or keep the key for this session only (\`--session\`, or "This session only" in the app); Airlock never writes keys to a plain file.`,
    { cause: err },
  );
}

async function guarded<T>(op: (signal: AbortSignal) => Promise<T>): Promise<T> {
  try {
    return await op(AbortSignal.timeout(TIMEOUT_MS));
  } catch (err) {
    throw keychainError(err);
  }
}

/**
 * Where a store's secrets live: the OS keychain under the context's service (`AppContext.keychainService`),
 * or, in a test, another backend. Never a default service: a store cannot open another keychain.
 */
export type KeychainAccess = { service: string } | { backend: KeyBackend };

/** The backend of a `KeychainAccess`. */
export function keyBackendOf(access: KeychainAccess): KeyBackend {
  return 'backend' in access ? access.backend : new OsKeychainBackend(access.service);
}

/** One keychain entry per provider under the service given (the context's: `airlock` unless `AIRLOCK_KEYCHAIN_SERVICE` names another; keytar-compatible layout). */
export class OsKeychainBackend implements KeyBackend {
  constructor(private readonly service: string) {}

  async probe(): Promise<void> {
    // Reading an entry succeeds silently without a Secret Service; listing fails loudly, so probe with it.
    const { findCredentialsAsync } = await loadKeyring();
    await guarded((signal) => findCredentialsAsync(this.service, null, signal));
  }

  async get(account: string): Promise<string | undefined> {
    await this.probe();
    const { AsyncEntry } = await loadKeyring();
    const value = await guarded((signal) => new AsyncEntry(this.service, account).getPassword(signal));
    return value ?? undefined;
  }

  async set(account: string, value: string): Promise<void> {
    const { AsyncEntry } = await loadKeyring();
    await guarded((signal) => new AsyncEntry(this.service, account).setPassword(value, signal));
  }

  async delete(account: string): Promise<boolean> {
    await this.probe();
    const { AsyncEntry } = await loadKeyring();
    return guarded((signal) => new AsyncEntry(this.service, account).deleteCredential(signal));
  }
}
