import { lstat, mkdir, readdir, realpath, rmdir, unlink } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import type { ApplyOptions, ApplyOutcome } from './apply';
import { foldedTogether, plan, readState, writeStateAtomic, type Entry, type FileState } from './apply-plan';
import { foldName } from './result-paths';

export async function applyToWorkingTree(projectDir: string, entries: Entry[], opts: ApplyOptions, scratch: string): Promise<Omit<ApplyOutcome, 'patchSha256'>> {
  const folded = foldedTogether(entries);
  const refuse = async (rel: string) => folded.get(rel) ?? (await projectNameClash(projectDir, rel));
  const p = await plan(opts.repo.host, entries, scratch, (rel) => readState(path.join(projectDir, rel)), refuse, opts.resolved);
  const conflicts = [...p.conflicts];
  const failed = new Set<string>();
  // Parents must be real directories inside the project: never write through a symlink.
  for (const [rel, state] of p.writes) {
    if (state.kind === 'absent') continue;
    const problem = await parentProblem(projectDir, rel, p.writes);
    if (problem) {
      failed.add(rel);
      conflicts.push({ path: rel, reason: problem });
    }
  }
  // Whole or nothing (docs/architecture.md §11, "Apply"): one conflict and no file is written.
  if (conflicts.length && !opts.skipConflicts) return { applied: [], conflicts, held: p.applied.filter((a) => !failed.has(a)), unchanged: p.unchanged };
  // Deletions first (a file may become a directory), then writes.
  const ordered = [...p.writes].sort(([, a], [, b]) => Number(a.kind !== 'absent') - Number(b.kind !== 'absent'));
  for (const [rel, state] of ordered) {
    if (failed.has(rel)) continue;
    const full = path.join(projectDir, rel);
    try {
      if (state.kind === 'absent') {
        await assertInside(projectDir, path.dirname(full));
        await unlink(full).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOENT') throw err;
        });
        await pruneEmptyParents(projectDir, rel);
      } else {
        await makeDirsInside(projectDir, rel);
        await writeStateAtomic(full, state);
      }
    } catch (err) {
      failed.add(rel);
      conflicts.push({ path: rel, reason: `could not be written: ${(err as Error).message}` });
    }
  }
  return { applied: p.applied.filter((a) => !failed.has(a)), conflicts, held: [], unchanged: p.unchanged };
}

/**
 * A name already in the project that one case-insensitive or normalising file system would take
 * for this path (or one of its folders) while it is spelled differently.
 */
async function projectNameClash(projectDir: string, rel: string): Promise<string | undefined> {
  const parts = rel.split('/');
  let dir = projectDir;
  for (let i = 0; i < parts.length; i++) {
    const name = parts[i] as string;
    const names = await readdir(dir).catch(() => undefined); // the folder may not exist
    if (!names) return undefined;
    const key = foldName(name);
    const other = names.find((n) => n !== name && foldName(n) === key);
    if (other) return `the project has ${[...parts.slice(0, i), other].join('/')}, the same name as ${parts.slice(0, i + 1).join('/')} on case-insensitive or normalising file systems; refusing to write it`;
    if (!names.includes(name)) return undefined;
    dir = path.join(dir, name);
  }
  return undefined;
}

/** Throws unless `dir` resolves (symlinks followed) to the project or a folder inside it. */
export async function assertInside(projectDir: string, dir: string): Promise<void> {
  const real = await realpath(dir).catch(() => undefined); // the folder may not exist
  if (real === undefined) return; // does not exist: nothing is written through it
  if (real !== projectDir && !real.startsWith(projectDir + path.sep)) {
    throw new AirlockError('INVALID_INPUT', `${path.relative(projectDir, dir)} resolves outside the project (${real}); refusing to write there`);
  }
}

/** Creates the folders of `rel` one by one, each checked to be a real folder inside the project. */
async function makeDirsInside(projectDir: string, rel: string): Promise<void> {
  const parts = rel.split('/').slice(0, -1);
  let dir = projectDir;
  for (const part of parts) {
    dir = path.join(dir, part);
    const st = await lstat(dir).catch(() => undefined); // the folder may not exist
    if (!st) await mkdir(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    const now = await lstat(dir);
    if (now.isSymbolicLink() || !now.isDirectory()) throw new AirlockError('INVALID_INPUT', `${path.relative(projectDir, dir)} is not a folder in the project; refusing to write through it`);
    await assertInside(projectDir, dir);
  }
}

async function parentProblem(projectDir: string, rel: string, writes: Map<string, FileState>): Promise<string | undefined> {
  const parts = rel.split('/');
  for (let i = 1; i < parts.length; i++) {
    const sub = parts.slice(0, i).join('/');
    const st = await lstat(path.join(projectDir, sub)).catch(() => undefined); // the folder may not exist
    if (!st) return undefined;
    if (st.isSymbolicLink()) return `${sub} is a symlink in the project; refusing to write through it`;
    if (!st.isDirectory() && writes.get(sub)?.kind !== 'absent') return `${sub} is a file in the project, so ${rel} cannot be created`;
  }
  return undefined;
}

async function pruneEmptyParents(projectDir: string, rel: string): Promise<void> {
  const parts = rel.split('/');
  for (let i = parts.length - 1; i >= 1; i--) {
    try {
      await rmdir(path.join(projectDir, ...parts.slice(0, i)));
    } catch {
      return;
    }
  }
}
