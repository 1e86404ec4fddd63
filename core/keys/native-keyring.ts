import { createRequire } from 'node:module';
import type * as Keyring from '@napi-rs/keyring';
import { AirlockError } from '../../contracts/errors';

type KeyringModule = typeof Keyring;

let loaded: Promise<KeyringModule> | undefined;

/**
 * The OS keychain binding (@napi-rs/keyring), loaded on first use instead of at start-up: its native
 * part is a per-platform, per-architecture package, and an app packaged without the one for this
 * machine (a dmg or nsis built for both arm64 and x64 on a host of one of them) must still start and
 * say what is wrong, instead of dying with "Cannot find native binding" before a window opens.
 * `from` (tests): resolve the module as a file in that directory would.
 */
export function loadKeyring(from?: string): Promise<KeyringModule> {
  if (from) return load(() => createRequire(from)('@napi-rs/keyring') as KeyringModule);
  loaded ??= load(() => import('@napi-rs/keyring'));
  loaded.catch(() => {
    loaded = undefined;
  });
  return loaded;
}

async function load(get: () => KeyringModule | Promise<KeyringModule>): Promise<KeyringModule> {
  try {
    return await get();
  } catch (err) {
    const first = (err instanceof Error ? err.message : String(err)).split('\n')[0]?.slice(0, 160) ?? '';
    throw new AirlockError(
      'KEYCHAIN_UNAVAILABLE',
      `This copy of Airlock has no keychain module for ${process.platform}-${process.arch} (${first}). Install the Airlock download built for this computer (${process.arch}). Until then keys can be kept for this session only; keys already in the keychain stay there.`,
      { cause: err },
    );
  }
}
