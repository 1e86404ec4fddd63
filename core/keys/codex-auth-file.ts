import { readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { readCodexKeyring } from './codex-keyring';
import { Secret } from './secret';

/** Codex's home on this machine: `$CODEX_HOME`, else `~/.codex`. */
export function codexHome(env: NodeJS.ProcessEnv): string {
  return env.CODEX_HOME?.trim() || path.join(os.homedir(), '.codex');
}

/** Where Codex keeps its sign-in as a file: `$CODEX_HOME/auth.json`, else `~/.codex/auth.json`. */
export function codexAuthPath(env: NodeJS.ProcessEnv): string {
  return path.join(codexHome(env), 'auth.json');
}

/**
 * Reads the host's Codex auth.json for import, as a Secret. Codex may keep its sign-in in the OS
 * keyring instead (`cli_auth_credentials_store`); `readCodexSignin` looks there too.
 */
export async function readCodexAuthFile(file: string): Promise<Secret> {
  try {
    const info = await stat(file);
    if (!info.isFile() || info.size > 65_536) throw new AirlockError('INVALID_INPUT', `${file} is not a Codex auth.json (not a small file)`, { field: 'from' });
    return new Secret(await readFile(file, 'utf8'));
  } catch (err) {
    if (err instanceof AirlockError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      throw new AirlockError('NOT_FOUND', `No Codex sign-in at ${file}. Sign in with \`codex login\` (ChatGPT) and import again, or give Airlock the content of an auth.json (Paste auth.json in Keys, or \`airlock keys import-codex --from FILE\`).`, { field: 'from' });
    }
    throw new AirlockError('INVALID_INPUT', `Could not read ${file} (${code ?? 'error'}); check its permissions, or give Airlock the content of the auth.json (Paste auth.json in Keys, or \`airlock keys import-codex --from FILE\`).`, { field: 'from' });
  }
}

/**
 * This machine's Codex sign-in, looked up where Codex itself keeps it (docs/architecture.md §6):
 * `$CODEX_HOME/auth.json` when that file exists, else the OS keyring entry Codex uses for that
 * CODEX_HOME (`cli_auth_credentials_store = "keyring"` or `"auto"`). NOT_FOUND names both places.
 */
export async function readCodexSignin(env: NodeJS.ProcessEnv, keyringService?: string): Promise<{ text: Secret; from: string }> {
  const file = codexAuthPath(env);
  const present = await stat(file).then(() => true, (err: NodeJS.ErrnoException) => err.code !== 'ENOENT');
  if (present) return { text: await readCodexAuthFile(file), from: file };
  const home = codexHome(env);
  let fromKeyring: Secret | undefined;
  try {
    fromKeyring = await readCodexKeyring(home, keyringService);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new AirlockError('NOT_FOUND', `No Codex sign-in at ${file}, and the OS keyring, where Codex may keep it instead, could not be read: ${why}`, { field: 'from', cause: err });
  }
  if (fromKeyring) return { text: fromKeyring, from: `the OS keyring (Codex's entry for ${home})` };
  throw new AirlockError('NOT_FOUND', `No Codex sign-in found: not in ${file}, and not in the OS keyring ("Codex Auth" entry for ${home}). Sign in with \`codex login\` (ChatGPT) on this machine and import again, or give Airlock the content of an auth.json (Paste auth.json in Keys, or \`airlock keys import-codex --from FILE\`).`, { field: 'from' });
}
