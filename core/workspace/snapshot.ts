import { formatBytes } from '../../contracts/format';
import { lstat as lstatCb, readFile as readFileCb, type Stats } from 'node:fs';
import { lstat, readFile, readdir, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import ignore, { type Ignore } from 'ignore';
import { AirlockError } from '../../contracts/errors';
import { exclusionByContent, exclusionByName, isGitMetadataName, type ExclusionKind } from './exclusions';
import { blobOid, gitModeOf, type GitMode } from './git-objects';
import type { HostGit } from './host-git';
import { TarWriter, type TarEntry } from './tar-writer';

export interface SnapshotOptions {
  /** gitignore-style patterns copied even when a default rule, `.gitignore` or `exclude` would drop them. */
  include?: string[];
  /** Extra gitignore-style patterns to leave out. */
  exclude?: string[];
  /** Files above this size are left out and listed (default 50 MiB). */
  maxFileBytes?: number;
  /** Honour `.gitignore` files and `.git/info/exclude` (default true). */
  respectGitignore?: boolean;
}

export interface SnapshotEntry {
  /** Project-relative, `/`-separated. */
  path: string;
  type: 'file' | 'dir' | 'symlink';
  /** Permission bits (`stat.mode & 0o7777`). */
  mode: number;
  size: number;
  mtimeMs: number;
  /**
   * The inode's change time and number as scanned: with size and mtime, what lets a project base
   * (project-base.ts) skip reading a file it already holds, as git's index does.
   */
  ctimeMs?: number;
  ino?: number;
  linkTarget?: string;
  /**
   * The file's bytes, when they come from the host's own store rather than the project folder
   * (a follow-up turn's previous result, overlay-snapshot.ts); never read from disk, never excluded.
   */
  content?: Buffer;
}

export interface ExcludedEntry {
  path: string;
  kind: ExclusionKind;
  reason: string;
}

/** One file of the baseline as the host read it: what apply and hydrate verify against. */
export interface ManifestFile {
  path: string;
  oid: string;
  size: number;
  mode: GitMode;
  /** Modification time in whole seconds as written into the tar (a stat hint at collect). */
  mtime?: number;
}

/** Receives each file as it is streamed (the host's own copy of the baseline). */
export type SnapshotFileSink = (file: ManifestFile, content: Buffer) => Promise<void>;

export interface SnapshotProgress {
  files: number;
  bytes: number;
  totalFiles: number;
  totalBytes: number;
}

export interface SnapshotStreams {
  /** The project as one tar stream (modes, symlinks, empty directories). */
  tar: Readable;
  /** Resolves when the stream has been produced: per-file oid, size and mode as read on the host. */
  manifest: Promise<ManifestFile[]>;
}

/** A read-only scan of a project, ready to be streamed into a sandbox. */
export interface ProjectSnapshot {
  projectDir: string;
  /** The host git the project was read with, whose history is read with it too (sandbox-repo.ts); none for a plain folder. */
  git: HostGit | undefined;
  /** The project folder is the top level of a git work tree. */
  isGit: boolean;
  /** `HEAD` of the project when scanned (git projects with a commit). */
  headCommit?: string;
  entries: SnapshotEntry[];
  /**
   * What stays on the host and why. Name-based exclusions are known after the scan; content-based
   * ones (tokens in `.npmrc`, private key blocks) are added while a stream is produced.
   */
  excluded: ExcludedEntry[];
  fileCount: number;
  totalBytes: number;
  /**
   * Whether a path that is not in the project (say, a file an agent created) would have been left
   * out by the project's own ignore rules as read on the host (`.gitignore` files, `exclude`).
   */
  isIgnored(rel: string): boolean;
  /** Produces the streams of `this.entries`; the project is read, never written. `onFile` sees each file's bytes as they stream. */
  open(this: ProjectSnapshot, onProgress?: (p: SnapshotProgress) => void, onFile?: SnapshotFileSink): SnapshotStreams;
}

const DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024;
const READ_AHEAD_FILES = 32;
const READ_AHEAD_BYTES = 64 * 1024 * 1024;

interface IgnoreLevel {
  prefix: string;
  ig: Ignore;
}

/** The project folder, resolved; NOT_FOUND or INVALID_INPUT when it is not an existing folder. */
async function projectRoot(projectDir: string): Promise<string> {
  const root = path.resolve(projectDir);
  let rootStat;
  try {
    rootStat = await lstat(root);
  } catch {
    throw new AirlockError('NOT_FOUND', `Project folder ${root} does not exist; choose an existing folder.`);
  }
  if (!rootStat.isDirectory()) {
    throw new AirlockError('INVALID_INPUT', `${root} is not a folder; pass the project's folder, not a file or a symlink.`);
  }
  return root;
}

/** Whether the project is a git repository's top level, and its HEAD. */
async function projectGitInfo(git: HostGit, root: string): Promise<{ isGit: boolean; headCommit: string | undefined }> {
  const top = await gitTopLevel(git, root);
  const isGit = top !== undefined && top === (await realpath(root));
  return { isGit, headCommit: isGit ? await gitHead(git, root) : undefined };
}

/** Whether the `.gitignore` levels (outermost first, a later match wins) ignore `rel`. */
function gitignored(levels: IgnoreLevel[], rel: string, isDir: boolean): boolean {
  let state = false;
  for (const level of levels) {
    const sub = level.prefix ? rel.slice(level.prefix.length + 1) : rel;
    const r = level.ig.test(isDir ? `${sub}/` : sub);
    if (r.ignored) state = true;
    else if (r.unignored) state = false;
  }
  return state;
}

/** Whether `rel` or a folder on its way is excluded by option (`extra`) or ignored by the levels met while scanning. */
function ignoredOnTheWay(rel: string, levelsByDir: ReadonlyMap<string, IgnoreLevel[]>, extra: Ignore | undefined): boolean {
  const parts = rel.split('/');
  let levels = levelsByDir.get('') ?? [];
  for (let i = 0; i < parts.length; i++) {
    const sub = parts.slice(0, i + 1).join('/');
    const isDir = i < parts.length - 1;
    if (extra?.ignores(isDir ? `${sub}/` : sub) || gitignored(levels, sub, isDir)) return true;
    if (isDir) levels = levelsByDir.get(sub) ?? levels;
  }
  return false;
}

/** A kept name's entry from its lstat (symlinks kept as links, never followed), or why it is left out. */
async function placeEntry(rel: string, full: string, st: Stats | undefined, maxFileBytes: number): Promise<{ entry: SnapshotEntry } | { excluded: ExcludedEntry }> {
  if (!st) return { excluded: { path: rel, kind: 'special', reason: 'could not be read (vanished or unreadable name)' } };
  const mode = st.mode & 0o7777;
  const times = { mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, ino: st.ino };
  if (st.isDirectory()) return { entry: { path: rel, type: 'dir', mode, size: 0, ...times } };
  if (st.isSymbolicLink()) {
    const linkTarget = await readlink(full);
    return { entry: { path: rel, type: 'symlink', mode, size: Buffer.byteLength(linkTarget), ...times, linkTarget } };
  }
  if (!st.isFile()) return { excluded: { path: rel, kind: 'special', reason: 'socket, FIFO or device file' } };
  if (st.size > maxFileBytes) {
    return { excluded: { path: rel, kind: 'too-large', reason: `too large: ${formatBytes(st.size)} exceeds the ${formatBytes(maxFileBytes)} cap (raise maxFileBytes to copy it)` } };
  }
  return { entry: { path: rel, type: 'file', mode, size: st.size, ...times } };
}

/**
 * Scans a project for copying into a sandbox. Honours nested `.gitignore` files, skips `.git`,
 * leaves out credential-looking files and files above the size cap (all listed in `excluded`),
 * keeps symlinks as symlinks (never follows one, so nothing outside the project is read).
 */
export function snapshotProject(git: HostGit, projectDir: string, opts: SnapshotOptions = {}): Promise<ProjectSnapshot> {
  return scan(git, projectDir, opts);
}

/** A folder read as plain files, never as a git project (a build context, which the engine gets as it is). */
export function snapshotFolder(dir: string, opts: SnapshotOptions = {}): Promise<ProjectSnapshot> {
  return scan(undefined, dir, opts);
}

async function scan(git: HostGit | undefined, projectDir: string, opts: SnapshotOptions): Promise<ProjectSnapshot> {
  const root = await projectRoot(projectDir);
  const maxFileBytes = opts.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  const respectGitignore = opts.respectGitignore ?? true;
  const forced = ignore().add(opts.include ?? []);
  const extra = ignore().add(opts.exclude ?? []);
  const includePrefixes = (opts.include ?? []).map((p) => p.replace(/^\//, ''));
  const entries: SnapshotEntry[] = [];
  const excluded: ExcludedEntry[] = [];

  // The project's git identity is asked for while the folders are walked (two git processes, off the walk's path).
  const gitInfo = git ? projectGitInfo(git, root) : Promise.resolve({ isGit: false, headCommit: undefined });
  gitInfo.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const rootExclude = respectGitignore ? await readText(path.join(root, '.git', 'info', 'exclude')) : '';
  // A level or option without rules decides nothing: it is not consulted (per-name matching is most of the scan's own time).
  const rootLevels: IgnoreLevel[] = hasRules(rootExclude) ? [{ prefix: '', ig: ignore().add(rootExclude) }] : [];
  const anyForced = (opts.include ?? []).length > 0;
  const anyExtra = (opts.exclude ?? []).length > 0;

  const isForced = (rel: string, isDir: boolean) => anyForced && (forced.ignores(isDir ? `${rel}/` : rel) || (isDir && forced.ignores(rel)));
  const mayForceBelow = (rel: string) => includePrefixes.some((p) => p.startsWith(`${rel}/`));

  const levelsByDir = new Map<string, IgnoreLevel[]>();
  const walk = async (dirRel: string, levels: IgnoreLevel[], onlyForced: boolean): Promise<void> => {
    const abs = dirRel ? path.join(root, dirRel) : root;
    const dirents = await readdir(abs, { withFileTypes: true });
    dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    let here = levels;
    if (respectGitignore && dirents.some((d) => d.name === '.gitignore' && d.isFile())) {
      const text = await readText(path.join(abs, '.gitignore'));
      if (hasRules(text)) here = [...levels, { prefix: dirRel, ig: ignore().add(text) }];
    }
    levelsByDir.set(dirRel, here);
    // Name-based decisions first (synchronous), then the lstat of every kept name in this folder
    // is issued at once and consumed in order: one lstat awaited at a time made the scan of a
    // 10k-file project ~700 ms, serial before the copy starts (the in-order walk is unchanged;
    // measured in bench/README.md, "workspace.hydrate").
    const absPrefix = abs.endsWith(path.sep) ? abs : `${abs}${path.sep}`;
    const decided = dirents.map((d) => {
      const rel = dirRel ? `${dirRel}/${d.name}` : d.name;
      const isDir = d.isDirectory();
      if (isGitMetadataName(d.name)) return { rel, isDir, git: true as const };
      const force = isForced(rel, isDir);
      let reason: { kind: ExclusionKind; reason: string } | undefined;
      if (!force) {
        if (onlyForced) reason = { kind: 'option', reason: 'inside an excluded folder' };
        else if (anyExtra && extra.ignores(isDir ? `${rel}/` : rel)) reason = { kind: 'option', reason: 'excluded by option' };
        else if (gitignored(here, rel, isDir)) reason = { kind: 'gitignore', reason: 'ignored by .gitignore' };
        else reason = exclusionByName(rel, isDir);
      }
      const stat = reason ? undefined : lstatOrUndefined(absPrefix + d.name);
      return { rel, isDir, reason, stat };
    });
    for (const item of decided) {
      const { rel, isDir } = item;
      if ('git' in item) {
        excluded.push({ path: isDir ? `${rel}/` : rel, kind: 'git', reason: 'git metadata (never copied; the sandbox gets a repository built on the host)' });
        continue;
      }
      const { reason } = item;
      if (reason) {
        if (isDir && mayForceBelow(rel)) {
          await walk(rel, here, true);
        } else if (!onlyForced) {
          excluded.push({ path: isDir ? `${rel}/` : rel, ...reason });
        }
        continue;
      }
      const placed = await placeEntry(rel, path.join(root, rel), await item.stat, maxFileBytes);
      if ('excluded' in placed) {
        excluded.push(placed.excluded);
        continue;
      }
      entries.push(placed.entry);
      if (placed.entry.type === 'dir') await walk(rel, here, false);
    }
  };
  await walk('', rootLevels, false);

  const { isGit, headCommit } = await gitInfo;
  const files = entries.filter((e) => e.type !== 'dir');
  const snapshot: ProjectSnapshot = {
    projectDir: root,
    git,
    isGit,
    headCommit,
    entries,
    excluded,
    fileCount: files.length,
    totalBytes: files.reduce((n, e) => n + e.size, 0),
    isIgnored: (rel) => !isForced(rel, false) && ignoredOnTheWay(rel, levelsByDir, anyExtra ? extra : undefined),
    // A method: a copy with other entries (overlay-snapshot.ts) streams its own entries.
    open(onProgress, onFile) {
      return openStreams(this, (rel) => isForced(rel, false), onProgress, onFile);
    },
  };
  return snapshot;
}

function openStreams(snapshot: ProjectSnapshot, isForced: (rel: string) => boolean, onProgress?: (p: SnapshotProgress) => void, onFile?: SnapshotFileSink): SnapshotStreams {
  const tar = new TarWriter();
  const manifest: ManifestFile[] = [];
  const progress = { files: 0, bytes: 0, totalFiles: snapshot.fileCount, totalBytes: snapshot.totalBytes };

  const addEntry = (entry: TarEntry, body?: Buffer) => tar.add(entry, body);
  const addBlob = async (file: ManifestFile, content: Buffer) => {
    manifest.push(file);
    if (onFile) await onFile(file, content);
  };

  // Reads run ahead of the writers (bounded by count and bytes): per-file read latency, not
  // throughput, is what makes a many-small-files project slow to stream.
  const entries = snapshot.entries;
  const reads = new Map<number, Promise<Buffer | undefined>>();
  let nextRead = 0;
  let aheadBytes = 0;
  const fillReads = (from: number) => {
    if (nextRead < from) nextRead = from;
    while (nextRead < entries.length && reads.size < READ_AHEAD_FILES && aheadBytes < READ_AHEAD_BYTES) {
      const idx = nextRead++;
      const e = entries[idx] as SnapshotEntry;
      if (e.type !== 'file' || e.content) continue;
      aheadBytes += e.size;
      reads.set(idx, readWhole(path.join(snapshot.projectDir, e.path)));
    }
  };
  const takeRead = async (idx: number): Promise<Buffer | undefined> => {
    fillReads(idx);
    const pending = reads.get(idx);
    const content = pending ? await pending : await readWhole(path.join(snapshot.projectDir, (entries[idx] as SnapshotEntry).path));
    if (pending) {
      reads.delete(idx);
      aheadBytes -= (entries[idx] as SnapshotEntry).size;
    }
    fillReads(idx + 1);
    return content;
  };

  const produce = async () => {
    for (let idx = 0; idx < entries.length; idx++) {
      const e = entries[idx] as SnapshotEntry;
      const mtime = new Date(e.mtimeMs);
      if (e.type === 'dir') {
        // Owner needs write/search access to extract into it; the rest of the mode is kept.
        await addEntry({ name: e.path, type: 'directory', mode: e.mode | 0o700, mtime });
        continue;
      }
      if (e.type === 'symlink') {
        const target = e.linkTarget ?? '';
        await addEntry({ name: e.path, type: 'symlink', linkname: target, mode: 0o777, mtime });
        const content = Buffer.from(target);
        await addBlob({ path: e.path, oid: blobOid(content), size: content.length, mode: '120000', mtime: Math.floor(e.mtimeMs / 1000) }, content);
      } else {
        const content = e.content ?? (await takeRead(idx));
        if (!content) {
          snapshot.excluded.push({ path: e.path, kind: 'special', reason: 'could not be read (vanished or permission denied)' });
          continue;
        }
        const secret = isForced(e.path) || e.content ? undefined : exclusionByContent(e.path, content);
        if (secret) {
          snapshot.excluded.push({ path: e.path, ...secret });
          continue;
        }
        await addEntry({ name: e.path, type: 'file', size: content.length, mode: e.mode | 0o600, mtime }, content);
        await addBlob({ path: e.path, oid: blobOid(content), size: content.length, mode: gitModeOf(e.mode, false), mtime: Math.floor(e.mtimeMs / 1000) }, content);
        progress.bytes += content.length;
      }
      progress.files += 1;
      if (onProgress && progress.files % 200 === 0) onProgress({ ...progress });
    }
    await tar.finish();
    onProgress?.({ ...progress });
    return manifest;
  };
  const manifestPromise = produce().catch((err: unknown) => {
    const error = err instanceof Error ? err : new Error(String(err));
    tar.destroy(error);
    throw error;
  });
  // Consumers that only await one stream must not see an unhandled rejection from the other path.
  manifestPromise.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  return { tar: tar.stream, manifest: manifestPromise };
}

/**
 * A file's bytes, or undefined when it cannot be read. The callback `readFile`: the promise one
 * adds FileHandle bookkeeping and thread-pool round trips per call; streaming 10k small files took
 * ~30% less time with this one, and that host CPU is taken from the sandbox's `tar -x` on the same
 * cores (bench/README.md, "workspace.hydrate").
 */
function readWhole(file: string): Promise<Buffer | undefined> {
  return new Promise((resolve) => readFileCb(file, (err, data) => resolve(err ? undefined : data)));
}

/**
 * `lstat`, or undefined when it fails. The callback form: the promise one costs the scan of a 10k-file
 * project about twice the main-thread time (measured: 130 against 70 ms for 10k files).
 */
function lstatOrUndefined(file: string): Promise<Stats | undefined> {
  return new Promise((resolve) => lstatCb(file, (err, st) => resolve(err ? undefined : st)));
}

/** Whether a gitignore-style text has a pattern (a line neither blank nor a comment). */
function hasRules(text: string): boolean {
  return text.split('\n').some((line) => line.trim() !== '' && !line.startsWith('#'));
}

async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return '';
  }
}

async function gitOut(git: HostGit, cwd: string, args: string[]): Promise<string | undefined> {
  try {
    const r = await git.run(args, { cwd });
    return r.code === 0 ? r.stdout.toString('utf8').trim() : undefined;
  } catch {
    return undefined; // no git on this machine: not a git project as far as Airlock can tell
  }
}

/** The top level of the git work tree containing `dir` (read-only git call), if any. */
export async function gitTopLevel(git: HostGit, dir: string): Promise<string | undefined> {
  const top = await gitOut(git, dir, ['rev-parse', '--show-toplevel']);
  return top ? realpath(top).catch(() => top) : undefined;
}

async function gitHead(git: HostGit, dir: string): Promise<string | undefined> {
  return gitOut(git, dir, ['rev-parse', '--verify', '-q', 'HEAD']);
}

