import { readdir, realpath, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import type { FolderListing } from '../../contracts/projects';

/** More folders than this in one place are cut (the user can type the path). */
const MAX_FOLDERS = 1000;

function isInside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/**
 * The folder browser behind `projects:listFolders` (docs/architecture.md §5): names of the folders
 * in one folder under the user's home, as real paths, so a symlink cannot lead the browser out.
 * Nothing but folder names is read: no files, no contents, no hidden folders.
 */
export async function listFolders(requested: string | undefined, home = os.homedir()): Promise<FolderListing> {
  const realHome = await realpath(home);
  const wanted = requested?.trim() ? path.resolve(realHome, requested.trim()) : realHome;
  const real = await realpath(wanted).catch(() => {
    throw new AirlockError('NOT_FOUND', `${wanted} does not exist; choose another folder.`, { field: 'projectDir' });
  });
  if (!isInside(realHome, real)) {
    throw new AirlockError('FORBIDDEN', `Only folders inside your home folder (${realHome}) can be browsed here; type the path of a folder elsewhere.`, { field: 'projectDir' });
  }
  if (!(await stat(real)).isDirectory()) throw new AirlockError('INVALID_INPUT', `${real} is not a folder.`, { field: 'projectDir' });
  const entries = await readdir(real, { withFileTypes: true }).catch(() => {
    throw new AirlockError('FORBIDDEN', `Airlock may not read ${real}; choose another folder.`, { field: 'projectDir' });
  });
  const folders = entries
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => e.name)
    .sort((a, b) => a.localeCompare(b));
  return {
    path: real,
    parent: real === realHome ? null : path.dirname(real),
    home: realHome,
    folders: folders.slice(0, MAX_FOLDERS),
    truncated: folders.length > MAX_FOLDERS,
  };
}

/** The project folders of the latest runs, newest first: `dir` moved to the front, at most 8. */
export function withRecentProject(recent: readonly string[] | undefined, dir: string): string[] {
  return [dir, ...(recent ?? []).filter((d) => d !== dir)].slice(0, 8);
}
