import { readFile, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { Secret } from './secret';

/** Where Codex keeps its sign-in on this machine: `$CODEX_HOME/auth.json`, else `~/.codex/auth.json`. */
export function codexAuthPath(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.CODEX_HOME?.trim() || path.join(os.homedir(), '.codex');
  return path.join(home, 'auth.json');
}

/**
 * Reads the host's Codex auth.json for import, as a Secret. Codex may keep its sign-in in the OS
 * keyring instead (`cli_auth_credentials_store`); then there is no file and the message says so.
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
      throw new AirlockError('NOT_FOUND', `No Codex sign-in at ${file}. Sign in with \`codex login\` (ChatGPT, with cli_auth_credentials_store = "file") and import again, or give Airlock the content of an auth.json (Paste auth.json in Keys, or \`airlock keys import-codex --from FILE\`).`, { field: 'from' });
    }
    throw new AirlockError('INVALID_INPUT', `Could not read ${file} (${code ?? 'error'}); check its permissions, or give Airlock the content of the auth.json (Paste auth.json in Keys, or \`airlock keys import-codex --from FILE\`).`, { field: 'from' });
  }
}
