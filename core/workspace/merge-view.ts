import { mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { readState, writeStateAtomic } from './apply-plan';
import { assertInside } from './apply-working-tree';
import { selectChanges, type StoredResult } from './collect';
import { ZERO_OID } from './git-objects';
import type { HostGit } from './host-git';
import type { HostRepo } from './host-repo';
import { unsafePathReason } from './result-paths';
import { sha256Hex } from '../common/sha256';

export type MergeRegion = { kind: 'clean'; text: string } | { kind: 'conflict'; ours: string; base: string; theirs: string };

/** A file both the project and the run changed: its three versions and their three-way merge. */
export interface MergeViewData {
  path: string;
  base: string;
  ours: string;
  theirs: string;
  /** SHA-256 of the project's file as read: a resolution is written only while it still has it. */
  oursSha256: string;
  /** SHA-256 of the base and of the run's side (host object store): a resolution names the view it was made in. */
  baseSha256: string;
  theirsSha256: string;
  regions: MergeRegion[];
  conflicts: number;
}

interface MergeSource {
  projectDir: string;
  repo: HostRepo;
  result: StoredResult;
  path: string;
}

function utf8Text(buf: Buffer, what: string, rel: string): string {
  const text = buf.toString('utf8');
  if (buf.includes(0) || !Buffer.from(text, 'utf8').equals(buf)) {
    throw new AirlockError('INVALID_INPUT', `${what} of ${rel} is not UTF-8 text, so it cannot be merged here; resolve it in your editor (export the patch to see the run's change).`);
  }
  return text;
}

async function projectFile(projectDir: string, rel: string): Promise<{ full: string; content: Buffer; exec: boolean }> {
  const why = unsafePathReason(rel);
  if (why) throw new AirlockError('INVALID_INPUT', `${rel}: ${why}.`);
  const root = await realpath(projectDir).catch(() => {
    throw new AirlockError('NOT_FOUND', `Project folder ${projectDir} does not exist.`);
  });
  const full = path.join(root, rel);
  // The folder it is in must resolve inside the project: never read or write through a symlink out.
  await assertInside(root, path.dirname(full));
  const state = await readState(full);
  if (state.kind !== 'file') {
    throw new AirlockError('INVALID_INPUT', `${rel} is ${state.kind === 'absent' ? 'not in the project any more' : `a ${state.kind === 'symlink' ? 'symlink' : state.what} in the project`}; only a text file can be merged here. Restore it, or resolve it by hand.`);
  }
  return { full, content: state.content, exec: state.exec };
}

/**
 * The three versions of a file the run and the project both changed — base and result from the
 * run's host object store, the project's file as it is now — and `git merge-file --diff3` of
 * them, split into clean and conflicting regions. Text files the run modified or added only.
 */
export async function mergeViewOf(src: MergeSource): Promise<MergeViewData> {
  const { base, theirs } = await runSides(src);
  const mine = await projectFile(src.projectDir, src.path);
  const ours = utf8Text(mine.content, "The project's file", src.path);
  const regions = await mergeRegions(src.repo.host, ours, base.text, theirs.text);
  return {
    path: src.path,
    base: base.text,
    ours,
    theirs: theirs.text,
    oursSha256: sha256Hex(mine.content),
    baseSha256: base.sha256,
    theirsSha256: theirs.sha256,
    regions,
    conflicts: regions.filter((r) => r.kind === 'conflict').length,
  };
}

/** Base and result of a mergeable change, read from the host object store (never a sandbox's copy). */
async function runSides(src: MergeSource): Promise<{ base: { text: string; sha256: string }; theirs: { text: string; sha256: string } }> {
  const change = selectChanges(src.result, [src.path]).find((c) => c.path === src.path);
  if (!change) throw new AirlockError('INVALID_INPUT', `${src.path} is not a changed file of the run (a renamed file is named by its new path).`);
  if (change.binary || change.newOid === ZERO_OID || change.newMode === '120000' || change.oldMode === '120000') {
    throw new AirlockError('INVALID_INPUT', `${src.path} is ${change.binary ? 'binary' : change.newOid === ZERO_OID ? 'deleted by the run' : 'a symlink'}; it cannot be merged line by line. Resolve it by hand.`);
  }
  const blobs = await src.repo.readBlobs([change.oldOid, change.newOid].filter((o) => o !== ZERO_OID));
  const baseBuf = change.oldOid === ZERO_OID ? Buffer.alloc(0) : (blobs.get(change.oldOid) as Buffer);
  const theirsBuf = blobs.get(change.newOid) as Buffer;
  return {
    base: { text: utf8Text(baseBuf, 'The base', src.path), sha256: sha256Hex(baseBuf) },
    theirs: { text: utf8Text(theirsBuf, "The run's result", src.path), sha256: sha256Hex(theirsBuf) },
  };
}

/** A marker length no line of the three inputs starts with, so markers in the output are git's own. */
function markerSize(texts: string[]): number {
  let longest = 0;
  for (const t of texts) for (const m of t.matchAll(/^(<+|\|+|=+|>+)/gm)) longest = Math.max(longest, (m[1] as string).length);
  return Math.max(32, longest + 1);
}

/** `git merge-file --diff3 -p` of the three texts, as regions. */
export async function mergeRegions(git: HostGit, ours: string, base: string, theirs: string): Promise<MergeRegion[]> {
  const size = markerSize([ours, base, theirs]);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-merge-'));
  try {
    const files = ['ours', 'base', 'theirs'].map((n) => path.join(dir, n)) as [string, string, string];
    await Promise.all([writeFile(files[0], ours), writeFile(files[1], base), writeFile(files[2], theirs)]);
    const res = await git.run(['merge-file', '-p', '-q', '--diff3', `--marker-size=${size}`, '-L', 'ours', '-L', 'base', '-L', 'theirs', ...files], { cwd: dir });
    // Exit status: the number of conflicts (0–127), or an error.
    if (res.code === null || res.code > 127) throw new AirlockError('INTERNAL', `git merge-file failed: ${res.stderr.slice(0, 300)}`);
    return parseMerged(res.stdout.toString('utf8'), size);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function parseMerged(text: string, size: number): MergeRegion[] {
  const mark = (c: string) => c.repeat(size);
  const regions: MergeRegion[] = [];
  let clean = '';
  let side: 'ours' | 'base' | 'theirs' | undefined;
  let conflict = { ours: '', base: '', theirs: '' };
  // Lines keep their newline; a marker line always ends with one.
  for (const line of text.match(/[^\n]*\n|[^\n]+$/g) ?? []) {
    const bare = line.replace(/\n$/, '');
    if (bare === `${mark('<')} ours`) {
      if (clean) regions.push({ kind: 'clean', text: clean });
      clean = '';
      side = 'ours';
      conflict = { ours: '', base: '', theirs: '' };
    } else if (side && bare === `${mark('|')} base`) side = 'base';
    else if (side && bare === mark('=')) side = 'theirs';
    else if (side && bare === `${mark('>')} theirs`) {
      regions.push({ kind: 'conflict', ...conflict });
      side = undefined;
    } else if (side) conflict[side] += line;
    else clean += line;
  }
  if (clean) regions.push({ kind: 'clean', text: clean });
  return regions;
}

/**
 * Writes the user's resolution of a conflicted file into the project, only if the project's file
 * still has the digest the merge view was opened with (CONFLICT otherwise: it changed again, the
 * view must be reloaded) and, when `theirsSha256` is given, the result it is saved against is the
 * one the view showed (CONFLICT otherwise: the view was of another scope). Only a mergeable
 * changed file of the result, only a regular file inside the project; its executable bit is kept.
 */
export async function writeResolution(src: MergeSource & { content: string; oursSha256: string; theirsSha256?: string }): Promise<{ replacedSha256: string; writtenSha256: string; baseSha256: string; theirsSha256: string }> {
  const { base, theirs } = await runSides(src);
  if (src.theirsSha256 !== undefined && src.theirsSha256 !== theirs.sha256) {
    throw new AirlockError('CONFLICT', `The merge view of ${src.path} showed another result than the one being saved to (a turn's change against the whole thread's?); reload the view and resolve it again. Nothing was written.`);
  }
  const mine = await projectFile(src.projectDir, src.path);
  const now = sha256Hex(mine.content);
  if (now !== src.oursSha256) {
    throw new AirlockError('CONFLICT', `${src.path} changed again in the project since the merge view was opened; reload the view and resolve it again. Nothing was written.`);
  }
  const content = Buffer.from(src.content, 'utf8');
  await writeStateAtomic(mine.full, { kind: 'file', content, exec: mine.exec });
  return { replacedSha256: now, writtenSha256: sha256Hex(content), baseSha256: base.sha256, theirsSha256: theirs.sha256 };
}
