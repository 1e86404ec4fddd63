import { AirlockError } from '../../contracts/errors';
import { LimitError } from '../common/limit-error';
import { parseRawNumstat, refreshedGit, type FileChange } from './changes';
import { ZERO_OID, blobOid, quoteC, type GitMode } from './git-objects';
import type { FastImport, HostRepo } from './host-repo';
import { parseHostileTar } from './hostile-tar';
import { foldCollisions, symlinkLeavesProject, unsafePathReason, unsafeSymlinkReason } from './result-paths';
import { plantedGitDirs, plantedRepoFlag, plantedRepoRefusal } from './git-steering';
import type { ManifestFile } from './snapshot';
import { BASELINE_IDENT, BASELINE_REF, SANDBOX_LAYOUT, gitArgv, helperGitEnv, serialized, type WorkspaceLayout, type WorkspaceShell } from './workspace-shell';
import { sha256Hex } from '../common/sha256';

/** One changed file of a result, derived on the host. */
export interface ResultChange extends FileChange {
  /** Host-derived review flags beyond the path classifier (name collisions, symlinks leaving the project). */
  warnings?: string[];
  /** This file's part of the result patch: byte range and SHA-256. */
  section: { offset: number; length: number; sha256: string };
}

/**
 * A run's result as the host derived it: both commits live in the run's host object store, the
 * patch (stored beside it) was produced there, and each change knows its section of that patch.
 */
export interface StoredResult {
  version: 2;
  baseCommit: string;
  resultCommit: string;
  /** The project's HEAD when the run started (git projects); branch mode builds on it. */
  headCommit?: string;
  /** SHA-256 of the whole result patch. */
  patchSha256: string;
  changes: ResultChange[];
  /** Paths the sandbox pointed at that are not part of the result, and why. */
  skipped: Array<{ path: string; reason: string }>;
}

export interface CollectedResult {
  result: StoredResult;
  patch: Buffer;
}

export interface CollectOptions {
  layout?: WorkspaceLayout;
  /** The run's host object store, holding the baseline written at hydrate. */
  repo: HostRepo;
  /** The host's baseline commit (`hydrate(...).hostBaseline`). */
  baseCommit: string;
  /** The host's manifest of the baseline (`hydrate(...).manifest`): stat hints and base modes. */
  manifest: ManifestFile[];
  headCommit?: string;
  /** Paths the live change feed reported during the run (a hint, like everything from inside). */
  hints?: Iterable<string>;
  /**
   * The project's own ignore rules as read on the host (`ProjectSnapshot.isIgnored`): new files
   * the stat listing finds are proposed unless these rules leave them out.
   */
  isIgnored?: (rel: string) => boolean;
  /** Files above this are flagged `tooLarge` for review (default 1 MiB). */
  diffCapBytes?: number;
  /** A changed file above this is not collected and is listed (default 50 MiB). */
  maxFileBytes?: number;
  /** The changed files together may not exceed this (default 512 MiB). */
  maxResultBytes?: number;
  /** The ref the result commit is written to (default `refs/airlock/result`; checkpoints name their own). */
  ref?: string;
}

const DEFAULT_DIFF_CAP = 1024 * 1024;
const HINT_OUTPUT_BYTES = 64 * 1024 * 1024;
/** New files here are never a result (as in the sandbox's own tracking). */
const NEVER_NEW = /(^|\/)(node_modules|__pycache__)\//;
const NO_DRIVERS = ['--no-ext-diff', '--no-textconv', '--no-color', '-M', '-r', '--full-index'];

/**
 * Collects a run's result before the sandbox is wiped, deriving everything on the host.
 *
 * What changed is asked of the sandbox, as hints: a stat listing of the workspace compared with the
 * host manifest (size, mtime, type, exec bit; new files unless the project's ignore rules as read
 * on the host, or the workspace's own .gitignore files, leave them out), the live change feed, and
 * the sandbox's own git tracking where the listing fails. The union is read out as one tar stream
 * of exactly those paths, produced by a command the host chose and parsed here as hostile input
 * (only the names asked for, only files and symlinks, sizes capped). The bytes become a result commit in the host object store on top of the host's
 * own baseline, and the file list, modes, binary flags, renames, review flags and patch all come
 * from one host `git diff-tree` of those two commits. A change the sandbox hides from every hint
 * is missing from the result; nothing can be in the result that the host did not read and show.
 */
export async function collectResult(shell: WorkspaceShell, opts: CollectOptions): Promise<CollectedResult> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  // git starts while the sandbox is asked (it is on the run's critical path).
  const importing = opts.repo.importer();
  try {
    return await collectInto(shell, layout, opts, await importing);
  } catch (err) {
    (await importing.catch(() => undefined))?.abort(); // an import that failed has nothing to abort
    throw err;
  }
}

/**
 * The paths that may have changed: the sandbox's stat listing (or its git tracking where that fails)
 * and the live hints, less unsafe paths (listed in `skipped`) and new files the project's rules or
 * the workspace's own .gitignore files leave out.
 */
async function changeCandidates(shell: WorkspaceShell, layout: WorkspaceLayout, opts: CollectOptions, manifest: Map<string, ManifestFile>, skipped: StoredResult['skipped']): Promise<Set<string>> {
  const candidates = new Set<string>();
  /** New files only the listing or the live feed proposed (checked against the workspace's .gitignore below). */
  const newFromOthers = new Set<string>();
  const consider = (p: string, fromGit: boolean) => {
    const reason = unsafePathReason(p);
    if (reason) {
      if (skipped.length < 1000) skipped.push({ path: p.slice(0, 300), reason });
      return;
    }
    // New files: proposed by the sandbox's git tracking (its .gitignore), or by the others when
    // the project's own rules, read on the host, do not leave them out.
    if (!manifest.has(p) && (NEVER_NEW.test(p) || (!fromGit && opts.isIgnored?.(p)))) return;
    if (!fromGit && !manifest.has(p) && !candidates.has(p)) newFromOthers.add(p);
    candidates.add(p);
  };
  // The stat listing is the main hint (one `find`, far cheaper than the sandbox's `git add -A`
  // over the whole tree); the sandbox's git tracking stands in where the listing fails.
  const fromStat = await statHint(shell, layout, manifest);
  if (fromStat) for (const p of fromStat) consider(p, false);
  else for (const p of await gitHint(shell, layout)) consider(p, true);
  for (const p of opts.hints ?? []) consider(p, false);
  // The workspace's own .gitignore files (a venv's `*`, caches) may only leave new files out:
  // trusting them can hide a change from the result, never add one.
  for (const p of await ignoredInWorkspace(shell, layout, [...newFromOthers])) candidates.delete(p);
  return candidates;
}

async function collectInto(shell: WorkspaceShell, layout: WorkspaceLayout, opts: CollectOptions, importer: FastImport): Promise<CollectedResult> {
  const manifest = new Map(opts.manifest.map((f) => [f.path, f]));
  const skipped: StoredResult['skipped'] = [];

  const candidates = await changeCandidates(shell, layout, opts, manifest, skipped);

  // Read out exactly the candidates; the archive is hostile input.
  const wanted = [...candidates].sort();
  const maxFileBytes = opts.maxFileBytes ?? 50 * 1024 * 1024;
  const maxResultBytes = opts.maxResultBytes ?? 512 * 1024 * 1024;
  let files = new Map<string, { kind: 'file' | 'symlink'; exec: boolean; content: Buffer }>();
  const unreadable = new Set<string>();
  if (wanted.length) {
    // Not queued behind the sandbox's own baseline: the host's result never depends on it.
    const res = await shell.run({
      argv: ['tar', '-c', '-f', '-', '--format=pax', '--null', '--no-recursion', '--ignore-failed-read', '--verbatim-files-from', '-C', layout.workDir, '-T', '-'],
      stdin: `${wanted.join('\0')}\0`,
      env: { ...layout.env, LC_ALL: 'C' },
      maxOutputBytes: maxResultBytes + 16 * 1024 * 1024,
      timeoutMs: 10 * 60_000,
    });
    if (res.truncated || res.stdout.length > maxResultBytes + 16 * 1024 * 1024) {
      throw new LimitError('SANDBOX_FAILED', 'result-bytes', maxResultBytes, `The changed files exceed the ${maxResultBytes}-byte result cap; add large generated files to .gitignore and retry.`);
    }
    if (res.timedOut) throw new AirlockError('COMMAND_TIMEOUT', 'Reading the changed files out of the sandbox timed out; retry.');
    const parsed = parseHostileTar(res.stdout, { wanted: new Set(wanted), maxFileBytes });
    files = parsed.files;
    // A name below a symlink was read through it (inside the sandbox): never part of a result.
    for (const p of wanted) {
      const parts = p.split('/');
      for (let i = 1; i < parts.length; i++) {
        if (files.get(parts.slice(0, i).join('/'))?.kind !== 'symlink') continue;
        files.delete(p);
        unreadable.add(p);
        if (skipped.length < 1000) skipped.push({ path: p, reason: 'inside a symlinked folder' });
        break;
      }
    }
    for (const s of parsed.skipped) {
      if (candidates.has(s.path)) unreadable.add(s.path);
      if (skipped.length < 1000) skipped.push(s);
    }
  }

  // Repositories planted in the result (with the project's own files): their config is refused
  // outright (docs/architecture.md §11, "Git-steering files").
  const planted = plantedGitDirs([...manifest.keys(), ...files.keys()].filter((p) => files.has(p) || !candidates.has(p) || unreadable.has(p)));

  // The result tree on the host: baseline + what was read. Unchanged bytes and mode: no change.
  const ops: Array<{ path: string; mode: GitMode; mark: number } | { path: string; delete: true }> = [];
  const linkTargets = new Map<string, string>();
  for (const p of wanted) {
    if (unreadable.has(p)) continue;
    const f = files.get(p);
    const base = manifest.get(p);
    if (!f) {
      if (base) ops.push({ path: p, delete: true });
      continue;
    }
    const mode: GitMode = f.kind === 'symlink' ? '120000' : f.exec ? '100755' : '100644';
    if (base && base.mode === mode && base.oid === blobOid(f.content)) continue;
    // Left out and listed: the base (if any) stays as it is.
    const refusal = plantedRepoRefusal(p, planted) ?? (f.kind === 'symlink' ? unsafeSymlinkReason(p) : undefined);
    if (refusal) {
      if (skipped.length < 1000) skipped.push({ path: p, reason: refusal });
      continue;
    }
    if (f.kind === 'symlink') linkTargets.set(p, f.content.toString('utf8'));
    ops.push({ path: p, mode, mark: await importer.blob(f.content) });
  }
  const ident = `${BASELINE_IDENT.name} <${BASELINE_IDENT.email}> ${BASELINE_IDENT.epoch} +0000`;
  const resultCommit = await importer.commit({ ref: opts.ref ?? 'refs/airlock/result', ident, message: 'airlock result\n', parent: opts.baseCommit }, ops);

  // Sizes of what the host holds: base sizes from its manifest, new ones from the bytes it read.
  const sizes = new Map<string, number>();
  for (const f of manifest.values()) sizes.set(f.oid, f.size);
  for (const f of files.values()) sizes.set(blobOid(f.content), f.content.length);
  const deleted = new Set(ops.filter((o) => 'delete' in o).map((o) => o.path));
  const tree = new Set([...manifest.keys()].filter((p) => !deleted.has(p)));
  for (const o of ops) if (!('delete' in o)) tree.add(o.path);
  return describeResult(opts.repo, opts.baseCommit, resultCommit, { sizes, linkTargets, tree, skipped, ...(opts.headCommit ? { headCommit: opts.headCommit } : {}), ...(opts.diffCapBytes ? { diffCapBytes: opts.diffCapBytes } : {}) });
}

/** What the host knows about a result tree beyond its commit, for `describeResult`. */
export interface ResultFacts {
  /** Sizes of the blobs on both sides (a missing one reads as 0). */
  sizes: Map<string, number>;
  /** Targets of the result's new symlinks (review flags). */
  linkTargets: Map<string, string>;
  /** Every path of the result tree (name clashes). */
  tree: Set<string>;
  skipped: StoredResult['skipped'];
  headCommit?: string;
  diffCapBytes?: number;
}

/**
 * The stored result of two commits of a host object store: the file list, modes, binary flags,
 * renames, review flags and patch, all from one host `git diff-tree` (docs/architecture.md §11).
 */
export async function describeResult(repo: HostRepo, baseCommit: string, resultCommit: string, facts: ResultFacts): Promise<CollectedResult> {
  // One diff for listing and patch: NUL-terminated raw and numstat records, an empty record, then
  // the patch (paths are never empty, so the first empty record is the boundary).
  const out = await repo.git(['diff-tree', ...NO_DRIVERS, '--raw', '--numstat', '-p', '--binary', '-z', '--no-abbrev', baseCommit, resultCommit], undefined, 'diffing the result');
  const boundary = out.indexOf('\0\0');
  const raw = parseRawNumstat(boundary < 0 ? out : out.subarray(0, boundary + 1));
  const patch = boundary < 0 ? Buffer.alloc(0) : out.subarray(boundary + 2);
  const sections = splitHostPatch(patch, raw);

  // Names that one case-insensitive or normalising file system would see as one file.
  const collisions = new Map<string, string[]>();
  for (const group of foldCollisions(facts.tree).values()) for (const p of group) collisions.set(p, group.filter((q) => q !== p));
  const planted = plantedGitDirs(facts.tree);

  const cap = facts.diffCapBytes ?? DEFAULT_DIFF_CAP;
  const changes: ResultChange[] = raw.map((c, i) => {
    const size = c.newOid === ZERO_OID ? 0 : (facts.sizes.get(c.newOid) ?? 0);
    const oldSize = c.oldOid === ZERO_OID ? 0 : (facts.sizes.get(c.oldOid) ?? 0);
    const warnings: string[] = [];
    const clash = collidingPrefix(c.path, collisions);
    if (clash) warnings.push(`name clash: ${clash} differ only in letter case or Unicode form (one file on macOS and Windows)`);
    const repo = plantedRepoFlag(c.path, planted);
    if (repo) warnings.push(repo);
    const target = facts.linkTargets.get(c.path);
    if (c.newMode === '120000' && target !== undefined && symlinkLeavesProject(c.path, target)) warnings.push(`symlink pointing outside the project (${target.slice(0, 200)})`);
    return { ...c, size, oldSize, tooLarge: size > cap || oldSize > cap, ...(warnings.length ? { warnings } : {}), section: sections[i] as ResultChange['section'] };
  });
  const result: StoredResult = {
    version: 2,
    baseCommit,
    resultCommit,
    ...(facts.headCommit ? { headCommit: facts.headCommit } : {}),
    patchSha256: sha256Hex(patch),
    changes,
    skipped: facts.skipped,
  };
  return { result, patch };
}

function collidingPrefix(p: string, collisions: Map<string, string[]>): string | undefined {
  const parts = p.split('/');
  for (let i = 1; i <= parts.length; i++) {
    const sub = parts.slice(0, i).join('/');
    const others = collisions.get(sub);
    if (others?.length) return [sub, ...others].join(' and ');
  }
  return undefined;
}

/** Hint 1: the sandbox's own git tracking (may be rewritten by the agent; failures are ignored). */
async function gitHint(shell: WorkspaceShell, layout: WorkspaceLayout): Promise<string[]> {
  try {
    const res = await serialized(shell, () => refreshedGit(shell, layout, ['diff', '--cached', '--name-only', '--no-renames', '-z', BASELINE_REF], 'listing changed paths'));
    return res.stdout.subarray(0, HINT_OUTPUT_BYTES).toString('utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

/** Which of `paths` the workspace's ignore rules leave out (`git check-ignore`; failures: none). */
async function ignoredInWorkspace(shell: WorkspaceShell, layout: WorkspaceLayout, paths: string[]): Promise<string[]> {
  if (!paths.length) return [];
  try {
    const res = await shell.run({
      argv: gitArgv(layout, ['check-ignore', '--no-index', '-z', '--stdin']),
      env: helperGitEnv(layout),
      as: 'helper',
      stdin: `${paths.join('\0')}\0`,
      maxOutputBytes: HINT_OUTPUT_BYTES,
      timeoutMs: 5 * 60_000,
    });
    if (res.exitCode !== 0) return [];
    return res.stdout.toString('utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

/**
 * Hint 2: a stat listing of the workspace against the host manifest. A baseline file whose size,
 * mtime, type or exec bit differs, or that is gone, is a candidate, and so is every file not in
 * the baseline (the agent can hide an edit only by restoring size and mtime, a new file only by
 * leaving it out of the listing — then the change is simply not part of the result).
 */
async function statHint(shell: WorkspaceShell, layout: WorkspaceLayout, manifest: Map<string, ManifestFile>): Promise<string[] | undefined> {
  // Dependency trees are skipped (an install adds 100k files that are never a result) unless the
  // project itself carried one in.
  const tracksDeps = [...manifest.keys()].some((p) => /(^|\/)node_modules\//.test(p));
  const prune = tracksDeps ? '-name .git' : '\\( -name node_modules -o -name .git \\)';
  const script = `cd "$1" && exec find . ${prune} -prune -o \\( -type f -o -type l \\) -printf '%y %m %s %T@ %P\\0'`;
  let out: Buffer;
  try {
    const res = await shell.run({ argv: ['sh', '-c', script, 'sh', layout.workDir], env: { ...layout.env, LC_ALL: 'C' }, maxOutputBytes: HINT_OUTPUT_BYTES, timeoutMs: 5 * 60_000 });
    // A file vanishing mid-listing makes find exit 1 with a usable listing; no output at all
    // (no find, no -printf) or a cut one means "ask git instead".
    if (res.truncated || (res.exitCode !== 0 && !res.stdout.length)) return undefined;
    out = res.stdout;
  } catch {
    return undefined;
  }
  const seen = new Set<string>();
  const changed: string[] = [];
  for (const rec of out.toString('utf8').split('\0')) {
    const m = /^([fl]) ([0-7]+) (\d+) (\d+)(?:\.(\d+))? (.+)$/s.exec(rec);
    if (!m) continue;
    const p = m[6] as string;
    // Files copied in carry whole-second mtimes from the tar; any write since leaves a fraction
    // (on file systems with sub-second times), even within the same second as the copy.
    const touched = /[1-9]/.test(m[5] ?? '');
    const base = manifest.get(p);
    if (!base) {
      changed.push(p); // a new file: the caller decides whether it may be proposed
      continue;
    }
    seen.add(p);
    const isLink = m[1] === 'l';
    const exec = (parseInt(m[2] as string, 8) & 0o100) !== 0;
    const same = isLink
      ? base.mode === '120000' && Number(m[3]) === base.size
      : base.mode !== '120000' && (base.mode === '100755') === exec && Number(m[3]) === base.size && !touched && (base.mtime === undefined || Number(m[4]) === base.mtime);
    if (!same) changed.push(p);
  }
  for (const p of manifest.keys()) if (!seen.has(p) && (tracksDeps || !/(^|\/)node_modules\//.test(p))) changed.push(p);
  return changed;
}

/** `a/x` as git writes it in a `diff --git` line (C-quoted only when the name needs it). */
function headerName(prefix: string, p: string): string {
  const full = prefix + p;
  return /[\x00-\x1f\x7f"\\]/.test(full) ? quoteC(full) : full;
}

/**
 * Byte ranges of each change's section in a patch the host itself produced from the same diff:
 * sections come in the same order as the raw listing; a type change (file ↔ symlink) is two
 * sections with one header. Names are matched against the listing, never read from the text.
 */
function splitHostPatch(patch: Buffer, raw: Array<Pick<FileChange, 'path' | 'oldPath'>>): Array<ResultChange['section']> {
  const starts: number[] = [];
  const marker = Buffer.from('diff --git ');
  if (patch.subarray(0, marker.length).equals(marker)) starts.push(0);
  for (let at = patch.indexOf(`\n${marker.toString()}`); at >= 0; at = patch.indexOf(`\n${marker.toString()}`, at + 1)) starts.push(at + 1);
  starts.push(patch.length);
  const headerAt = (k: number) => {
    const s = starts[k] as number;
    const nl = patch.indexOf(0x0a, s);
    return patch.subarray(s, nl < 0 ? patch.length : nl).toString('utf8');
  };
  const out: Array<ResultChange['section']> = [];
  let k = 0;
  for (const c of raw) {
    const expected = `diff --git ${headerName('a/', c.oldPath ?? c.path)} ${headerName('b/', c.path)}`;
    if (k >= starts.length - 1 || headerAt(k) !== expected) {
      throw new AirlockError('INTERNAL', `The result patch does not line up with the result listing at ${c.path}; please report this.`);
    }
    const from = starts[k] as number;
    k++;
    while (k < starts.length - 1 && headerAt(k) === expected) k++;
    const to = starts[k] as number;
    out.push({ offset: from, length: to - from, sha256: sha256Hex(patch.subarray(from, to)) });
  }
  if (k !== starts.length - 1) throw new AirlockError('INTERNAL', 'The result patch has sections the result listing does not; please report this.');
  return out;
}

/** The part of a stored result patch for these changes, in result order. */
export function sectionsOf(patch: Buffer, changes: ResultChange[]): Buffer {
  return Buffer.concat(changes.map((c) => patch.subarray(c.section.offset, c.section.offset + c.section.length)));
}

/**
 * The changes of a result that `files` name (new or old path of each); all of them without a
 * selection. A name that is not part of the result is an error: nothing unlisted is applied.
 */
export function selectChanges(result: StoredResult, files?: string[]): ResultChange[] {
  if (!files) return result.changes;
  const wanted = new Set(files);
  const known = new Set(result.changes.flatMap((c) => [c.path, c.oldPath].filter((p): p is string => !!p)));
  const unknown = files.filter((f) => !known.has(f));
  if (unknown.length) throw new AirlockError('INVALID_INPUT', `Not part of the result: ${unknown.slice(0, 20).join(', ')}. Pick files from the run's changed-file list.`);
  return result.changes.filter((c) => wanted.has(c.path) || (c.oldPath !== undefined && wanted.has(c.oldPath)));
}
