import { AirlockError } from '../../contracts/errors';
import type { ExcludedEntry, ManifestFile, ProjectSnapshot, SnapshotProgress } from './snapshot';
import { TAR_TO_FAST_IMPORT_JS } from './tar-to-fast-import';
import {
  BASELINE_IDENT,
  BASELINE_REF,
  SANDBOX_LAYOUT,
  baselineGitDir,
  gitArgv,
  gitEnv,
  runChecked,
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

  // One stream crosses the channel: `tee` hands the same bytes to `tar -x` (the copy) and to a
  // small converter feeding `git fast-import` (the baseline, written as one pack).
  const ident = `${BASELINE_IDENT.name} <${BASELINE_IDENT.email}> ${BASELINE_IDENT.epoch} +0000`;
  const pipeline = [
    'fifo="$1/hydrate.fifo"; js=$2; ref=$3; ident=$4; shift 4',
    'rm -f "$fifo" && mkfifo "$fifo"',
    'node -e "$js" "$ref" "$ident" < "$fifo" | "$@" &',
    'fi=$!',
    'tee "$fifo" | tar -x -p --no-same-owner -C "$WORK" -f -',
    'tarst=$?',
    'wait $fi; fist=$?',
    'rm -f "$fifo"',
    '[ $tarst -eq 0 ] || { echo "tar -x failed ($tarst)" >&2; exit 10; }',
    '[ $fist -eq 0 ] || { echo "git fast-import failed ($fist)" >&2; exit 11; }',
  ].join('\n');
  const streams = snapshot.open(opts.onProgress);
  const run = shell
    .run({
      argv: [
        'sh', '-c', pipeline, 'sh', layout.stateDir,
        TAR_TO_FAST_IMPORT_JS, BASELINE_REF, ident,
        ...gitArgv(layout, ['-c', 'pack.compression=1', 'fast-import', '--quiet', '--done']),
      ],
      stdin: streams.tar,
      env: { ...env, WORK: layout.workDir },
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
  const [copyRun, manifest] = await Promise.allSettled([run, streams.manifest]);
  if (copyRun.status === 'rejected') throw copyRun.reason;
  if (copyRun.value.exitCode !== 0 || copyRun.value.timedOut) {
    const r = copyRun.value;
    const detail = r.stderr.toString('utf8').trim().split('\n').slice(-3).join(' | ');
    const noNode = /node: (not found|No such file)/.test(detail);
    throw new AirlockError(
      r.timedOut ? 'COMMAND_TIMEOUT' : noNode ? 'IMAGE_INCOMPATIBLE' : 'SANDBOX_FAILED',
      `Copying the project in failed (exit ${r.exitCode ?? r.signal}): ${detail || 'no error output'}. ${noNode ? 'The image needs node; use the Airlock image.' : 'Check free disk space for the sandbox volumes and that the image has tar, git and node.'}`,
    );
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
    `"$@" ls-tree -r -z --full-tree ${BASELINE_REF}`,
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
  const out = done.stdout.toString('utf8');
  const nl = out.indexOf('\n');
  const baselineCommit = out.slice(0, nl).trim();
  verifyTree(out.slice(nl + 1), files);
  return {
    files: files.length,
    bytes: files.reduce((n, f) => n + f.size, 0),
    durationMs: performance.now() - started,
    baselineCommit,
    excluded: snapshot.excluded,
    manifest: files,
  };
}

/** The baseline must hold exactly what the host read: same paths, modes and blob ids. */
function verifyTree(lsTree: string, manifest: ManifestFile[]): void {
  const expected = new Map(manifest.map((f) => [f.path, `${f.mode} ${f.oid}`]));
  let seen = 0;
  const problems: string[] = [];
  for (const rec of lsTree.split('\0')) {
    const m = /^(\d+) \w+ ([0-9a-f]+)\t(.*)$/s.exec(rec);
    if (!m) continue;
    seen++;
    const want = expected.get(m[3] as string);
    if (want !== `${m[1]} ${m[2]}`) problems.push(m[3] as string);
  }
  if (seen !== manifest.length) problems.push(`${manifest.length} files sent, ${seen} recorded`);
  if (problems.length) {
    throw new AirlockError('SANDBOX_FAILED', `The baseline in the sandbox does not match the project as read (${problems.slice(0, 5).join('; ')}). Retry the run; if it persists, report it.`);
  }
}
