import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { resourcePaths } from './resources';

/** Files of one prebuilt in-sandbox bundle (relative to its folder) and their SHA-256. */
export interface BuiltBundle {
  files: Record<string, Buffer>;
  hash: string;
}

/** sha256 over the file names and contents (part of the sandbox image tag). */
export function bundleHash(files: Record<string, Buffer>): string {
  const hash = createHash('sha256');
  for (const name of Object.keys(files).sort()) hash.update(name).update('\0').update(files[name]!).update('\0');
  return hash.digest('hex');
}

/**
 * Reads a bundle built at build time (`npm run build` → out/sandbox; the packaged app's
 * resources/sandbox/payload). Nothing is compiled at run time.
 */
export async function readBuiltBundle(what: string, subdir: string, names: string[], payloadDir = resourcePaths().payloadDir): Promise<BuiltBundle> {
  const dir = path.join(payloadDir, subdir);
  const files: Record<string, Buffer> = {};
  for (const name of names) {
    try {
      files[name] = await readFile(path.join(dir, name));
    } catch (err) {
      throw new AirlockError(
        'NOT_FOUND',
        `The ${what} is not built: ${path.join(dir, name)} is missing. In a source checkout run \`npm run build\`; otherwise reinstall Airlock.`,
        { cause: err },
      );
    }
  }
  return { files, hash: bundleHash(files) };
}
