import { ZERO_OID, type GitMode } from './git-objects';
import { describeResult, type CollectedResult, type StoredResult } from './collect';
import type { HostRepo } from './host-repo';
import type { OverlayFile } from './overlay-snapshot';
import { BASELINE_IDENT } from './workspace-shell';

/**
 * A follow-up turn's two results (docs/architecture.md §15). The turn's own change is collected as
 * any run's, against its baseline: the project plus the previous result. The thread's total is
 * that same result tree against a *thread base*: this baseline with the previous total undone, so
 * the project as the thread's first run read it (wherever the project has not moved since). Both
 * live in the run's own host store; the bytes of earlier turns come from the parent run's host
 * store, never from a sandbox.
 */

/** A previous turn's result as kept on the host: its listing and its object store. */
export interface PreviousResult {
  result: StoredResult;
  repo: HostRepo;
}

/** The previous result as files to lay over the project (overlay-snapshot.ts), bytes from its store. */
export async function overlayOf(previous: PreviousResult): Promise<OverlayFile[]> {
  const changes = previous.result.changes;
  const blobs = await previous.repo.readBlobs(changes.filter((c) => c.newOid !== ZERO_OID).map((c) => c.newOid));
  const files: OverlayFile[] = [];
  for (const c of changes) {
    if (c.oldPath && c.oldPath !== c.path) files.push({ path: c.oldPath, delete: true });
    if (c.newOid === ZERO_OID) files.push({ path: c.path, delete: true });
    else files.push({ path: c.path, mode: c.newMode as GitMode, content: blobs.get(c.newOid) as Buffer });
  }
  return files;
}

/**
 * Writes the thread base into `repo` (on top of this turn's baseline `baseCommit`, undoing the
 * previous total) and describes the thread's total: thread base → `own.resultCommit`.
 */
export async function collectThreadResult(repo: HostRepo, own: StoredResult, previous: PreviousResult): Promise<CollectedResult> {
  const changes = previous.result.changes;
  const oldBlobs = await previous.repo.readBlobs(changes.filter((c) => c.oldOid !== ZERO_OID).map((c) => c.oldOid));
  const importer = await repo.importer();
  const ops: Array<{ path: string; mode: GitMode; mark: number } | { path: string; delete: true }> = [];
  try {
    for (const c of changes) {
      const oldPath = c.oldPath ?? c.path;
      if (c.newOid !== ZERO_OID && (oldPath !== c.path || c.oldOid === ZERO_OID)) ops.push({ path: c.path, delete: true });
      if (c.oldOid !== ZERO_OID) ops.push({ path: oldPath, mode: c.oldMode as GitMode, mark: await importer.blob(oldBlobs.get(c.oldOid) as Buffer) });
    }
  } catch (err) {
    importer.abort();
    throw err;
  }
  const ident = `${BASELINE_IDENT.name} <${BASELINE_IDENT.email}> ${BASELINE_IDENT.epoch} +0000`;
  const threadBase = await importer.commit({ ref: 'refs/airlock/thread-base', ident, message: 'airlock thread base\n', parent: own.baseCommit }, ops);
  const [base, result] = await Promise.all([listTree(repo, threadBase), listTree(repo, own.resultCommit)]);
  const sizes = new Map([...base.sizes, ...result.sizes]);
  const links = await repo.readBlobs(result.links.values());
  const linkTargets = new Map([...result.links].map(([p, oid]) => [p, (links.get(oid) as Buffer).toString('utf8')] as const));
  const headCommit = previous.result.headCommit ?? own.headCommit;
  return describeResult(repo, threadBase, own.resultCommit, { sizes, linkTargets, tree: result.paths, skipped: own.skipped, ...(headCommit ? { headCommit } : {}) });
}

/** Every path of a commit's tree, its blob sizes and its symlinks (`git ls-tree -r -l -z`). */
async function listTree(repo: HostRepo, commit: string): Promise<{ paths: Set<string>; sizes: Map<string, number>; links: Map<string, string> }> {
  const out = (await repo.git(['ls-tree', '-r', '-l', '-z', '--full-tree', commit], undefined, 'listing the thread result')).toString('utf8');
  const paths = new Set<string>();
  const sizes = new Map<string, number>();
  const links = new Map<string, string>();
  for (const rec of out.split('\0')) {
    const m = /^(\d+) (\w+) ([0-9a-f]{40}) +(\d+|-)\t(.+)$/s.exec(rec);
    if (!m) continue;
    const [, mode, , oid, size, p] = m as unknown as [string, string, string, string, string, string];
    paths.add(p);
    if (size !== '-') sizes.set(oid, Number(size));
    if (mode === '120000') links.set(p, oid);
  }
  return { paths, sizes, links };
}
