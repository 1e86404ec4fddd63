import { AirlockError } from '../../contracts/errors';
import { baselineCommitOid } from './git-objects';
import type { ExcludedEntry, ManifestFile, ProjectSnapshot, SnapshotProgress } from './snapshot';
import type { GitMode } from './git-objects';
import type { HostRepo } from './host-repo';
import { startSandboxRepo, type GitHistory, type SandboxRepoSummary } from './sandbox-repo';
import { BASELINE_JS, PREPARE_JS } from './helper-scripts';
import {
  BASELINE_IDENT,
  BASELINE_REF,
  SANDBOX_LAYOUT,
  baselineGitDir,
  gitArgv,
  gitEnv,
  gitProgram,
  helperGitEnv,
  nodeArgv,
  runChecked,
  serializedBarrier,
  trackingIndex,
  type WorkspaceLayout,
  type WorkspaceShell,
} from './workspace-shell';

export interface HydrateOptions {
  layout?: WorkspaceLayout;
  /** Files and bytes streamed so far (about every 200 files, and once at the end). */
  onProgress?: (p: SnapshotProgress) => void;
  /** Per-command limit inside the sandbox (default 30 min: large projects on slow disks). */
  timeoutMs?: number;
  /**
   * Resolve only once the baseline commit is recorded and verified (default true). With false,
   * hydrate resolves as soon as the copy is in place (the agent can start); `baselineReady`
   * settles later and every change query on this shell waits for it.
   */
  waitForBaseline?: boolean;
  /**
   * The run's object store on the host: the same bytes that stream in are written there as the
   * host's own baseline commit, the base every result is computed against (never the sandbox's).
   */
  hostRepo?: HostRepo;
  /**
   * Gives the agent a git repository at `<workDir>/.git` with this much of the project's history
   * (sandbox-repo.ts); without it the workspace has no `.git`. Never part of any result.
   */
  gitHistory?: GitHistory;
}

export interface HydrateResult {
  files: number;
  bytes: number;
  durationMs: number;
  /** The baseline commit inside the sandbox (`refs/heads/baseline` of the state git dir), computed on the host. */
  baselineCommit: string;
  /** Settles when the baseline is recorded and verified against `baselineCommit`. */
  baselineReady: Promise<void>;
  /** The final list of what stayed on the host (name- and content-based). */
  excluded: ExcludedEntry[];
  /** Per-file oid/size/mode as read on the host; apply checks baseline blobs against it. */
  manifest: ManifestFile[];
  /** Settles with the baseline commit in `hostRepo` (same id as `baselineCommit`), when one was given. */
  hostBaseline?: Promise<string>;
  /** What the agent's repository holds, when one was asked for. */
  sandboxRepo?: SandboxRepoSummary;
}

/**
 * Attributes that make the baseline byte-exact whatever `.gitattributes` the project (or the
 * agent) carries: no eol conversion, no filters, binary detection by content.
 */
const INFO_ATTRIBUTES = '* -text -filter -ident -working-tree-encoding !diff !merge !eol\n';
/** New dependency and cache trees are never a result to apply (already tracked files stay tracked). */
const INFO_EXCLUDE = 'node_modules/\n__pycache__/\n';

/**
 * Copies a snapshot into the workspace as one tar stream; inside, the same bytes also feed
 * `git fast-import`, which commits the baseline into `<stateDir>/baseline.git` (one pack, not 10k
 * loose objects). Then it seeds the tracking index, refreshes it against the extracted files and
 * compares the baseline tree with the host's manifest: the copy provably matches what was read.
 */
export async function hydrate(shell: WorkspaceShell, snapshot: ProjectSnapshot, opts: HydrateOptions = {}): Promise<HydrateResult> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  const timeoutMs = opts.timeoutMs ?? 30 * 60_000;
  const started = performance.now();
  const gitDir = baselineGitDir(layout);
  const env = gitEnv(layout);

  await runChecked(
    shell,
    // As the helper: /airlock is the helper's, out of the agent's reach; Airlock's Node and git only (docs/architecture.md §2.3).
    { argv: nodeArgv(layout, PREPARE_JS, [layout.stateDir, gitDir, layout.workDir, INFO_ATTRIBUTES, INFO_EXCLUDE, JSON.stringify(gitProgram(layout))]), env: helperGitEnv(layout), timeoutMs, as: 'helper' },
    'preparing the workspace',
  );

  // One stream crosses the channel. `tee` hands the bytes to `tar -x` (the copy) and to a spool
  // file in the state volume; from it, a small converter feeds `git fast-import` (the baseline, one
  // pack), which then seeds the tracking index. The copy is what the agent waits for; the baseline
  // finishes in the background and every change query queues behind it. It is built from the
  // stream, not from the work tree, so the agent's first edits cannot leak into it.
  const ident = `${BASELINE_IDENT.name} <${BASELINE_IDENT.email}> ${BASELINE_IDENT.epoch} +0000`;
  const spool = `${layout.stateDir}/hydrate.tar`;
  // The agent's repository is built and installed while the copy streams (sandbox-repo.ts).
  const sandboxRepo = opts.gitHistory === undefined ? undefined : startSandboxRepo(shell, snapshot, opts.gitHistory, { layout, timeoutMs });
  const importer = opts.hostRepo ? await opts.hostRepo.importer() : undefined;
  const imported: Array<{ path: string; mode: GitMode; mark: number }> = [];
  const streams = snapshot.open(
    opts.onProgress,
    importer ? async (f, content) => void imported.push({ path: f.path, mode: f.mode, mark: await importer.blob(content) }) : undefined,
  );
  const copy = shell
    .run({
      argv: ['sh', '-c', 'tee "$1" | tar -x -p --no-same-owner -C "$2" -f - && test -s "$1"', 'sh', spool, layout.workDir],
      stdin: streams.tar,
      env,
      timeoutMs,
    })
    .then(
      (r) => {
        if (r.exitCode !== 0) streams.tar.destroy();
        return r;
      },
      (err: unknown) => {
        streams.tar.destroy();
        throw err;
      },
    );
  const [copyRun, manifest] = await Promise.allSettled([copy, streams.manifest]);
  if (copyRun.status === 'rejected' || copyRun.value.exitCode !== 0 || copyRun.value.timedOut || manifest.status === 'rejected') importer?.abort();
  if (copyRun.status === 'rejected') throw copyRun.reason;
  if (copyRun.value.exitCode !== 0 || copyRun.value.timedOut) {
    const r = copyRun.value;
    const detail = r.stderr.toString('utf8').trim().split('\n').slice(-3).join(' | ');
    throw new AirlockError(
      r.timedOut ? 'COMMAND_TIMEOUT' : 'SANDBOX_FAILED',
      `Copying the project in failed (exit ${r.exitCode ?? r.signal}): ${detail || 'no error output'}. Check free disk space for the sandbox volumes and that the image has tar.`,
    );
  }
  if (manifest.status === 'rejected') {
    throw new AirlockError('INTERNAL', `Reading the project failed while copying it: ${(manifest.reason as Error).message}`);
  }
  // Settles while the baseline below records in the background.
  const repoReady = sandboxRepo?.finish();
  repoReady?.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const baselineRun = shell.run({
    argv: nodeArgv(layout, BASELINE_JS, [spool, ident, '', '', trackingIndex(layout), JSON.stringify(gitArgv(layout, [])), BASELINE_REF, '1']),
    env: helperGitEnv(layout),
    timeoutMs,
    as: 'helper',
  });
  baselineRun.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const files = manifest.value;
  const expected = baselineCommitOid(files, ident, 'airlock baseline');
  const hostBaseline = importer
    ? importer.commit({ ref: BASELINE_REF, ident, message: 'airlock baseline\n' }, imported).then((got) => {
        if (got !== expected) throw new AirlockError('INTERNAL', `The host's baseline (${got}) does not match the project as read (${expected}).`);
        return got;
      })
    : undefined;
  hostBaseline?.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const baselineReady = serializedBarrier(shell, async () => {
    assertBaselineRecorded(await baselineRun, expected);
  });
  baselineReady.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  const repoSummary = await repoReady;
  if (opts.waitForBaseline ?? true) await baselineReady;
  return {
    files: files.length,
    bytes: files.reduce((n, f) => n + f.size, 0),
    durationMs: performance.now() - started,
    baselineCommit: expected,
    baselineReady,
    excluded: snapshot.excluded,
    manifest: files,
    ...(hostBaseline ? { hostBaseline } : {}),
    ...(repoSummary ? { sandboxRepo: repoSummary } : {}),
  };
}

/**
 * The sandbox's baseline commit must be the one the host computed from the project as read: a failed
 * recording, or a commit that differs, means the copy cannot be trusted (docs/architecture.md §11).
 */
export function assertBaselineRecorded(r: Awaited<ReturnType<WorkspaceShell['run']>>, expected: string): void {
  const got = r.stdout.toString('utf8').trim();
  if (r.exitCode !== 0 || r.timedOut) {
    throw new AirlockError('SANDBOX_FAILED', `Recording the baseline failed (exit ${r.exitCode ?? r.signal}): ${r.stderr.toString('utf8').trim().slice(-500) || 'no error output'}.`);
  }
  if (got !== expected) {
    throw new AirlockError('SANDBOX_FAILED', `The baseline in the sandbox (${got}) does not match the project as read (${expected}); the copy cannot be trusted. Retry the run.`);
  }
}
