import { AirlockError } from '../../contracts/errors';
import { baselineCommitOid, type GitMode } from './git-objects';
import type { CommitChange, FastImport, HostRepo } from './host-repo';
import { assertBaselineRecorded, type HydrateOptions, type HydrateResult } from './hydrate';
import { changedFolders, checkBaseListing, ctimeListingScript, parseCtimeListing, planDelta, type BaseRecord, type DeltaPlan } from './project-base';
import { startSandboxRepo } from './sandbox-repo';
import type { ManifestFile, ProjectSnapshot } from './snapshot';
import { BASELINE_JS } from './helper-scripts';
import { BASELINE_IDENT, BASELINE_REF, SANDBOX_LAYOUT, gitArgv, gitEnv, helperGitEnv, nodeArgv, runChecked, serializedBarrier, trackingIndex, type WorkspaceShell } from './workspace-shell';

/** The base on the engine is not what the host wrote: the sandbox must not be used; remove the base and copy in whole. */
export class BaseMismatchError extends AirlockError {
  constructor(message: string) {
    super('SANDBOX_FAILED', message);
  }
}

const IDENT = `${BASELINE_IDENT.name} <${BASELINE_IDENT.email}> ${BASELINE_IDENT.epoch} +0000`;
/** Removals passed on the copy's command line at most (argv stays far below the kernel's limits). */
const MAX_INLINE_DELETIONS = 2_000;
/** `$1` spool, `$2` workspace, then the paths to remove; the tar of changed files on stdin. */
const COPY_SCRIPT = [
  'spool=$1; dir=$2; shift 2',
  'cd "$dir" || exit 1',
  'if [ $# -gt 0 ]; then rm -rf -- "$@" || exit 1; fi',
  'tee "$spool" | tar -x -p --no-same-owner -C "$dir" -f - && test -s "$spool"',
].join('\n');

/**
 * The agent's repository is installed at `.git` while the listing runs: its files are not the base's.
 * (A base never holds a `.git`; one put there makes the repository's install fail, `mkdir .git`.)
 */
function withoutAgentRepo(listing: Map<string, string>, repo: boolean): Map<string, string> {
  if (repo) for (const p of listing.keys()) if (p === '.git' || p.startsWith('.git/')) listing.delete(p);
  return listing;
}

export interface HydrateFromBaseOptions extends Omit<HydrateOptions, 'hostRepo'> {
  /** The run's object store, made with `borrowFrom` the base's host store (the unchanged blobs are there). */
  hostRepo?: HostRepo;
}

export interface HydrateFromBaseResult extends HydrateResult {
  /** What crossed: files streamed, paths removed, files kept from the base. */
  delta: { streamed: number; deleted: number; reused: number };
}

/**
 * The host's baseline commit: the base's tree (its objects are borrowed), the removals, then the
 * streamed files — a few lines, not one per file; it must be the commit computed from the manifest.
 */
function commitHostBaseline(importer: FastImport, base: BaseRecord, deletions: readonly string[], imported: readonly CommitChange[], expected: string): Promise<string> {
  return importer
    .commit({ ref: BASELINE_REF, ident: IDENT, message: 'airlock baseline\n', baseTree: base.tree }, [...deletions.map((p): CommitChange => ({ path: p, delete: true })), ...imported])
    .then((c) => {
      if (c !== expected) throw new AirlockError('INTERNAL', `The host's baseline (${c}) does not match the project as read (${expected}).`);
      return c;
    });
}

/** The whole manifest, in the scan's order: the base's files kept, and the streamed ones. */
function wholeManifest(snapshot: ProjectSnapshot, plan: DeltaPlan, streamedFiles: readonly ManifestFile[]): ManifestFile[] {
  const reused = new Map(plan.reuse.map((f) => [f.path, f]));
  const got = new Map(streamedFiles.map((f) => [f.path, f]));
  const manifest: ManifestFile[] = [];
  for (const e of snapshot.entries) {
    const f = reused.get(e.path) ?? got.get(e.path);
    if (f) manifest.push({ path: f.path, oid: f.oid, size: f.size, mode: f.mode, ...(f.mtime !== undefined ? { mtime: f.mtime } : {}) });
  }
  return manifest;
}

/** Base files the delta streamed again that are now left out by their content (not in the manifest). */
function droppedByContent(base: BaseRecord, plan: DeltaPlan, manifest: readonly ManifestFile[]): string[] {
  const inManifest = new Set(manifest.map((f) => f.path));
  const streamedPaths = new Set(plan.stream.filter((e) => e.type !== 'dir').map((e) => e.path));
  return base.files.filter((f) => !inManifest.has(f.path) && streamedPaths.has(f.path)).map((f) => f.path);
}

/**
 * `hydrate` for a sandbox whose workspace and state volumes are overlays of a project base
 * (core/sandbox/docker/project-base-volumes.ts `prepareBaseVolumes`). The paths the host's plan removes
 * go, and only the files that differ stream in, as one tar (docs/architecture.md §11, "A project's last
 * copy"); at the same time, before any agent process exists, the workspace's files are listed with
 * their change times, and every file kept from the base must have the one its writer recorded (any
 * write to the base since changes it): otherwise `BaseMismatchError`, and nothing of it is used. The baselines are
 * the same commits a full copy makes: the sandbox's is the base's tree with the same deletions and
 * files on top, the host's the base's blobs (borrowed) with the streamed ones; both are checked
 * against the commit the host computes from the whole manifest.
 */
export async function hydrateFromBase(shell: WorkspaceShell, snapshot: ProjectSnapshot, base: BaseRecord, opts: HydrateFromBaseOptions = {}): Promise<HydrateFromBaseResult> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  const timeoutMs = opts.timeoutMs ?? 30 * 60_000;
  const started = performance.now();
  const env = gitEnv(layout);
  // The listing and the host's importer start first: neither needs the plan.
  const listing = shell.run({ argv: ['sh', '-c', ctimeListingScript(layout.workDir)], env, timeoutMs });
  listing.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const importing = opts.hostRepo?.importer();
  importing?.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const plan = planDelta(snapshot, base);
  const spool = `${layout.stateDir}/hydrate.tar`;
  const deletionList = (paths: string[]) => paths.map((p) => `${p}\0`).join('');

  // As the agent's user (no agent process exists yet), at once: the listing that checks the base, and the
  // copy (removals first, then the changed files as one tar, spooled for the baseline into the file the
  // base's writer left). The listing skips nothing; the host ignores the paths the copy changes.
  const sandboxRepo = opts.gitHistory === undefined ? undefined : startSandboxRepo(shell, snapshot, opts.gitHistory, { layout, timeoutMs });
  // Removals ride on the copy's command line; a list too long for one goes first on its own.
  const inline = plan.deletions.length <= MAX_INLINE_DELETIONS && plan.deletions.every((p) => Buffer.byteLength(p) < 4096);
  if (!inline) {
    await runChecked(shell, { argv: ['sh', '-c', `cd ${layout.workDir} && xargs -0 -r rm -rf --`], stdin: deletionList(plan.deletions), env, timeoutMs }, 'removing the files the project no longer has');
  }
  const imported: Array<{ path: string; mode: GitMode; mark: number }> = [];
  // The same snapshot object, narrowed to what differs: exclusions by content land in its own list.
  // The copy starts at once; the first file's blob waits for the host's importer if it is still starting.
  const delta: ProjectSnapshot = Object.assign(Object.create(snapshot) as ProjectSnapshot, { entries: plan.stream });
  const streams = delta.open(opts.onProgress, importing ? async (f, content) => void imported.push({ path: f.path, mode: f.mode, mark: await (await importing).blob(content) }) : undefined);
  const copy = shell.run({
    argv: ['sh', '-c', COPY_SCRIPT, 'sh', spool, layout.workDir, ...(inline ? plan.deletions : [])],
    stdin: streams.tar,
    env,
    timeoutMs,
  });
  const [copyRun, streamed, listed] = await Promise.allSettled([copy, streams.manifest, listing]);
  // The base first: a changed one is never used, whatever else went wrong.
  const problem = listed.status === 'fulfilled' && !listed.value.timedOut ? checkBaseListing(withoutAgentRepo(parseCtimeListing(listed.value.stdout), opts.gitHistory !== undefined), base, plan) : 'its files could not be listed';
  const failed = copyRun.status === 'rejected' || copyRun.value.exitCode !== 0 || copyRun.value.timedOut || streamed.status === 'rejected';
  const importer = await importing?.catch((err: unknown) => {
    if (problem || failed) return undefined;
    throw err;
  });
  if (problem || failed) {
    importer?.abort();
    streams.tar.destroy();
  }
  if (problem) {
    throw new BaseMismatchError(`The project base on the engine (${base.volume}) is not as Airlock wrote it (${problem}). It was not used; Airlock removes it and copies the project whole.`);
  }
  if (failed) {
    if (copyRun.status === 'rejected') throw copyRun.reason;
    if (streamed.status === 'rejected') throw new AirlockError('INTERNAL', `Reading the project failed while copying it: ${(streamed.reason as Error).message}`);
    const r = copyRun.value;
    throw new AirlockError(r.timedOut ? 'COMMAND_TIMEOUT' : 'SANDBOX_FAILED', `Copying the changed files in failed (exit ${r.exitCode ?? r.signal}): ${r.stderr.toString('utf8').trim().slice(-300) || 'no error output'}.`);
  }
  const streamedFiles = streamed.status === 'fulfilled' ? streamed.value : [];

  const manifest = wholeManifest(snapshot, plan, streamedFiles);
  // A base file now left out by its content (a token written since) must not stay in the workspace.
  const dropped = droppedByContent(base, plan, manifest);
  if (dropped.length) {
    await runChecked(shell, { argv: ['sh', '-c', `cd ${layout.workDir} && xargs -0 -r rm -f --`], stdin: deletionList(dropped), env, timeoutMs }, 'removing files left out by content');
  }
  const deletions = [...plan.deletions, ...dropped];

  const repoReady = sandboxRepo?.finish();
  repoReady?.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const baselineRun = shell.run({
    argv: nodeArgv(layout, BASELINE_JS, [spool, IDENT, base.tree, '1', trackingIndex(layout), JSON.stringify(gitArgv(layout, [])), BASELINE_REF, '']),
    stdin: deletionList(deletions),
    env: helperGitEnv(layout),
    timeoutMs,
    as: 'helper',
  });
  baselineRun.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  // Only the folders the delta touched are hashed again; the others are the base's (host-computed) trees.
  const touched = changedFolders([...plan.stream.map((e) => e.path), ...deletions]);
  const expected = baselineCommitOid(manifest, IDENT, 'airlock baseline', { trees: base.trees, clean: (d) => !touched.has(d) });
  const hostBaseline = importer ? commitHostBaseline(importer, base, deletions, imported, expected) : undefined;
  hostBaseline?.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const baselineReady = serializedBarrier(shell, async () => {
    assertBaselineRecorded(await baselineRun, expected);
  });
  baselineReady.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const repoSummary = await repoReady;
  if (opts.waitForBaseline ?? true) await baselineReady;
  return {
    files: manifest.length,
    bytes: manifest.reduce((n, f) => n + f.size, 0),
    durationMs: performance.now() - started,
    baselineCommit: expected,
    baselineReady,
    excluded: snapshot.excluded,
    manifest,
    ...(hostBaseline ? { hostBaseline } : {}),
    ...(repoSummary ? { sandboxRepo: repoSummary } : {}),
    delta: { streamed: streamedFiles.length, deleted: deletions.length, reused: plan.reuse.length },
  };
}
