import { AirlockError } from '../../contracts/errors';
import type { Disposable } from '../common/disposable';
import { ZERO_OID } from './git-objects';
import {
  BASELINE_REF,
  LARGE_OUTPUT_BYTES,
  SANDBOX_LAYOUT,
  gitArgv,
  helperGitEnv,
  runChecked,
  serialized,
  trackingIndex,
  type WorkspaceLayout,
  type WorkspaceShell,
} from './workspace-shell';

export type ChangeStatus = 'added' | 'modified' | 'deleted' | 'renamed';

/** One changed path of the workspace against the baseline. */
export interface FileChange {
  path: string;
  /** The baseline path of a renamed file. */
  oldPath?: string;
  status: ChangeStatus;
  binary: boolean;
  additions: number;
  deletions: number;
  /** Size now (0 when deleted). */
  size: number;
  /** Size in the baseline (0 when added). */
  oldSize: number;
  /** Git modes (`100644`, `100755`, `120000`); absent on the side where the file does not exist. */
  oldMode?: string;
  newMode?: string;
  /** Executable bit flipped, or a file became a symlink or back. */
  modeChanged: boolean;
  /** Above the inline-diff cap: show a summary instead of the diff. */
  tooLarge: boolean;
  oldOid: string;
  newOid: string;
}

export interface ChangesOptions {
  layout?: WorkspaceLayout;
  /** Files above this many bytes (either side) are flagged `tooLarge` (default 1 MiB). */
  diffCapBytes?: number;
}

/** Raw `git diff` text of one file in the sandbox (the contract's `FileDiff` is the parsed, host-derived view). */
export interface WorkspaceFileDiff {
  path: string;
  diff: string;
  binary: boolean;
  /** The diff was cut at `maxBytes`. */
  truncated: boolean;
}

const DEFAULT_DIFF_CAP = 1024 * 1024;
const NO_DRIVERS = ['--no-ext-diff', '--no-textconv', '--no-color'];

/** What `git add -A --ignore-errors` says about a file it may not read: left as the index had it. */
const UNREADABLE = /Permission denied|unable to index file|adding files failed/;

/**
 * Runs `git add -A` on the tracking index, then `git <args>`: two direct spawns of Airlock's git as
 * the helper, no shell (docs/architecture.md §2.3). Callers hold the workspace's queue (`serialized`).
 */
export async function refreshedGit(shell: WorkspaceShell, layout: WorkspaceLayout, args: string[], what: string, pathspec: string[] = []) {
  const env = helperGitEnv(layout, { GIT_INDEX_FILE: trackingIndex(layout) });
  // The helper holds no DAC_READ_SEARCH (docs/architecture.md §2.3): a file or folder the agent made
  // unreadable to others is skipped here (it stays as the index had it) instead of failing the list.
  // The result is not this: collect reads every changed file as the agent (docs/architecture.md §11).
  const add = await shell.run({ argv: gitArgv(layout, ['add', '-A', '--ignore-errors', ...(pathspec.length ? ['--', ...pathspec] : [])]), env, maxOutputBytes: 1024 * 1024, timeoutMs: 10 * 60_000, as: 'helper' });
  if (add.timedOut || add.exitCode !== 0) {
    const said = `${add.stdout.toString('utf8')}\n${add.stderr.toString('utf8')}`.split('\n').filter((l) => l.trim() && !UNREADABLE.test(l));
    if (add.timedOut) throw new AirlockError('COMMAND_TIMEOUT', `${what} timed out after ${add.durationMs} ms; the sandbox may be overloaded — retry, or raise the timeout.`);
    if (add.exitCode === null || said.length) {
      throw new AirlockError('SANDBOX_FAILED', `${what} failed (git add, exit ${add.exitCode ?? add.signal}): ${said.slice(-5).join(' | ') || 'no error output'}.`);
    }
  }
  return runChecked(shell, { argv: gitArgv(layout, args), env, maxOutputBytes: LARGE_OUTPUT_BYTES, timeoutMs: 10 * 60_000, as: 'helper' }, what);
}

/** Parses `git diff --raw --numstat -z` output. */
export function parseRawNumstat(out: Buffer): Array<Omit<FileChange, 'size' | 'oldSize' | 'tooLarge'>> {
  const tokens = out.toString('utf8').split('\0');
  const raws: Array<Omit<FileChange, 'size' | 'oldSize' | 'tooLarge'>> = [];
  const stats = new Map<string, { additions: number; deletions: number; binary: boolean }>();
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i] as string;
    if (!t) continue;
    if (t.startsWith(':')) {
      const [oldMode, newMode, oldOid, newOid, statusField] = t.slice(1).split(' ') as [string, string, string, string, string];
      const letter = statusField[0];
      let path: string;
      let oldPath: string | undefined;
      if (letter === 'R' || letter === 'C') {
        oldPath = tokens[++i] as string;
        path = tokens[++i] as string;
      } else {
        path = tokens[++i] as string;
      }
      const status: ChangeStatus = letter === 'A' ? 'added' : letter === 'D' ? 'deleted' : letter === 'R' ? 'renamed' : letter === 'C' ? 'added' : 'modified';
      raws.push({
        path,
        ...(letter === 'R' ? { oldPath } : {}),
        status,
        binary: false,
        additions: 0,
        deletions: 0,
        ...(status !== 'added' ? { oldMode } : {}),
        ...(status !== 'deleted' ? { newMode } : {}),
        modeChanged: status !== 'added' && status !== 'deleted' && oldMode !== newMode,
        oldOid: status === 'added' ? ZERO_OID : oldOid,
        newOid: status === 'deleted' ? ZERO_OID : newOid,
      });
    } else {
      const [a, d, p] = t.split('\t') as [string, string, string];
      let key = p;
      if (p === '') {
        i += 1; // old path
        key = tokens[++i] as string;
      }
      const binary = a === '-';
      stats.set(key, { additions: binary ? 0 : Number(a), deletions: binary ? 0 : Number(d), binary });
    }
  }
  for (const r of raws) {
    const s = stats.get(r.path);
    if (s) Object.assign(r, s);
  }
  return raws;
}

/**
 * Lists what changed in the workspace since the baseline: status (renames detected), binary flag,
 * line counts, sizes, mode changes, too-large flags. Uses the tracking index, never the baseline.
 */
export function listChanges(shell: WorkspaceShell, opts: ChangesOptions = {}): Promise<FileChange[]> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  const cap = opts.diffCapBytes ?? DEFAULT_DIFF_CAP;
  return serialized(shell, async () => {
    const res = await refreshedGit(shell, layout, ['diff', '--cached', '-M', '--raw', '--no-abbrev', '--numstat', '-z', ...NO_DRIVERS, BASELINE_REF], 'listing changes');
    const parsed = parseRawNumstat(res.stdout);
    const oids = new Set<string>();
    for (const c of parsed) {
      if (c.oldOid !== ZERO_OID) oids.add(c.oldOid);
      if (c.newOid !== ZERO_OID) oids.add(c.newOid);
    }
    const sizes = new Map<string, number>();
    if (oids.size) {
      const check = await runChecked(
        shell,
        {
          argv: gitArgv(layout, ['cat-file', '--batch-check=%(objectname) %(objectsize)']),
          env: helperGitEnv(layout),
          as: 'helper',
          stdin: [...oids].join('\n') + '\n',
          maxOutputBytes: LARGE_OUTPUT_BYTES,
        },
        'reading file sizes',
      );
      for (const line of check.stdout.toString('utf8').split('\n')) {
        const [oid, size] = line.split(' ');
        if (oid && size && /^\d+$/.test(size)) sizes.set(oid, Number(size));
      }
    }
    return parsed.map((c) => {
      const size = c.newOid === ZERO_OID ? 0 : (sizes.get(c.newOid) ?? 0);
      const oldSize = c.oldOid === ZERO_OID ? 0 : (sizes.get(c.oldOid) ?? 0);
      return { ...c, size, oldSize, tooLarge: size > cap || oldSize > cap };
    });
  });
}

/** The unified diff of one file against the baseline (pass `oldPath` for a rename). */
export function fileDiff(shell: WorkspaceShell, path: string, opts: ChangesOptions & { oldPath?: string; maxBytes?: number } = {}): Promise<WorkspaceFileDiff> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  const maxBytes = opts.maxBytes ?? DEFAULT_DIFF_CAP;
  const paths = opts.oldPath && opts.oldPath !== path ? [opts.oldPath, path] : [path];
  const pathspec = paths.map((p) => `:(literal)${p}`);
  return serialized(shell, async () => {
    const res = await refreshedGit(shell, layout, ['diff', '--cached', '-M', ...NO_DRIVERS, BASELINE_REF, '--', ...pathspec], `diffing ${path}`, pathspec);
    const truncated = res.stdout.length > maxBytes;
    const text = (truncated ? res.stdout.subarray(0, maxBytes) : res.stdout).toString('utf8');
    const binary = /^Binary files .* differ$/m.test(text) && !/^@@ /m.test(text);
    return { path, diff: text, binary, truncated };
  });
}

/**
 * The whole result as one patch (`--binary --full-index`, renames detected) that `git apply`
 * accepts on the original project.
 */
export function finalPatch(shell: WorkspaceShell, opts: ChangesOptions = {}): Promise<Buffer> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  return serialized(shell, async () => {
    const res = await refreshedGit(shell, layout, ['diff', '--cached', '-M', '--binary', '--full-index', ...NO_DRIVERS, BASELINE_REF], 'building the patch');
    if (res.truncated) {
      throw new AirlockError('SANDBOX_FAILED', 'The patch exceeds the channel output cap; exclude large generated files (e.g. via .gitignore) and retry.');
    }
    return res.stdout;
  });
}

/** Paths never reported by the watcher. */
export const WATCH_IGNORE = ['.git/', 'node_modules/'];

/**
 * Debounced change events while commands run: `onChange` receives workspace-relative paths that
 * changed; consumers refetch `listChanges` / `fileDiff` (event ⇒ invalidate ⇒ refetch).
 */
export async function watchChanges(
  shell: WorkspaceShell,
  onChange: (paths: string[]) => void,
  opts: { layout?: WorkspaceLayout; debounceMs?: number } = {},
): Promise<Disposable> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  if (!shell.watch) throw new AirlockError('INTERNAL', 'This workspace shell cannot watch files; live change events need the sandbox channel.');
  const root = layout.workDir.replace(/\/$/, '');
  return shell.watch(
    layout.workDir,
    (paths) => {
      const rel = paths
        .map((p) => (p.startsWith(`${root}/`) ? p.slice(root.length + 1) : p.replace(/^\.\//, '')))
        .filter((p) => p && !WATCH_IGNORE.some((ig) => p === ig.slice(0, -1) || p.startsWith(ig) || p.includes(`/${ig}`)));
      if (rel.length) onChange([...new Set(rel)]);
    },
    { debounceMs: opts.debounceMs ?? 150, ignore: WATCH_IGNORE },
  );
}
