import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gitModeOf } from './git-objects';
import type { ManifestFile, ProjectSnapshot, SnapshotEntry } from './snapshot';

/**
 * A project base: the project as Airlock last copied it in, kept on the engine in a volume only the
 * host side writes, with the host's own record of what it holds (docs/architecture.md §11, "A
 * project's last copy"). This file is the host half: the record, where it lives, and the plan of
 * what a new run must stream on top of it. The engine half is core/sandbox/docker/project-base-volumes.ts.
 */

/**
 * The listing that detects a changed base: every non-folder entry of `dir` and its change time, as
 * `path NUL ctime NUL` pairs. Any write, chmod, rename or replacement of a file changes its ctime,
 * which userland cannot set back; the host compares the listing with the one the writer printed.
 */
export function ctimeListingScript(dir: string): string {
  return `cd ${dir} && find . -mindepth 1 ! -type d -printf '%P\\0%C@\\0'`;
}

/** Parses a `ctimeListingScript` output into path → ctime (a trailing partial pair is dropped). */
export function parseCtimeListing(out: Buffer | string): Map<string, string> {
  const parts = out.toString('utf8').split('\0');
  parts.pop(); // what follows the last NUL: nothing, or a cut-off field
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < parts.length; i += 2) map.set(parts[i] as string, parts[i + 1] as string);
  return map;
}

/** Host stat of a file when the base was read: what lets the next scan skip reading it. */
export interface BaseStat {
  size: number;
  mtimeMs: number;
  ctimeMs: number;
  ino: number;
  /** Permission bits. */
  perm: number;
}

/** One file (or symlink) of the base, as its tree and the host's manifest hold it. */
export interface BaseFile extends ManifestFile {
  /** Absent when the file was written too close to the scan to trust its stat (re-read next time). */
  stat?: BaseStat;
  /** Its change time in the base volume (`find -printf %C@`) right after the writer wrote it. */
  ctime: string;
}

export interface BaseDir {
  path: string;
  /** Permission bits as written (the tar's `mode | 0o700`). */
  perm: number;
}

/** 2: per-file change times (the check runs beside the copy), and the spool left in `state/` by the writer. */
export const BASE_RECORD_VERSION = 2;

/** What the host knows of one base. Written by the host only; checked against the engine at every use. */
export interface BaseRecord {
  version: typeof BASE_RECORD_VERSION;
  /** sha256 of the project's real path and the snapshot variant: one base per key. */
  key: string;
  projectDir: string;
  /** The engine volume holding `tree/` (the files) and `state/baseline.git` (the sandbox's baseline). */
  volume: string;
  /** The volume's `CreatedAt` as the engine reported it right after creating it: a volume made again under the same name does not match. */
  volumeCreatedAt: string;
  /**
   * A random value the host labelled the volume with when it made it: `CreatedAt` has whole seconds, so a
   * volume made again under the same name within that second would match it; this would not.
   */
  nonce?: string;
  /** Where the engine keeps the volume's data (its `Mountpoint`); overlay mounts name it. */
  mountpoint: string;
  /** The engine it lives on (the endpoint as displayed); another engine's base is never looked up. */
  engine: string;
  installation?: string;
  createdAt: string;
  /** The baseline commit of the base's tree (same identity and message as every run's baseline) and its tree. */
  commit: string;
  tree: string;
  files: BaseFile[];
  dirs: BaseDir[];
  /** The tree id of every folder of the base ('' the root), computed on the host: a run hashes only the folders that changed. */
  trees: Record<string, string>;
  /** sha256 of the canonical manifest (files, folders, trees): what a record altered on disk fails. */
  manifestDigest: string;
}

/** The key of a project's base: its real path plus what changes the copy (snapshot options). */
export function baseKey(projectDir: string, variant = ''): string {
  return createHash('sha256').update(path.resolve(projectDir)).update('\0').update(variant).digest('hex');
}

/** The digest over what the base holds: files (path, mode, id, mtime, change time in the volume) and folders (path, mode), in order. */
export function manifestDigest(files: readonly BaseFile[], dirs: readonly BaseDir[], trees: Readonly<Record<string, string>> = {}): string {
  const h = createHash('sha256');
  for (const k of Object.keys(trees).sort()) h.update(`t\0${k}\0${trees[k]}\n`);
  for (const f of files) h.update(`f\0${f.path}\0${f.mode}\0${f.oid}\0${f.mtime ?? ''}\0${f.ctime}\n`);
  for (const d of dirs) h.update(`d\0${d.path}\0${d.perm.toString(8)}\n`);
  return h.digest('hex');
}

/** Where the host keeps its records and object stores of bases (`<AIRLOCK_HOME>/bases`). */
export class BaseStore {
  /**
   * Records already read and checked, by key, with the bytes they were read from (or written as): a
   * run's start compares the file's bytes (about a millisecond for a 10k-file record) instead of parsing
   * and digesting it again (tens of ms on the scan's thread). Any other content is read and checked afresh.
   */
  private readonly known = new Map<string, { bytes: Buffer; rec: BaseRecord }>();

  constructor(readonly dir: string) {}

  private folder(key: string): string {
    return path.join(this.dir, key);
  }

  /** The host object store that holds the base's blobs (runs on it borrow from it until compacted). */
  objectsDir(key: string, volume: string): string {
    return path.join(this.folder(key), `${volume}.git`);
  }

  /** The record of `key`, if there is one whose content matches its own digest. Callers must not change it. */
  async read(key: string): Promise<BaseRecord | undefined> {
    let bytes: Buffer;
    try {
      bytes = await readFile(path.join(this.folder(key), 'record.json'));
    } catch {
      this.known.delete(key);
      return undefined;
    }
    const hit = this.known.get(key);
    if (hit?.bytes.equals(bytes)) return hit.rec;
    let rec: BaseRecord;
    try {
      rec = JSON.parse(bytes.toString('utf8')) as BaseRecord;
    } catch {
      return undefined;
    }
    if (rec.version !== BASE_RECORD_VERSION || rec.key !== key) return undefined;
    // A record whose manifest was altered on disk is not used (its digest is what the volume is labelled with).
    if (!rec.trees || manifestDigest(rec.files, rec.dirs, rec.trees) !== rec.manifestDigest) return undefined;
    this.known.set(key, { bytes, rec });
    return rec;
  }

  async write(rec: BaseRecord): Promise<void> {
    await mkdir(this.folder(rec.key), { recursive: true });
    const file = path.join(this.folder(rec.key), 'record.json');
    const bytes = Buffer.from(JSON.stringify(rec));
    await writeFile(`${file}.tmp`, bytes);
    await rename(`${file}.tmp`, file);
    this.known.set(rec.key, { bytes, rec });
  }

  async list(): Promise<BaseRecord[]> {
    const keys = await readdir(this.dir).catch(() => [] as string[]);
    const out: BaseRecord[] = [];
    for (const k of keys) {
      const rec = await this.read(k);
      if (rec) out.push(rec);
    }
    return out;
  }

  /** Object stores under `key` other than `keep`'s (a replaced base's), and the record when `keep` is absent. */
  async removeStores(key: string, keep?: string): Promise<void> {
    const dir = this.folder(key);
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (name.endsWith('.git') && name !== `${keep}.git`) await rm(path.join(dir, name), { recursive: true, force: true });
    }
    if (!keep) {
      this.known.delete(key);
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/** A stat is trusted only when the file was last written well before the scan (git's racy-entry rule). */
export const RACY_MS = 2_000;

/** The stat to record for a file read at `scanStartedMs`, or undefined when it is too fresh to trust. */
export function trustedStat(e: SnapshotEntry, scanStartedMs: number, racyMs = RACY_MS): BaseStat | undefined {
  if (e.ctimeMs === undefined || e.ino === undefined || e.content) return undefined;
  if (e.mtimeMs > scanStartedMs - racyMs || e.ctimeMs > scanStartedMs - racyMs) return undefined;
  return { size: e.size, mtimeMs: e.mtimeMs, ctimeMs: e.ctimeMs, ino: e.ino, perm: e.mode };
}

function sameStat(s: BaseStat | undefined, e: SnapshotEntry): boolean {
  return !!s && !e.content && s.size === e.size && s.mtimeMs === e.mtimeMs && s.ctimeMs === e.ctimeMs && s.ino === e.ino && s.perm === e.mode;
}

const byPath = new WeakMap<readonly object[], Map<string, unknown>>();

/** A record's files or folders by path, built once per list (records are not changed once read). */
function indexed<T extends { path: string }>(list: readonly T[]): Map<string, T> {
  let ix = byPath.get(list) as Map<string, T> | undefined;
  if (!ix) byPath.set(list, (ix = new Map(list.map((x) => [x.path, x]))));
  return ix;
}

/** What a run started from a base streams and removes. */
export interface DeltaPlan {
  /** Base files the project still has, byte for byte (by the host's stat): neither read nor sent. */
  reuse: BaseFile[];
  /** Entries to stream (files and symlinks that differ or are new; folders that are new or changed mode). */
  stream: SnapshotEntry[];
  /** Paths to remove before the stream (gone from the project, or changed type); folders go whole. */
  deletions: string[];
}

/**
 * Compares a new scan with the base: a file whose host stat (size, mtime, ctime, inode, mode) equals
 * the one recorded when the base was written is the base's; every other file is read and streamed
 * (its content may still equal the base's: then the stream rewrites the same bytes). Nothing is
 * trusted from the engine here; the record is the host's.
 */
export function planDelta(snapshot: Pick<ProjectSnapshot, 'entries'>, base: Pick<BaseRecord, 'files' | 'dirs'>): DeltaPlan {
  const baseFiles = indexed(base.files);
  const baseDirs = indexed(base.dirs);
  const present = new Set<string>();
  const reuse: BaseFile[] = [];
  const stream: SnapshotEntry[] = [];
  const deletions: string[] = [];
  for (const e of snapshot.entries) {
    present.add(e.path);
    const bf = baseFiles.get(e.path);
    const bd = baseDirs.get(e.path);
    if (e.type === 'dir') {
      if (bf) deletions.push(e.path);
      if (!bd || bd.perm !== (e.mode | 0o700)) stream.push(e);
      continue;
    }
    if (bd) deletions.push(e.path);
    if (bf) {
      const wasLink = bf.mode === '120000';
      if (wasLink !== (e.type === 'symlink')) deletions.push(e.path);
      else if (sameStat(bf.stat, e) && (e.type === 'symlink' || bf.mode === gitModeOf(e.mode, false))) {
        reuse.push(bf);
        continue;
      }
    }
    stream.push(e);
  }
  for (const d of base.dirs) if (!present.has(d.path)) deletions.push(d.path);
  for (const f of base.files) if (!present.has(f.path)) deletions.push(f.path);
  return { reuse, stream, deletions: pruneNested(deletions) };
}

/**
 * Compares the workspace's listing, taken as the copy runs, with the base as its writer left it
 * (docs/architecture.md §11, "Trust"): every base file the plan keeps must be there with the change
 * time the writer saw, and nothing may be there that is neither the base's nor the plan's (a file
 * added to the volume). Paths the plan streams or removes are skipped: the copy is changing them.
 * Returns what differs, or undefined when the base is as written.
 */
export function checkBaseListing(listing: Map<string, string>, base: Pick<BaseRecord, 'files'>, plan: Pick<DeltaPlan, 'stream' | 'deletions'>): string | undefined {
  const streamed = new Set(plan.stream.map((e) => e.path));
  const removed = new Set(plan.deletions);
  const underRemoved = (p: string) => {
    if (removed.has(p)) return true;
    for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) if (removed.has(p.slice(0, i))) return true;
    return false;
  };
  const known = indexed(base.files);
  const anyRemoved = removed.size > 0;
  for (const f of base.files) {
    if (streamed.has(f.path) || (anyRemoved && underRemoved(f.path))) continue;
    const got = listing.get(f.path);
    if (got === undefined) return `${f.path} is missing`;
    if (got !== f.ctime) return `${f.path} was changed (change time ${got}, written at ${f.ctime})`;
  }
  for (const p of listing.keys()) {
    if (!known.has(p) && !streamed.has(p) && !(anyRemoved && underRemoved(p))) return `${p} was added`;
  }
  return undefined;
}

/** Every folder a change touches (the folders above each changed path, '' the root): their trees are hashed again. */
export function changedFolders(paths: Iterable<string>): Set<string> {
  const out = new Set<string>();
  for (const p of paths) {
    out.add('');
    for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) out.add(p.slice(0, i));
  }
  return out;
}

/** Drops paths inside a folder that is itself removed (`rm -rf` takes them), keeps order stable. */
function pruneNested(paths: string[]): string[] {
  const sorted = [...new Set(paths)].sort();
  const out: string[] = [];
  for (const p of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && p.startsWith(`${last}/`)) continue;
    out.push(p);
  }
  return out;
}

