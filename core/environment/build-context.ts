import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readFile, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { AirlockError } from '../../contracts/errors';
import { snapshotFolder, type ProjectSnapshot } from '../workspace/snapshot';

/**
 * What a project build may read (docs/architecture.md §16, "The build sees only the project"): the
 * context and the Dockerfile are resolved on the host by their real paths and must stay inside the
 * project's real path, and the trust digest covers every file of the context the engine would get.
 */

/** The largest file a build context may hold (as sent to the engine). */
export const CONTEXT_MAX_FILE_BYTES = 512 * 1024 * 1024;

/**
 * Refuses a path the configuration names (`rel`, project-relative, already checked as text) whose
 * real path leaves the project's real path — a committed `.devcontainer/root -> /` would otherwise
 * make `${localWorkspaceFolder}/.devcontainer/root/home/me` the build context. The error names the
 * link. A path that does not exist passes: the caller's own check says so.
 */
export async function assertRealInside(root: string, rel: string, where: { file: string; field: string }): Promise<void> {
  const realRoot = await realpath(root);
  const real = await realpath(path.join(root, rel)).catch(() => undefined); // a path that does not exist passes: the caller's own check says so
  if (real === undefined) return;
  const r = path.relative(realRoot, real);
  if (r === '' || (!r.startsWith('..') && !path.isAbsolute(r))) return;
  // Name the first link on the way (a link may point at another link; the first one is in the project).
  const parts = rel.split('/').filter(Boolean);
  let link = rel;
  let target = real;
  for (let i = 1; i <= parts.length; i++) {
    const p = parts.slice(0, i).join('/');
    const st = await lstat(path.join(root, p)).catch(() => undefined); // a part that does not exist is no link
    if (st?.isSymbolicLink()) {
      link = p;
      target = await readlink(path.join(root, p)).catch(() => real);
      break;
    }
  }
  throw new AirlockError(
    'INVALID_INPUT',
    `${where.file}: ${where.field} '${rel || '.'}' leads outside the project through the link '${link}' (→ ${target}); only the project's own files are sent to the engine. Remove the link or point ${where.field} at a folder of the project, or choose --environment airlock.`,
    { field: 'environment' },
  );
}

/** The context's `.dockerignore` patterns (none when it has no such file). */
export async function dockerignore(contextDir: string): Promise<string[]> {
  try {
    return (await readFile(path.join(contextDir, '.dockerignore'), 'utf8')).split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  } catch {
    return [];
  }
}

/** The context as the engine would get it: `.dockerignore` honoured, credential-looking files left out, no link followed. */
export async function snapshotContext(contextDir: string): Promise<ProjectSnapshot> {
  // By its real path (checked inside the project by assertRealInside): a link inside the project is only a name.
  const real = await realpath(contextDir);
  return snapshotFolder(real, { respectGitignore: false, exclude: await dockerignore(real), maxFileBytes: CONTEXT_MAX_FILE_BYTES });
}

/**
 * A digest of everything a build can read from its context, for the trust hash: each entry's name,
 * kind, executable bit, link target and bytes. Times and other mode bits are left out, so a fresh
 * clone or a checkout of the same content does not ask again; a changed `scripts/setup.sh` does.
 */
export async function buildContextDigest(contextDir: string): Promise<Buffer> {
  const snapshot = await snapshotContext(contextDir);
  const h = createHash('sha256');
  const entries = [...snapshot.entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const e of entries) {
    h.update(`${JSON.stringify([e.path, e.type, e.mode & 0o111 ? 'x' : '-', e.linkTarget ?? ''])}\n`);
    if (e.type !== 'file') continue;
    const fh = createHash('sha256');
    if (e.content) fh.update(e.content);
    else await pipeline(createReadStream(path.join(snapshot.projectDir, e.path)), fh);
    h.update(fh.digest());
  }
  return h.digest();
}
