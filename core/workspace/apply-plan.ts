import { chmod, lstat, mkdtemp, readFile, readlink, rename, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResultChange } from './collect';
import { sha256Hex } from '../common/sha256';
import type { ApplyConflict } from './apply';
import { ZERO_OID } from './git-objects';
import type { HostGit } from './host-git';
import type { HostRepo } from './host-repo';
import { foldCollisions } from './result-paths';

/**
 * The three-way plan of an apply (docs/architecture.md §11, "Apply"): for each selected file its
 * base and result from the host's object store, the user's version now, and what to write or why not.
 * Shared by both targets (apply-working-tree.ts, apply-branch.ts).
 */

export type FileState =
  | { kind: 'absent' }
  | { kind: 'file'; content: Buffer; exec: boolean }
  | { kind: 'symlink'; target: string }
  | { kind: 'other'; what: string };

export const ABSENT: FileState = { kind: 'absent' };

export function sameState(a: FileState, b: FileState): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'file' && b.kind === 'file') return a.exec === b.exec && a.content.equals(b.content);
  if (a.kind === 'symlink' && b.kind === 'symlink') return a.target === b.target;
  return a.kind === 'absent';
}

export function isBinary(buf: Buffer): boolean {
  return buf.subarray(0, 8000).includes(0);
}

export interface Entry {
  /** Where the user's version is read (the old path). */
  src?: string;
  /** Where the result goes (absent for a deletion). */
  dst?: string;
  base: FileState;
  theirs: FileState;
}

/** What a file of the project should become, or why it is left alone. */
export type Decision = { ok: true; result: FileState } | { ok: false; reason: string };

/** Base and result of every selected file, from the host object store (a part's result: base plus the selected changes). */
export async function entriesOf(repo: HostRepo, changes: ResultChange[], partial: Map<string, Buffer>): Promise<Entry[]> {
  const blobs = await repo.readBlobs(changes.flatMap((c) => [c.oldOid, c.newOid]).filter((o) => o !== ZERO_OID));
  const state = (oid: string, mode: string | undefined): FileState => {
    if (oid === ZERO_OID || !mode) return ABSENT;
    const content = blobs.get(oid) as Buffer;
    return mode === '120000' ? { kind: 'symlink', target: content.toString('utf8') } : { kind: 'file', content, exec: mode === '100755' };
  };
  return changes.map((c) => {
    const src = c.status === 'added' ? undefined : (c.oldPath ?? c.path);
    const dst = c.status === 'deleted' ? undefined : c.path;
    const part = partial.get(c.path);
    const theirs = part ? { kind: 'file' as const, content: part, exec: c.newMode === '100755' } : state(c.newOid, c.newMode);
    return { ...(src ? { src } : {}), ...(dst ? { dst } : {}), base: state(c.oldOid, c.oldMode), theirs };
  });
}

/** Paths of `entries` to refuse because their names fold together (case, Unicode form). */
export function foldedTogether(entries: Entry[]): Map<string, string> {
  const out = new Map<string, string>();
  const dsts = entries.map((e) => e.dst).filter((p): p is string => !!p);
  for (const group of foldCollisions(dsts).values()) {
    for (const d of dsts) {
      const clash = group.find((g) => (d === g || d.startsWith(`${g}/`)) );
      if (clash) out.set(d, `its name folds together with ${group.filter((g) => g !== clash).join(', ') || clash} (letter case or Unicode form): one file on macOS and Windows`);
    }
  }
  return out;
}

/** Three-way decision for one file; `ours` is the project's version now. */
export async function decide(git: HostGit, scratch: string, base: FileState, ours: FileState, theirs: FileState): Promise<Decision> {
  if (sameState(ours, base) || sameState(ours, theirs)) return { ok: true, result: theirs };
  if (sameState(base, theirs)) return { ok: true, result: ours };
  if (ours.kind === 'other') return { ok: false, reason: `a ${ours.what} is in the way in the project` };
  if (base.kind === 'absent') return { ok: false, reason: 'created in the project since the run started, with different content' };
  if (theirs.kind === 'absent') return { ok: false, reason: 'modified in the project since the run started; the run deletes it' };
  if (ours.kind === 'absent') return { ok: false, reason: 'deleted in the project since the run started; the run changes it' };
  if (base.kind !== 'file' || ours.kind !== 'file' || theirs.kind !== 'file') {
    return { ok: false, reason: 'changed in the project since the run started (symlink or type change on both sides)' };
  }
  const exec = ours.exec === base.exec ? theirs.exec : ours.exec;
  if (ours.content.equals(base.content)) return { ok: true, result: { kind: 'file', content: theirs.content, exec } };
  if (theirs.content.equals(base.content)) return { ok: true, result: { kind: 'file', content: ours.content, exec } };
  if (isBinary(base.content) || isBinary(ours.content) || isBinary(theirs.content)) {
    return { ok: false, reason: 'binary file changed both in the project since the run started and by the run' };
  }
  const dir = await mkdtemp(path.join(scratch, 'merge-'));
  const [o, b, t] = ['ours', 'base', 'theirs'].map((n) => path.join(dir, n)) as [string, string, string];
  await Promise.all([writeFile(o, ours.content), writeFile(b, base.content), writeFile(t, theirs.content)]);
  const res = await git.run(['merge-file', '-p', '-q', o, b, t], { cwd: dir });
  if (res.code !== 0) return { ok: false, reason: 'edited both in the project since the run started and by the run, and the edits overlap' };
  return { ok: true, result: { kind: 'file', content: res.stdout, exec } };
}

export interface Plan {
  applied: string[];
  conflicts: ApplyConflict[];
  unchanged: string[];
  /** Final state per path, deletions included. */
  writes: Map<string, FileState>;
}

export async function plan(git: HostGit, entries: Entry[], scratch: string, ours: (p: string) => Promise<FileState>, refuse: (p: string) => Promise<string | undefined>, resolved?: ReadonlyMap<string, string>): Promise<Plan> {
  const out: Plan = { applied: [], conflicts: [], unchanged: [], writes: new Map() };
  for (const e of entries) {
    const label = e.dst ?? (e.src as string);
    const refused = (e.dst && (await refuse(e.dst))) || undefined;
    if (refused) {
      out.conflicts.push({ path: label, reason: refused });
      continue;
    }
    const oursSrc = e.src ? await ours(e.src) : ABSENT;
    // Already there: the result itself (applied before), or the user's own resolution of it.
    const oursNow = e.dst && e.dst !== e.src ? await ours(e.dst) : oursSrc;
    const gone = !e.src || e.src === e.dst || oursSrc.kind === 'absent';
    const resolvedSha = resolved?.get(label);
    if (gone && (sameState(oursNow, e.theirs) || (resolvedSha !== undefined && oursNow.kind === 'file' && sha256Hex(oursNow.content) === resolvedSha))) {
      out.unchanged.push(label);
      continue;
    }
    if (e.src && e.dst && e.src !== e.dst) {
      // A rename: the destination must be free (or already hold the result), the source merges.
      const oursDst = await ours(e.dst);
      if (!sameState(oursDst, ABSENT) && !sameState(oursDst, e.theirs)) {
        out.conflicts.push({ path: label, reason: `renamed from ${e.src}, but ${e.dst} was created in the project since the run started` });
        continue;
      }
      if (oursSrc.kind === 'absent' && !sameState(oursDst, e.theirs)) {
        out.conflicts.push({ path: label, reason: `renamed from ${e.src}, which was deleted in the project since the run started` });
        continue;
      }
      const d = oursSrc.kind === 'absent' ? ({ ok: true, result: e.theirs } as Decision) : await decide(git, scratch, e.base, oursSrc, e.theirs);
      if (!d.ok) {
        out.conflicts.push({ path: label, reason: `renamed from ${e.src}: ${d.reason}` });
        continue;
      }
      out.writes.set(e.src, ABSENT);
      out.writes.set(e.dst, d.result);
      out.applied.push(label);
      continue;
    }
    const d = await decide(git, scratch, e.base, oursSrc.kind === 'absent' && e.dst ? await ours(e.dst) : oursSrc, e.theirs);
    if (!d.ok) {
      out.conflicts.push({ path: label, reason: d.reason });
      continue;
    }
    out.writes.set(label, d.result);
    out.applied.push(label);
  }
  return out;
}

export async function readState(full: string): Promise<FileState> {
  const st = await lstat(full).catch(() => undefined); // the file may not exist
  if (!st) return ABSENT;
  if (st.isSymbolicLink()) return { kind: 'symlink', target: await readlink(full) };
  if (st.isFile()) return { kind: 'file', content: await readFile(full), exec: (st.mode & 0o100) !== 0 };
  return { kind: 'other', what: st.isDirectory() ? 'directory' : 'special file' };
}

/** Writes next to the target and renames over it, so a symlink at the path is replaced, not followed. */
export async function writeStateAtomic(full: string, state: FileState): Promise<void> {
  const tmp = path.join(path.dirname(full), `.airlock-apply-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const prev = await lstat(full).catch(() => undefined); // the file may not exist
  try {
    if (state.kind === 'symlink') {
      await symlink(state.target, tmp);
    } else if (state.kind === 'file') {
      await writeFile(tmp, state.content, { flag: 'wx' });
      // Keep the user's other permission bits; only the executable bit follows the result.
      const keep = prev && prev.isFile() ? prev.mode & 0o666 : 0o644 & ~process.umask();
      await chmod(tmp, state.exec ? keep | ((keep & 0o444) >> 2) : keep);
    }
    await rename(tmp, full);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}
