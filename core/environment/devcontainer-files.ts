import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * Where a project keeps its devcontainer configurations (the spec's search order,
 * docs/architecture.md §16): `.devcontainer/devcontainer.json`, `.devcontainer.json`, then one
 * `.devcontainer/<name>/devcontainer.json` per named configuration. Paths are relative to the
 * project, forward-slashed, in that order.
 */
export async function findDevcontainerConfigs(projectDir: string): Promise<string[]> {
  const found: string[] = [];
  if (await isFile(path.join(projectDir, '.devcontainer', 'devcontainer.json'))) found.push('.devcontainer/devcontainer.json');
  if (await isFile(path.join(projectDir, '.devcontainer.json'))) found.push('.devcontainer.json');
  let entries: string[] = [];
  try {
    entries = (await readdir(path.join(projectDir, '.devcontainer'), { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name);
  } catch {
    // No .devcontainer folder.
  }
  for (const name of entries.sort()) {
    if (await isFile(path.join(projectDir, '.devcontainer', name, 'devcontainer.json'))) found.push(`.devcontainer/${name}/devcontainer.json`);
  }
  return found;
}

async function isFile(p: string): Promise<boolean> {
  try {
    return (await stat(p)).isFile();
  } catch {
    return false;
  }
}

/**
 * A configuration named by the user (`devcontainer:<path>`): a path to the file or to its folder,
 * relative to the project, or a named configuration (`go` for `.devcontainer/go/devcontainer.json`).
 * Returns the project-relative path of an existing file inside the project, or undefined.
 */
export async function locateDevcontainerConfig(projectDir: string, name: string): Promise<string | undefined> {
  const candidates = [name, path.posix.join(name, 'devcontainer.json'), `.devcontainer/${name}/devcontainer.json`];
  const root = path.resolve(projectDir);
  for (const c of candidates) {
    const abs = path.resolve(root, c);
    const rel = path.relative(root, abs);
    if (rel.startsWith('..') || path.isAbsolute(rel)) continue;
    if (await isFile(abs)) return rel.split(path.sep).join('/');
  }
  return undefined;
}
