/**
 * Git-steering files in a result (docs/architecture.md §11, "Git-steering files"): files that make
 * the user's own git — or a shell prompt or editor that runs git — do something when it enters a
 * folder. A repository planted anywhere in the project (`HEAD` with `config`, `objects/`, `refs/`…)
 * is found by git's discovery when the user `cd`s into that folder, and its `config` can name
 * commands (`core.fsmonitor`, `core.hooksPath`, `core.sshCommand`, a pager, filters), so:
 * - a planted repository's `config`, `config.worktree`, `commondir` and `hooks/` are refused
 *   outright (left out of the result and listed): there is no review in which running them is right;
 * - the rest of it, and `.gitmodules`, `.gitattributes`, `.lfsconfig` and other `.git*` files, are
 *   flagged for review (risky-paths.ts): never pre-selected, listed first with why.
 */

/** Files whose presence next to `HEAD` makes a folder look like a git directory. */
const GIT_DIR_MARKERS = new Set(['config', 'commondir', 'packed-refs', 'config.worktree']);

/** The folders of `tree` (project-relative file paths; '' is the project itself) shaped like a git repository: a `HEAD` file with `config`, `commondir`, `packed-refs`, `objects/` or `refs/` next to it. */
export function plantedGitDirs(tree: Iterable<string>): Set<string> {
  const heads = new Set<string>();
  const marked = new Set<string>();
  for (const p of tree) {
    const slash = p.lastIndexOf('/');
    const name = p.slice(slash + 1);
    const dir = slash < 0 ? '' : p.slice(0, slash);
    if (name === 'HEAD') heads.add(dir);
    if (GIT_DIR_MARKERS.has(name)) marked.add(dir);
    // `<dir>/objects/…` or `<dir>/refs/…` at any depth below the candidate (most paths have neither).
    if (!p.includes('objects/') && !p.includes('refs/')) continue;
    const parts = p.split('/');
    for (let i = 0; i < parts.length - 1; i++) if (parts[i] === 'objects' || parts[i] === 'refs') marked.add(parts.slice(0, i).join('/'));
  }
  return new Set([...heads].filter((d) => marked.has(d)));
}

/** Entries of a git directory (what git reads in one), by first component below it. */
const GIT_DIR_FILES = new Set(['HEAD', 'config', 'config.worktree', 'commondir', 'packed-refs', 'description', 'index', 'shallow', 'FETCH_HEAD', 'ORIG_HEAD', 'gitdir']);
const GIT_DIR_FOLDERS = new Set(['objects', 'refs', 'hooks', 'info', 'logs', 'worktrees', 'modules']);

/** The planted repository `p` belongs to (nearest folder first) and `p` below it, if `p` is a git directory entry of one. */
function plantedEntry(p: string, dirs: Set<string>): { dir: string; rest: string } | undefined {
  if (dirs.size === 0) return undefined;
  const parts = p.split('/');
  for (let i = parts.length - 1; i >= 0; i--) {
    const dir = parts.slice(0, i).join('/');
    if (!dirs.has(dir)) continue;
    const below = parts.slice(i);
    const first = below[0] as string;
    if ((below.length === 1 && GIT_DIR_FILES.has(first)) || (below.length > 1 && GIT_DIR_FOLDERS.has(first))) return { dir, rest: below.join('/') };
  }
  return undefined;
}

/** Why `p` is refused as the command-bearing part of a planted repository, or undefined. */
export function plantedRepoRefusal(p: string, dirs: Set<string>): string | undefined {
  const entry = plantedEntry(p, dirs);
  if (!entry) return undefined;
  const where = entry.dir || 'the project root';
  if (['config', 'config.worktree', 'commondir', 'gitdir'].includes(entry.rest)) return `the ${entry.rest} of a git repository planted at ${where}: git, a shell prompt or an editor entering that folder would run the commands it names`;
  if (entry.rest.startsWith('hooks/')) return `a hook of a git repository planted at ${where}`;
  return undefined;
}

/** Why `p` is flagged as part of a planted repository, or undefined. */
export function plantedRepoFlag(p: string, dirs: Set<string>): string | undefined {
  const entry = plantedEntry(p, dirs);
  return entry ? `part of a git repository planted at ${entry.dir || 'the project root'} (HEAD, config, objects/, refs/): your git, a shell prompt or an editor reads it when entering that folder` : undefined;
}
