import { spawn } from 'node:child_process';
import { chmod, lstat, mkdir, mkdtemp, readFile, readlink, realpath, rename, rm, rmdir, symlink, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import type { ApplyBaseline } from './changes';
import { blobOid } from './git-objects';
import { selectSections, splitPatch, type PatchSection } from './patch-sections';
import { gitTopLevel } from './snapshot';

export interface ApplyOptions {
  projectDir: string;
  /** The run's final patch (`finalPatch` / `collectResult`). */
  patch: Buffer;
  /** Apply only these paths (new or old name of a rename); default all. */
  files?: string[];
  /** `working-tree`: write files into the project. `branch`: new branch + commit, working tree untouched. */
  mode: 'working-tree' | 'branch';
  /** Branch name for `branch` mode (default `airlock/result-<timestamp>`). */
  branch?: string;
  /** Commit message for `branch` mode. */
  message?: string;
  baseline: ApplyBaseline;
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
  branch?: string;
  commit?: string;
}

type FileState =
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
  section: PatchSection;
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
 * Applies a run's result to the project, all or selected files. Each file is merged three-way
 * (baseline → run result, baseline → the project now): clean merges are written, files the user
 * changed in an overlapping way are refused and listed — a user's edit is never overwritten.
 * Deletions, additions, renames, binary files, symlinks and executable bits all survive.
 * `branch` mode commits onto a new branch through a temporary index and never touches the
 * working tree, the index or the current branch.
 */
export async function applyResult(opts: ApplyOptions): Promise<ApplyOutcome> {
  const projectDir = await realpath(path.resolve(opts.projectDir)).catch(() => {
    throw new AirlockError('NOT_FOUND', `Project folder ${opts.projectDir} does not exist; pass the folder the run was made from.`);
  });
  const sections = selectSections(splitPatch(opts.patch), opts.files);
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'airlock-apply-'));
  try {
    const entries = await reconstruct(scratch, sections, opts.baseline);
    if (opts.mode === 'branch') return await applyToBranch(projectDir, entries, opts, scratch);
    if (opts.mode !== 'working-tree') throw new AirlockError('INVALID_INPUT', `Unknown apply mode '${String(opts.mode)}'; use 'working-tree' or 'branch'.`);
    return await applyToWorkingTree(projectDir, entries, scratch);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Rebuilds base and result of every selected file in a scratch dir: base blobs + `git apply`. */
async function reconstruct(scratch: string, sections: PatchSection[], baseline: ApplyBaseline): Promise<Entry[]> {
  const work = path.join(scratch, 'result');
  const gitDir = path.join(scratch, 'git');
  await mkdir(work);
  await git(scratch, ['init', '-q', '--bare', gitDir]);
  await writeFile(path.join(gitDir, 'info', 'attributes'), '* -text -filter -ident -working-tree-encoding !diff !merge !eol\n');
  const blobs = new Map(baseline.files.map((f) => [f.path, f]));
  const bases = new Map<string, FileState>();
  for (const s of sections) {
    if (!s.oldPath) continue;
    const blob = blobs.get(s.oldPath);
    if (!blob) throw new AirlockError('INVALID_INPUT', `The run's baseline has no copy of ${s.oldPath}; apply needs the baseline saved with the patch (collectResult).`);
    const content = Buffer.from(blob.content, 'base64');
    if (blobOid(content) !== blob.oid) throw new AirlockError('INVALID_INPUT', `The saved baseline of ${s.oldPath} is damaged (checksum mismatch); export the patch and apply it by hand.`);
    const state: FileState = blob.mode === '120000' ? { kind: 'symlink', target: content.toString('utf8') } : { kind: 'file', content, exec: blob.mode === '100755' };
    bases.set(s.oldPath, state);
    await writeState(path.join(work, s.oldPath), state);
  }
  const patch = Buffer.concat(sections.map((s) => s.text));
  if (patch.length) {
    // git apply resolves paths against the cwd: it must run inside the work tree.
    const res = await git(work, [`--git-dir=${gitDir}`, `--work-tree=${work}`, 'apply', '--whitespace=nowarn', '-'], patch);
    if (res.code !== 0) {
      throw new AirlockError('INVALID_INPUT', `The patch does not apply to the run's own baseline (${res.stderr.trim()}); it was changed or belongs to another run.`);
    }
  }
  const entries: Entry[] = [];
  for (const s of sections) {
    entries.push({
      section: s,
      ...(s.oldPath ? { src: s.oldPath } : {}),
      ...(s.newPath ? { dst: s.newPath } : {}),
      base: s.oldPath ? (bases.get(s.oldPath) as FileState) : ABSENT,
      theirs: s.newPath ? await readState(path.join(work, s.newPath)) : ABSENT,
    });
  }
  return entries;
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
  const res = await git(dir, ['merge-file', '-p', '-q', o, b, t]);
  if (res.code !== 0) return { ok: false, reason: 'edited both in the project since the run started and by the run, and the edits overlap' };
  return { ok: true, result: { kind: 'file', content: res.stdout, exec } };
}

interface Plan {
  applied: string[];
  conflicts: ApplyConflict[];
  /** Final state per path, deletions included. */
  writes: Map<string, FileState>;
}

async function plan(entries: Entry[], scratch: string, ours: (p: string) => Promise<FileState>): Promise<Plan> {
  const out: Plan = { applied: [], conflicts: [], writes: new Map() };
  for (const e of entries) {
    const label = e.dst ?? (e.src as string);
    const oursSrc = e.src ? await ours(e.src) : ABSENT;
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

async function applyToWorkingTree(projectDir: string, entries: Entry[], scratch: string): Promise<ApplyOutcome> {
  const p = await plan(entries, scratch, (rel) => readState(path.join(projectDir, rel)));
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
  // Deletions first (a file may become a directory), then writes.
  const ordered = [...p.writes].sort(([, a], [, b]) => Number(a.kind !== 'absent') - Number(b.kind !== 'absent'));
  for (const [rel, state] of ordered) {
    if (failed.has(rel)) continue;
    const full = path.join(projectDir, rel);
    try {
      if (state.kind === 'absent') {
        await unlink(full).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOENT') throw err;
        });
        await pruneEmptyParents(projectDir, rel);
      } else {
        await writeStateAtomic(full, state);
      }
    } catch (err) {
      failed.add(rel);
      conflicts.push({ path: rel, reason: `could not be written: ${(err as Error).message}` });
    }
  }
  return { applied: p.applied.filter((a) => !failed.has(a)), conflicts };
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

async function applyToBranch(projectDir: string, entries: Entry[], opts: ApplyOptions, scratch: string): Promise<ApplyOutcome> {
  const top = await gitTopLevel(projectDir);
  if (!top || top !== projectDir) {
    throw new AirlockError('INVALID_INPUT', `${projectDir} is not the top folder of a git repository; branch mode needs one. Apply to the working tree instead.`);
  }
  const branch = opts.branch ?? `airlock/result-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-')}`;
  if ((await git(projectDir, ['check-ref-format', '--branch', branch])).code !== 0) {
    throw new AirlockError('INVALID_INPUT', `'${branch}' is not a valid branch name; pick another.`);
  }
  if ((await git(projectDir, ['rev-parse', '--verify', '-q', `refs/heads/${branch}`])).code === 0) {
    throw new AirlockError('CONFLICT', `Branch '${branch}' already exists; pick another name.`);
  }
  const startCandidates = [opts.baseline.headCommit, 'HEAD'].filter((c): c is string => !!c);
  let start: string | undefined;
  for (const c of startCandidates) {
    const r = await git(projectDir, ['rev-parse', '--verify', '-q', `${c}^{commit}`]);
    if (r.code === 0) {
      start = r.stdout.toString('utf8').trim();
      break;
    }
  }
  if (!start) throw new AirlockError('INVALID_INPUT', 'The repository has no commit to branch from; make a first commit, or apply to the working tree.');

  const tree = await git(projectDir, ['ls-tree', '-r', '-z', '--full-tree', start]);
  const listing = new Map<string, { mode: string; oid: string }>();
  for (const rec of tree.stdout.toString('utf8').split('\0')) {
    const m = /^(\d+) (\w+) ([0-9a-f]+)\t(.*)$/s.exec(rec);
    if (m) listing.set(m[4] as string, { mode: m[1] as string, oid: m[3] as string });
  }
  const ours = async (rel: string): Promise<FileState> => {
    const e = listing.get(rel);
    if (!e) return ABSENT;
    if (e.mode === '160000') return { kind: 'other', what: 'submodule' };
    const blob = await git(projectDir, ['cat-file', 'blob', e.oid]);
    return e.mode === '120000' ? { kind: 'symlink', target: blob.stdout.toString('utf8') } : { kind: 'file', content: blob.stdout, exec: e.mode === '100755' };
  };
  const p = await plan(entries, scratch, ours);
  const index = path.join(scratch, 'branch.index');
  const env = { GIT_INDEX_FILE: index };
  const lines: string[] = [];
  for (const [rel, state] of p.writes) {
    if (state.kind === 'absent') {
      lines.push(`0 ${'0'.repeat(40)}\t${rel}`);
      continue;
    }
    const content = state.kind === 'file' ? state.content : Buffer.from(state.kind === 'symlink' ? state.target : '');
    const w = await git(projectDir, ['hash-object', '-w', '--no-filters', '--stdin'], content);
    if (w.code !== 0) throw new AirlockError('INTERNAL', `Writing ${rel} into the repository failed: ${w.stderr}`);
    const mode = state.kind === 'symlink' ? '120000' : state.kind === 'file' && state.exec ? '100755' : '100644';
    lines.push(`${mode} ${w.stdout.toString('utf8').trim()}\t${rel}`);
  }
  await gitOk(projectDir, ['read-tree', start], env);
  if (lines.length) await gitOk(projectDir, ['update-index', '-z', '--index-info'], env, Buffer.from(lines.map((l) => `${l}\0`).join('')));
  const treeId = (await gitOk(projectDir, ['write-tree'], env)).trim();
  const message = opts.message ?? `Airlock run result\n\nApplied: ${p.applied.length} file(s)${p.conflicts.length ? `; left out (conflicts): ${p.conflicts.map((c) => c.path).join(', ')}` : ''}\n`;
  const ident: Record<string, string> = (await git(projectDir, ['config', 'user.email'])).code === 0 ? {} : { GIT_AUTHOR_NAME: 'Airlock', GIT_AUTHOR_EMAIL: 'airlock@localhost', GIT_COMMITTER_NAME: 'Airlock', GIT_COMMITTER_EMAIL: 'airlock@localhost' };
  const commit = (await gitOk(projectDir, ['commit-tree', treeId, '-p', start, '-F', '-'], ident, Buffer.from(message))).trim();
  await gitOk(projectDir, ['update-ref', '-m', 'airlock: apply run result', `refs/heads/${branch}`, commit, '0'.repeat(40)]);
  return { applied: p.applied, conflicts: p.conflicts, branch, commit };
}

export interface ExportPatchOptions {
  patch: Buffer;
  /** Where to write; an existing file is never overwritten unless `overwrite`. */
  file: string;
  files?: string[];
  overwrite?: boolean;
}

/** Writes the patch (or the sections of selected files) to a file for `git apply` elsewhere. */
export async function exportPatch(opts: ExportPatchOptions): Promise<{ file: string; bytes: number; paths: string[] }> {
  const sections = selectSections(splitPatch(opts.patch), opts.files);
  const body = opts.files ? Buffer.concat(sections.map((s) => s.text)) : opts.patch;
  const file = path.resolve(opts.file);
  try {
    await writeFile(file, body, { flag: opts.overwrite ? 'w' : 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new AirlockError('CONFLICT', `${file} already exists; choose another name or allow overwriting.`);
    throw err;
  }
  return { file, bytes: body.length, paths: sections.map((s) => (s.newPath ?? s.oldPath) as string) };
}

async function readState(full: string): Promise<FileState> {
  const st = await lstat(full).catch(() => undefined);
  if (!st) return ABSENT;
  if (st.isSymbolicLink()) return { kind: 'symlink', target: await readlink(full) };
  if (st.isFile()) return { kind: 'file', content: await readFile(full), exec: (st.mode & 0o100) !== 0 };
  return { kind: 'other', what: st.isDirectory() ? 'directory' : 'special file' };
}

async function writeState(full: string, state: FileState): Promise<void> {
  await mkdir(path.dirname(full), { recursive: true });
  if (state.kind === 'symlink') await symlink(state.target, full);
  else if (state.kind === 'file') await writeFile(full, state.content, { mode: state.exec ? 0o755 : 0o644 });
}

/** Writes next to the target and renames over it, so a symlink at the path is replaced, not followed. */
async function writeStateAtomic(full: string, state: FileState): Promise<void> {
  await mkdir(path.dirname(full), { recursive: true });
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

interface GitRun {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

function git(cwd: string, args: string[], input?: Buffer, env: Record<string, string> = {}): Promise<GitRun> {
  return new Promise((resolve, reject) => {
    const child = spawn('git', ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', ...args], {
      cwd,
      env: { ...process.env, LC_ALL: 'C', GIT_TERMINAL_PROMPT: '0', ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => (err += c.toString('utf8')));
    child.on('error', (e) =>
      reject(new AirlockError('INVALID_INPUT', `git could not be started (${e.message}); install git to apply results.`)),
    );
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: err }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? Buffer.alloc(0));
  });
}

async function gitOk(cwd: string, args: string[], env: Record<string, string> = {}, input?: Buffer): Promise<string> {
  const r = await git(cwd, args, input, env);
  if (r.code !== 0) throw new AirlockError('INTERNAL', `git ${args[0]} failed in ${cwd}: ${r.stderr.trim()}`);
  return r.stdout.toString('utf8');
}
