import { chmod, lstat, mkdir, mkdtemp, readFile, readdir, readlink, realpath, rename, rm, rmdir, symlink, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { sectionsOf, selectChanges, type ResultChange, type StoredResult } from './collect';
import { ZERO_OID } from './git-objects';
import { hostGit, hostGitOk } from './host-git';
import type { HostRepo } from './host-repo';
import { selectionPatch, type FileSelection } from './partial';
import { foldCollisions, foldName, unsafePathReason } from './result-paths';
import { gitTopLevel } from './snapshot';
import { sha256Hex } from '../common/sha256';

export interface ApplyOptions {
  projectDir: string;
  /** The run's host object store (base and result blobs). */
  repo: HostRepo;
  /** The result as collected (host-derived). */
  result: StoredResult;
  /** The stored result patch (`result.patchSha256` is checked against it). */
  patch: Buffer;
  /** Apply only these paths (new or old name of a rename); default all. */
  files?: string[];
  /** Hunks and lines of some of those files (text files only); the rest of each stays as in the project. */
  selection?: FileSelection[];
  /**
   * SHA-256 of the patch the user reviewed: the selection's (`selectionPatch`), or the whole
   * result's when whole files are applied. Anything else is refused before the project is touched.
   */
  reviewedSha256: string;
  /** `working-tree`: write files into the project. `branch`: new branch + commit, working tree untouched. */
  mode: 'working-tree' | 'branch';
  /** Branch name for `branch` mode (default `airlock/result-<timestamp>`). */
  branch?: string;
  /** Commit message for `branch` mode (e.g. the run's task); a first line over 72 characters is wrapped into the body. */
  message?: string;
  /**
   * Write the files that merge cleanly even when others conflict. Off (the default), a change set
   * is applied whole or not at all, like a git client: one conflicting file and nothing is written.
   */
  skipConflicts?: boolean;
  /**
   * Files the user resolved in a merge view (path → SHA-256 of what was saved, from the apply log):
   * a project file still holding that resolution counts as applied, not as a conflict.
   */
  resolved?: ReadonlyMap<string, string>;
}

export interface ApplyConflict {
  path: string;
  reason: string;
}

export interface ApplyOutcome {
  /** Paths written (or, in branch mode, committed); a rename is listed by its new name. */
  applied: string[];
  /** Paths left untouched because the project changed them too; nothing of the user's was overwritten. */
  conflicts: ApplyConflict[];
  /** Files that would apply cleanly but were not written because others conflict (whole-or-nothing). */
  held: string[];
  /** Files the project already has as the result (applied before, or resolved by the user): nothing to write. */
  unchanged: string[];
  branch?: string;
  commit?: string;
  /** Author of the branch commit (`Name <email>`). */
  author?: string;
  /** True when git has no user identity for the project, so the commit is authored by Airlock. */
  authorFallback?: boolean;
  /** SHA-256 of the part of the result patch that was selected (what the apply log records). */
  patchSha256: string;
}

export type FileState =
  | { kind: 'absent' }
  | { kind: 'file'; content: Buffer; exec: boolean }
  | { kind: 'symlink'; target: string }
  | { kind: 'other'; what: string };

const ABSENT: FileState = { kind: 'absent' };

function sameState(a: FileState, b: FileState): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'file' && b.kind === 'file') return a.exec === b.exec && a.content.equals(b.content);
  if (a.kind === 'symlink' && b.kind === 'symlink') return a.target === b.target;
  return a.kind === 'absent';
}

function isBinary(buf: Buffer): boolean {
  return buf.subarray(0, 8000).includes(0);
}

interface Entry {
  /** Where the user's version is read (the old path). */
  src?: string;
  /** Where the result goes (absent for a deletion). */
  dst?: string;
  base: FileState;
  theirs: FileState;
}

/** What a file of the project should become, or why it is left alone. */
type Decision = { ok: true; result: FileState } | { ok: false; reason: string };

/**
 * Applies a run's result to the project, all or selected files, from the run's host object store
 * (never from a scratch tree or sandbox text). Refused before anything is written: a digest that
 * is not the reviewed patch's, a name outside the result. Each file is merged three-way
 * (baseline → run result, baseline → the project now): clean merges are written, files the user
 * changed in an overlapping way are refused and listed — a user's edit is never overwritten.
 * Names that fold together (letter case, Unicode form) with each other or with the project are
 * refused, and every folder written into is checked to resolve inside the project. `branch` mode
 * commits onto a new branch through a temporary index and never touches the working tree, the
 * index or the current branch.
 */
export async function applyResult(opts: ApplyOptions): Promise<ApplyOutcome> {
  const projectDir = await realpath(path.resolve(opts.projectDir)).catch(() => {
    throw new AirlockError('NOT_FOUND', `Project folder ${opts.projectDir} does not exist; pass the folder the run was made from.`);
  });
  if (opts.mode !== 'working-tree' && opts.mode !== 'branch') throw new AirlockError('INVALID_INPUT', `Unknown apply mode '${String(opts.mode)}'; use 'working-tree' or 'branch'.`);
  if (sha256Hex(opts.patch) !== opts.result.patchSha256) {
    throw new AirlockError('INTERNAL', "The run's stored patch no longer matches its collected result; the run folder was altered. Nothing was applied.");
  }
  const picked = await selectionPatch(opts.repo, opts.result, opts.patch, opts.files, opts.selection);
  const selected = picked.changes;
  const patchSha256 = picked.sha256;
  const wholeFiles = !opts.selection?.length;
  if (opts.reviewedSha256 !== patchSha256 && !(wholeFiles && opts.reviewedSha256 === opts.result.patchSha256)) {
    throw new AirlockError('CONFLICT', `This is not the ${wholeFiles ? 'result' : 'selection'} that was reviewed (reviewed ${opts.reviewedSha256.slice(0, 12)}…, ${wholeFiles ? 'result' : 'selection'} ${(wholeFiles ? opts.result.patchSha256 : patchSha256).slice(0, 12)}…); review it again, then apply. Nothing was applied.`);
  }
  for (const c of selected) {
    for (const p of [c.path, c.oldPath]) {
      const why = p === undefined ? undefined : unsafePathReason(p);
      if (why) throw new AirlockError('INVALID_INPUT', `The result names an unsafe path (${p}: ${why}); nothing was applied.`);
    }
  }
  const entries = await entriesOf(opts.repo, selected, picked.partial);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'airlock-apply-'));
  try {
    const outcome = opts.mode === 'branch' ? await applyToBranch(projectDir, entries, opts, scratch) : await applyToWorkingTree(projectDir, entries, opts, scratch);
    return { ...outcome, patchSha256 };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Base and result of every selected file, from the host object store (a part's result: base plus the selected changes). */
async function entriesOf(repo: HostRepo, changes: ResultChange[], partial: Map<string, Buffer>): Promise<Entry[]> {
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
function foldedTogether(entries: Entry[]): Map<string, string> {
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
async function decide(scratch: string, base: FileState, ours: FileState, theirs: FileState): Promise<Decision> {
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
  const res = await hostGit(['merge-file', '-p', '-q', o, b, t], { cwd: dir });
  if (res.code !== 0) return { ok: false, reason: 'edited both in the project since the run started and by the run, and the edits overlap' };
  return { ok: true, result: { kind: 'file', content: res.stdout, exec } };
}

interface Plan {
  applied: string[];
  conflicts: ApplyConflict[];
  unchanged: string[];
  /** Final state per path, deletions included. */
  writes: Map<string, FileState>;
}

async function plan(entries: Entry[], scratch: string, ours: (p: string) => Promise<FileState>, refuse: (p: string) => Promise<string | undefined>, resolved?: ReadonlyMap<string, string>): Promise<Plan> {
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
      const d = oursSrc.kind === 'absent' ? ({ ok: true, result: e.theirs } as Decision) : await decide(scratch, e.base, oursSrc, e.theirs);
      if (!d.ok) {
        out.conflicts.push({ path: label, reason: `renamed from ${e.src}: ${d.reason}` });
        continue;
      }
      out.writes.set(e.src, ABSENT);
      out.writes.set(e.dst, d.result);
      out.applied.push(label);
      continue;
    }
    const d = await decide(scratch, e.base, oursSrc.kind === 'absent' && e.dst ? await ours(e.dst) : oursSrc, e.theirs);
    if (!d.ok) {
      out.conflicts.push({ path: label, reason: d.reason });
      continue;
    }
    out.writes.set(label, d.result);
    out.applied.push(label);
  }
  return out;
}

async function applyToWorkingTree(projectDir: string, entries: Entry[], opts: ApplyOptions, scratch: string): Promise<Omit<ApplyOutcome, 'patchSha256'>> {
  const folded = foldedTogether(entries);
  const refuse = async (rel: string) => folded.get(rel) ?? (await projectNameClash(projectDir, rel));
  const p = await plan(entries, scratch, (rel) => readState(path.join(projectDir, rel)), refuse, opts.resolved);
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
  // Whole or nothing (docs/architecture.md §14): one conflict and no file is written.
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
    const names = await readdir(dir).catch(() => undefined);
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
  const real = await realpath(dir).catch(() => undefined);
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
    const st = await lstat(dir).catch(() => undefined);
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
    const st = await lstat(path.join(projectDir, sub)).catch(() => undefined);
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

async function applyToBranch(projectDir: string, entries: Entry[], opts: ApplyOptions, scratch: string): Promise<Omit<ApplyOutcome, 'patchSha256'>> {
  const top = await gitTopLevel(projectDir);
  if (!top || top !== projectDir) {
    throw new AirlockError('INVALID_INPUT', `${projectDir} is not the top folder of a git repository; branch mode needs one. Apply to the working tree instead.`);
  }
  const git = (args: string[], input?: Buffer, env: Record<string, string> = {}) => hostGit(args, { cwd: projectDir, env, ...(input ? { stdin: input } : {}) });
  const gitOk = async (args: string[], env: Record<string, string> = {}, input?: Buffer) => (await hostGitOk(args, { cwd: projectDir, env, ...(input ? { stdin: input } : {}) })).toString('utf8');
  const branch = opts.branch ?? `airlock/result-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-')}`;
  if ((await git(['check-ref-format', '--branch', branch])).code !== 0) {
    throw new AirlockError('INVALID_INPUT', `'${branch}' is not a valid branch name; pick another.`);
  }
  const exists = async (name: string) => (await git(['rev-parse', '--verify', '-q', `refs/heads/${name}`])).code === 0;
  if (await exists(branch)) {
    const free = await freeBranchName(branch, exists);
    throw new AirlockError('CONFLICT', `Branch '${branch}' already exists (this result may have been applied before); apply to a new branch such as '${free}'. Nothing was applied.`, { field: 'branch', suggestion: free });
  }
  const startCandidates = [opts.result.headCommit, 'HEAD'].filter((c): c is string => !!c);
  let start: string | undefined;
  for (const c of startCandidates) {
    const r = await git(['rev-parse', '--verify', '-q', `${c}^{commit}`]);
    if (r.code === 0) {
      start = r.stdout.toString('utf8').trim();
      break;
    }
  }
  if (!start) throw new AirlockError('INVALID_INPUT', 'The repository has no commit to branch from; make a first commit, or apply to the working tree.');

  const tree = await git(['ls-tree', '-r', '-z', '--full-tree', start]);
  const listing = new Map<string, { mode: string; oid: string }>();
  for (const rec of tree.stdout.toString('utf8').split('\0')) {
    const m = /^(\d+) (\w+) ([0-9a-f]+)\t(.*)$/s.exec(rec);
    if (m) listing.set(m[4] as string, { mode: m[1] as string, oid: m[3] as string });
  }
  const ours = async (rel: string): Promise<FileState> => {
    const e = listing.get(rel);
    if (!e) return ABSENT;
    if (e.mode === '160000') return { kind: 'other', what: 'submodule' };
    const blob = await git(['cat-file', 'blob', e.oid]);
    return e.mode === '120000' ? { kind: 'symlink', target: blob.stdout.toString('utf8') } : { kind: 'file', content: blob.stdout, exec: e.mode === '100755' };
  };
  // The branch is checked out somewhere one day: the same name rules as the working tree.
  const folded = foldedTogether(entries);
  const existing = new Map<string, string>();
  for (const p of listing.keys()) {
    const parts = p.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const sub = parts.slice(0, i).join('/');
      existing.set(foldName(sub), sub);
    }
  }
  const refuse = async (rel: string) => {
    if (folded.has(rel)) return folded.get(rel);
    const parts = rel.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const sub = parts.slice(0, i).join('/');
      const other = existing.get(foldName(sub));
      if (other !== undefined && other !== sub) return `the branch has ${other}, the same name as ${sub} on case-insensitive or normalising file systems; refusing it`;
    }
    return undefined;
  };
  const p = await plan(entries, scratch, ours, refuse, opts.resolved);
  // Whole or nothing, as in the working tree; and no empty commit when the branch start already has it all.
  if ((p.conflicts.length && !opts.skipConflicts) || p.writes.size === 0) return { applied: [], conflicts: p.conflicts, held: p.conflicts.length ? p.applied : [], unchanged: p.unchanged };
  const index = path.join(scratch, 'branch.index');
  const env = { GIT_INDEX_FILE: index };
  const lines: string[] = [];
  for (const [rel, state] of p.writes) {
    if (state.kind === 'absent') {
      lines.push(`0 ${'0'.repeat(40)}\t${rel}`);
      continue;
    }
    const content = state.kind === 'file' ? state.content : Buffer.from(state.kind === 'symlink' ? state.target : '');
    const w = await git(['hash-object', '-w', '--no-filters', '--stdin'], content);
    if (w.code !== 0) throw new AirlockError('INTERNAL', `Writing ${rel} into the repository failed: ${w.stderr}`);
    const mode = state.kind === 'symlink' ? '120000' : state.kind === 'file' && state.exec ? '100755' : '100644';
    lines.push(`${mode} ${w.stdout.toString('utf8').trim()}\t${rel}`);
  }
  await gitOk(['read-tree', start], env);
  if (lines.length) await gitOk(['update-index', '-z', '--index-info'], env, Buffer.from(lines.map((l) => `${l}\0`).join('')));
  const treeId = (await gitOk(['write-tree'], env)).trim();
  const message = commitMessage(opts.message, p.applied.length, p.conflicts.map((c) => c.path));
  // The author is the user's identity as git resolves it for the project (global config is read
  // for that call only); without one the commit is Airlock's and the caller says so.
  const ident = await userIdentity(projectDir);
  const identEnv: Record<string, string> = ident
    ? {}
    : { GIT_AUTHOR_NAME: 'Airlock', GIT_AUTHOR_EMAIL: 'airlock@localhost', GIT_COMMITTER_NAME: 'Airlock', GIT_COMMITTER_EMAIL: 'airlock@localhost' };
  const commit = (await hostGitOk(['commit-tree', treeId, '-p', start, '-F', '-'], { cwd: projectDir, env: identEnv, stdin: Buffer.from(message), userConfig: true })).toString('utf8').trim();
  await gitOk(['update-ref', '-m', 'airlock: apply run result', `refs/heads/${branch}`, commit, '0'.repeat(40)]);
  return { applied: p.applied, conflicts: p.conflicts, held: [], unchanged: p.unchanged, branch, commit, author: ident ?? 'Airlock <airlock@localhost>', ...(ident ? {} : { authorFallback: true }) };
}

/** `Name <email>` from the user's git config for the project (local, then global), or undefined. */
async function userIdentity(projectDir: string): Promise<string | undefined> {
  const get = async (key: string) => {
    const r = await hostGit(['config', '--get', key], { cwd: projectDir, userConfig: true });
    return r.code === 0 ? r.stdout.toString('utf8').trim() : '';
  };
  const [name, email] = [await get('user.name'), await get('user.email')];
  return name && email ? `${name} <${email}>` : undefined;
}

/** `base-2`, `base-3`… : the first name that `exists` says is free. */
export async function freeBranchName(base: string, exists: (name: string) => Promise<boolean>): Promise<string> {
  for (let i = 2; ; i++) {
    const name = `${base}-${i}`;
    if (!(await exists(name))) return name;
  }
}

/**
 * The branch commit's message: the given text (e.g. the task) with a subject of at most 72
 * characters (a longer first line is cut at a word and continued in the body), or a default.
 */
export function commitMessage(text: string | undefined, applied: number, leftOut: string[]): string {
  const footer = `Applied: ${applied} ${applied === 1 ? 'file' : 'files'}${leftOut.length ? `; left out (conflicts): ${leftOut.join(', ')}` : ''}`;
  const lines = (text ?? '').replace(/\r\n?/g, '\n').trim().split('\n');
  let subject = (lines.shift() ?? '').trim();
  let body = lines.join('\n').trim();
  if (!subject) return `Airlock run result\n\n${footer}\n`;
  if (subject.length > 72) {
    const cut = subject.lastIndexOf(' ', 71);
    const at = cut > 20 ? cut : 71;
    const rest = subject.slice(at).trim();
    subject = `${subject.slice(0, at).trimEnd()}…`;
    body = `…${rest}${body ? `\n\n${body}` : ''}`;
  }
  return `${subject}\n\n${body ? `${body}\n\n` : ''}${footer}\n`;
}

export interface ExportPatchOptions {
  patch: Buffer;
  result: StoredResult;
  /** Where to write; an existing file is never overwritten unless `overwrite`. */
  file: string;
  files?: string[];
  overwrite?: boolean;
}

/** Writes the result patch (or the sections of selected files) to a file for `git apply` elsewhere. */
export async function exportPatch(opts: ExportPatchOptions): Promise<{ file: string; bytes: number; paths: string[]; sha256: string }> {
  const selected = selectChanges(opts.result, opts.files);
  const body = sectionsOf(opts.patch, selected);
  const file = path.resolve(opts.file);
  try {
    await writeFile(file, body, { flag: opts.overwrite ? 'w' : 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new AirlockError('CONFLICT', `${file} already exists; choose another name or allow overwriting.`);
    throw err;
  }
  return { file, bytes: body.length, paths: selected.map((c) => c.path), sha256: sha256Hex(body) };
}

export async function readState(full: string): Promise<FileState> {
  const st = await lstat(full).catch(() => undefined);
  if (!st) return ABSENT;
  if (st.isSymbolicLink()) return { kind: 'symlink', target: await readlink(full) };
  if (st.isFile()) return { kind: 'file', content: await readFile(full), exec: (st.mode & 0o100) !== 0 };
  return { kind: 'other', what: st.isDirectory() ? 'directory' : 'special file' };
}

/** Writes next to the target and renames over it, so a symlink at the path is replaced, not followed. */
export async function writeStateAtomic(full: string, state: FileState): Promise<void> {
  const tmp = path.join(path.dirname(full), `.airlock-apply-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const prev = await lstat(full).catch(() => undefined);
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
