import { AirlockError } from '../../contracts/errors';
import type { ExcludedEntry, ManifestFile, ProjectSnapshot, SnapshotProgress } from './snapshot';
import {
  BASELINE_REF,
  SANDBOX_LAYOUT,
  baselineGitDir,
  gitArgv,
  gitEnv,
  runChecked,
  trackingIndex,
  type ShellRunResult,
  type WorkspaceLayout,
  type WorkspaceShell,
} from './workspace-shell';

export interface HydrateOptions {
  layout?: WorkspaceLayout;
  /** Files and bytes streamed so far (about every 200 files, and once at the end). */
  onProgress?: (p: SnapshotProgress) => void;
  /** Per-command limit inside the sandbox (default 30 min: large projects on slow disks). */
  timeoutMs?: number;
}

export interface HydrateResult {
  files: number;
  bytes: number;
  durationMs: number;
  /** The baseline commit inside the sandbox (`refs/heads/baseline` of the state git dir). */
  baselineCommit: string;
  /** The final list of what stayed on the host (name- and content-based). */
  excluded: ExcludedEntry[];
  /** Per-file oid/size/mode as read on the host; apply checks baseline blobs against it. */
  manifest: ManifestFile[];
}

/**
 * Attributes that make the baseline byte-exact whatever `.gitattributes` the project (or the
 * agent) carries: no eol conversion, no filters, binary detection by content.
 */
const INFO_ATTRIBUTES = '* -text -filter -ident -working-tree-encoding !diff !merge !eol\n';
/** New dependency and cache trees are never a result to apply (already tracked files stay tracked). */
const INFO_EXCLUDE = 'node_modules/\n__pycache__/\n';

/**
 * Copies a snapshot into the workspace as one tar stream and, from the same read of each file,
 * commits the baseline with `git fast-import` into `<stateDir>/baseline.git` (a pack, not 10k
 * loose objects). Then it seeds the tracking index and refreshes it against the extracted files,
 * which also proves the copy matches what the host read.
 */
export async function hydrate(shell: WorkspaceShell, snapshot: ProjectSnapshot, opts: HydrateOptions = {}): Promise<HydrateResult> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  const timeoutMs = opts.timeoutMs ?? 30 * 60_000;
  const started = performance.now();
  const gitDir = baselineGitDir(layout);
  const env = gitEnv(layout);

  const prepare = [
    'set -e',
    'mkdir -p "$1" "$3"',
    'git init -q --bare "$2"',
    'printf "%s" "$4" > "$2/info/attributes"',
    'printf "%s" "$5" > "$2/info/exclude"',
  ].join('\n');
  await runChecked(
    shell,
    { argv: ['sh', '-c', prepare, 'sh', layout.stateDir, gitDir, layout.workDir, INFO_ATTRIBUTES, INFO_EXCLUDE], env, timeoutMs },
    'preparing the workspace',
  );

  const streams = snapshot.open(opts.onProgress);
  const abort = () => {
    streams.tar.destroy();
    streams.fastImport.destroy();
  };
  const watchFailure = (p: Promise<ShellRunResult>) =>
    p.then(
      (r) => {
        if (r.exitCode !== 0) abort();
        return r;
      },
      (err: unknown) => {
        abort();
        throw err;
      },
    );
  const extract = watchFailure(
    shell.run({ argv: ['tar', '-x', '-p', '--no-same-owner', '-C', layout.workDir, '-f', '-'], stdin: streams.tar, env, timeoutMs }),
  );
  const commit = watchFailure(
    shell.run({
      argv: gitArgv(layout, ['-c', 'pack.compression=1', 'fast-import', '--quiet', '--done', '--date-format=raw']),
      stdin: streams.fastImport,
      env,
      timeoutMs,
    }),
  );
  const [tarRun, fiRun, manifest] = await Promise.allSettled([extract, commit, streams.manifest]);
  for (const [what, r] of [['copying the project in (tar)', tarRun], ['recording the baseline (git fast-import)', fiRun]] as const) {
    if (r.status === 'rejected') throw r.reason;
    if (r.value.exitCode !== 0 || r.value.timedOut) {
      const detail = r.value.stderr.toString('utf8').trim().split('\n').slice(-3).join(' | ');
      throw new AirlockError(
        r.value.timedOut ? 'COMMAND_TIMEOUT' : 'SANDBOX_FAILED',
        `${what} failed (exit ${r.value.exitCode ?? r.value.signal}): ${detail || 'no error output'}. Check free disk space for the sandbox volumes and that the image has tar and git.`,
      );
    }
  }
  if (manifest.status === 'rejected') {
    throw new AirlockError('INTERNAL', `Reading the project failed while copying it: ${(manifest.reason as Error).message}`);
  }

  // Seed the tracking index from the baseline and fill its stat cache; files that differ from
  // what the host read are reported by --refresh and fail the copy.
  const finish = [
    'set -e',
    `"$@" symbolic-ref HEAD ${BASELINE_REF}`,
    `"$@" read-tree ${BASELINE_REF}`,
    'if ! out=$("$@" update-index --refresh 2>&1); then echo "$out" >&2; exit 3; fi',
    `"$@" rev-parse ${BASELINE_REF}`,
  ].join('\n');
  const done = await shell.run({
    argv: ['sh', '-c', finish, 'sh', ...gitArgv(layout, [])],
    env: gitEnv(layout, { GIT_INDEX_FILE: trackingIndex(layout) }),
    timeoutMs,
  });
  if (done.exitCode === 3) {
    const diverged = done.stderr.toString('utf8').trim().split('\n').slice(0, 10).join('; ');
    throw new AirlockError('SANDBOX_FAILED', `The copy in the sandbox does not match the project as read (${diverged}). A file may have changed during the copy; retry the run.`);
  }
  if (done.exitCode !== 0) {
    throw new AirlockError('SANDBOX_FAILED', `Recording the baseline failed: ${done.stderr.toString('utf8').trim()}`);
  }
  const files = manifest.value;
  return {
    files: files.length,
    bytes: files.reduce((n, f) => n + f.size, 0),
    durationMs: performance.now() - started,
    baselineCommit: done.stdout.toString('utf8').trim(),
    excluded: snapshot.excluded,
    manifest: files,
  };
}
