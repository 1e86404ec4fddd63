import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';

/**
 * Absolute paths of host tools, found on `PATH` once per process and never in a relative `PATH`
 * entry ('' or '.', "the current folder"): a `git.exe`, `docker` or `npm.cmd` dropped into the
 * project folder — often the current folder of the CLI, and the `cwd` of some tool runs — is never
 * what runs (Windows looks in the current folder before `PATH`; an empty entry does so anywhere).
 */

const cache = new Map<string, Promise<string | undefined>>();

function candidates(name: string): string[] {
  if (process.platform !== 'win32' || path.extname(name)) return [name];
  return [`${name}.exe`, `${name}.cmd`, `${name}.bat`, name];
}

async function search(name: string, envPath: string): Promise<string | undefined> {
  for (const dir of envPath.split(path.delimiter)) {
    if (!dir || !path.isAbsolute(dir)) continue;
    for (const file of candidates(name)) {
      const full = path.join(dir, file);
      try {
        await access(full, process.platform === 'win32' ? constants.F_OK : constants.X_OK);
        return full;
      } catch {
        // next
      }
    }
  }
  return undefined;
}

/**
 * The absolute path of `name` on `PATH` (cached), or undefined when it is not installed. A name that
 * already is an absolute path (a configured binary) is returned as it is; a relative path with a
 * separator (`./tool`) is refused, since it would name a file of the current folder.
 */
export function findTool(name: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (path.isAbsolute(name)) return Promise.resolve(name);
  if (name.includes('/') || name.includes('\\')) return Promise.resolve(undefined);
  const envPath = env.PATH ?? env.Path ?? '';
  const key = `${name}\0${envPath}`;
  let found = cache.get(key);
  if (!found) {
    found = search(name, envPath);
    cache.set(key, found);
    // A tool installed later is found on the next call.
    void found.then((f) => {
      if (!f) cache.delete(key);
    });
  }
  return found;
}

/** Like `findTool`, but a missing tool is a typed error naming it. */
export async function resolveTool(name: string, env: NodeJS.ProcessEnv): Promise<string> {
  const found = await findTool(name, env);
  if (!found) throw new AirlockError('NOT_FOUND', `'${name}' was not found on PATH (relative PATH entries and the current folder are never searched).`);
  return found;
}
