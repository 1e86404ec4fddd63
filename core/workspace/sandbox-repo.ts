import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { deflate } from 'node:zlib';
import { AirlockError } from '../../contracts/errors';
import { DEFAULT_GIT_HISTORY, type GitHistory } from '../../contracts/runs';
import { exclusionByContent, exclusionByName, needsTokenInspection } from './exclusions';
import type { HostGit } from './host-git';
import type { ProjectSnapshot } from './snapshot';
import { TarWriter } from './tar-writer';
import { SANDBOX_LAYOUT, gitEnv, runChecked, type WorkspaceLayout, type WorkspaceShell } from './workspace-shell';

/**
 * The git repository the agent sees at `<workDir>/.git` (docs/architecture.md §11): the user's
 * checked-out commit with as much history as allowed, the copied-in files as its work tree, so
 * `git status`/`git diff` show the user's uncommitted changes plus the agent's. It is built on the
 * host from the project's objects — never a copy of the project's `.git` (hooks, config with
 * remotes and credentials, includes, LFS, other branches stay out) — and it is a convenience for
 * the agent only: results are always the workspace's files against the host's own baseline.
 */

export { DEFAULT_GIT_HISTORY, type GitHistory };

/** The `.git` to stream in, and what it holds. */
export interface SandboxRepo {
  /** `history`: HEAD names a commit of the shipped pack. `fresh`: the copied-in tree is committed inside. */
  kind: 'history' | 'fresh';
  /** Files of the `.git` directory, paths relative to it. */
  files: Array<{ path: string; content: Buffer }>;
  /** HEAD's commit inside the sandbox (history repositories). */
  head?: string;
  /** Commits shipped. */
  commits: number;
  /** Files left out of the copy were removed from every shipped commit: ids differ from the user's. */
  rewritten: boolean;
  /** Why the project's history is missing although it is a git project. */
  note?: string;
}

/** What a sandbox repository holds, without its bytes (for records and notes). */
export type SandboxRepoSummary = Omit<SandboxRepo, 'files'> & {
  /** Bytes of the `.git` streamed in. */
  bytes: number;
  /** Building it on the host plus installing it in the sandbox. */
  durationMs: number;
  /** Of which after `finish()` was called: what it added to the copy's time (hydrate's critical path). */
  waitMs: number;
};

/** A sandbox repository on its way in; see `startSandboxRepo`. */
export interface PendingSandboxRepo {
  /** Call once the copy is in place (and its stream has ended): settles when the repository is ready. */
  finish(): Promise<SandboxRepoSummary>;
}

/**
 * Starts giving the workspace its repository while the copy streams in: a repository with history
 * is built on the host and installed at once (it does not need the copied files). `finish()`
 * installs a fresh repository (it commits the copied files), and builds again when the stream left
 * out files the first build did not know of (exclusions judged by content), so no excluded path
 * survives in the shipped history. Call it before the snapshot's stream is opened.
 */
export function startSandboxRepo(
  shell: WorkspaceShell,
  snapshot: ProjectSnapshot,
  history: GitHistory,
  opts: { layout?: WorkspaceLayout; timeoutMs?: number } = {},
): PendingSandboxRepo {
  const started = performance.now();
  const seen = snapshot.excluded.length;
  const early = buildSandboxRepo(snapshot, history).then(async (repo) => {
    if (repo.kind === 'history') await installSandboxRepo(shell, repo, opts);
    return repo;
  });
  early.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  return {
    async finish() {
      const finishing = performance.now();
      let repo = await early;
      const late = repo.kind === 'history' && snapshot.excluded.length > seen;
      if (late) repo = await buildSandboxRepo(snapshot, history);
      if (late || repo.kind === 'fresh') await installSandboxRepo(shell, repo, { ...opts, replace: late });
      const { files, ...rest } = repo;
      const now = performance.now();
      return { ...rest, bytes: files.reduce((n, f) => n + f.content.length, 0), durationMs: now - started, waitMs: now - finishing };
    },
  };
}

/**
 * Gives a workspace whose copy is already in place its repository. A continued run can call it on a
 * workspace that holds the project plus an earlier result (that result shows as uncommitted changes).
 */
export function provideSandboxRepo(
  shell: WorkspaceShell,
  snapshot: ProjectSnapshot,
  history: GitHistory,
  opts: { layout?: WorkspaceLayout; timeoutMs?: number } = {},
): Promise<SandboxRepoSummary> {
  return startSandboxRepo(shell, snapshot, history, opts).finish();
}

/** Who commits inside the sandbox, and who wrote `none`'s one commit: never the user's identity. */
const AGENT_IDENT = { name: 'Airlock agent', email: 'agent@airlock.invalid' };
const SNAPSHOT_IDENT = `Airlock <snapshot@airlock.invalid> 946684800 +0000`;

/** The whole `.git/config`: no remotes, no includes, no credential helpers, no hooks path. */
const SANDBOX_CONFIG = [
  '[core]',
  '\trepositoryformatversion = 0',
  '\tfilemode = true',
  '\tbare = false',
  '\tlogallrefupdates = true',
  '[user]',
  `\tname = ${AGENT_IDENT.name}`,
  `\temail = ${AGENT_IDENT.email}`,
  '',
].join('\n');

interface CommitInfo {
  oid: string;
  tree: string;
  parents: string[];
  raw: Buffer;
}

/**
 * Builds the sandbox's `.git` on the host. Call it once the copy's stream has ended: content-based
 * exclusions are known only then, and every excluded path is also removed from the shipped history.
 * A project that is not the top of a git work tree (or has no commit yet) gets a fresh repository.
 */
export async function buildSandboxRepo(snapshot: ProjectSnapshot, history: GitHistory = DEFAULT_GIT_HISTORY): Promise<SandboxRepo> {
  if (!snapshot.git || !snapshot.isGit || !snapshot.headCommit) return { kind: 'fresh', files: skeleton('ref: refs/heads/main\n'), commits: 0, rewritten: false };
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'airlock-sandbox-repo-'));
  try {
    return await buildFromHistory(snapshot.git, snapshot, snapshot.headCommit, history, scratch);
  } catch (err) {
    // A history the host cannot read whole (a partial clone, a damaged store) costs the agent its
    // history, not the run.
    return { kind: 'fresh', files: skeleton('ref: refs/heads/main\n'), commits: 0, rewritten: false, note: `history left out: ${(err as Error).message.slice(0, 300)}` };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

async function buildFromHistory(host: HostGit, snapshot: ProjectSnapshot, head: string, history: GitHistory, scratch: string): Promise<SandboxRepo> {
  const project = snapshot.projectDir;
  const inProject = async (args: string[]) => (await host.ok(args, { cwd: project }, `reading the project's git (${args[0]})`)).toString('utf8').trim();
  const commonDir = path.resolve(project, await inProject(['rev-parse', '--git-common-dir']));
  const branch = (await host.run(['symbolic-ref', '-q', 'HEAD'], { cwd: project })).stdout.toString('utf8').trim();

  // A scratch store that reads the project's objects through `alternates` and keeps whatever it
  // writes (rewritten trees and commits) to itself: the project's `.git` is only read.
  const gitDir = path.join(scratch, 'repo.git');
  await host.ok(['init', '-q', '--bare', '--template=', gitDir], { cwd: scratch }, 'creating a scratch repository');
  await mkdir(path.join(gitDir, 'objects', 'info'), { recursive: true });
  await writeFile(path.join(gitDir, 'objects', 'info', 'alternates'), `${path.join(commonDir, 'objects')}\n`);
  const userShallow = await readFile(path.join(commonDir, 'shallow'), 'utf8').catch(() => '');
  if (userShallow) await writeFile(path.join(gitDir, 'shallow'), userShallow);
  const git = (args: string[], stdin?: string, env?: Record<string, string>) =>
    host.ok([`--git-dir=${gitDir}`, ...args], { cwd: scratch, ...(stdin !== undefined ? { stdin } : {}), ...(env ? { env } : {}) }, `building the sandbox repository (git ${args[0]})`);

  const limit = history === 'all' ? [] : [`--max-count=${history === 'none' ? 1 : history}`];
  const listing = (await git(['rev-list', '--objects', ...limit, head])).toString('utf8').split('\n').filter(Boolean);
  const objects = listing.map((l) => ({ oid: l.slice(0, 40), path: l.length > 41 ? l.slice(41) : '' }));
  const commitOids = (await git(['rev-list', ...limit, head])).toString('utf8').split('\n').filter(Boolean);
  const commits = parseCommits(await git(['cat-file', '--batch'], `${commitOids.join('\n')}\n`));

  const dropped = await droppedPaths(snapshot, objects, git);
  const mustRewrite = history === 'none' || objects.some((o) => o.path && dropped.covers(o.path));
  let tip = head;
  let shallow: string[] = [];
  let packInput: string[];
  if (mustRewrite) {
    tip = await rewrite(commits, dropped.pathspecs, history === 'none', gitDir, git);
    packInput = (await git(['rev-list', '--objects', tip])).toString('utf8').split('\n').filter(Boolean).map((l) => l.slice(0, 40));
  } else {
    const inSet = new Set(commits.map((c) => c.oid));
    // A commit with a parent left out is where the history the agent sees begins.
    shallow = commits.filter((c) => c.parents.some((p) => !inSet.has(p))).map((c) => c.oid).sort();
    packInput = objects.map((o) => o.oid);
  }

  const packDir = path.join(scratch, 'pack');
  await mkdir(packDir);
  const packName = (await git(['-c', 'pack.compression=1', 'pack-objects', '-q', path.join(packDir, 'pack')], `${packInput.join('\n')}\n`)).toString('latin1').trim();
  if (!/^[0-9a-f]{40}$/.test(packName)) throw new AirlockError('INTERNAL', `git pack-objects gave no pack name (${packName.slice(0, 80)}).`);
  // A name git itself would accept (check-ref-format's rules that matter for a file path), else detached.
  const validBranch = /^refs\/heads\/[^\0-\x20~^:?*[\\\x7f]+$/.test(branch) && !/(^|\/)\.|\.\.|\/\/|\.lock(\/|$)|\/$/.test(branch) ? branch : undefined;
  const files = skeleton(validBranch ? `ref: ${validBranch}\n` : `${tip}\n`);
  if (validBranch) files.push({ path: validBranch, content: Buffer.from(`${tip}\n`) });
  if (shallow.length) files.push({ path: 'shallow', content: Buffer.from(`${shallow.join('\n')}\n`) });
  for (const ext of ['pack', 'idx']) {
    files.push({ path: `objects/pack/pack-${packName}.${ext}`, content: await readFile(path.join(packDir, `pack-${packName}.${ext}`)) });
  }
  return { kind: 'history', files, head: tip, commits: commits.length, rewritten: mustRewrite };
}

/** The files every sandbox `.git` starts with (directories are made by the installer). */
function skeleton(headFile: string): SandboxRepo['files'] {
  return [
    { path: 'HEAD', content: Buffer.from(headFile) },
    { path: 'config', content: Buffer.from(SANDBOX_CONFIG) },
  ];
}

/** Splits `git cat-file --batch` output of commits. */
function parseCommits(buf: Buffer): CommitInfo[] {
  const out: CommitInfo[] = [];
  let pos = 0;
  while (pos < buf.length) {
    const nl = buf.indexOf(0x0a, pos);
    if (nl < 0) break;
    const [oid, type, size] = buf.subarray(pos, nl).toString('latin1').split(' ');
    if (!oid || type !== 'commit' || !size) throw new AirlockError('INTERNAL', `Expected a commit, git gave "${buf.subarray(pos, nl).toString('latin1').slice(0, 100)}".`);
    const raw = buf.subarray(nl + 1, nl + 1 + Number(size));
    const headerEnd = raw.indexOf('\n\n');
    const headers = raw.subarray(0, headerEnd < 0 ? raw.length : headerEnd).toString('utf8').split('\n');
    const tree = headers.find((h) => h.startsWith('tree '))?.slice(5) ?? '';
    const parents = headers.filter((h) => h.startsWith('parent ')).map((h) => h.slice(7));
    out.push({ oid, tree, parents, raw });
    pos = nl + 1 + Number(size) + 1;
  }
  return out;
}

/**
 * Paths removed from every shipped commit: whatever the copy left out (credential files, ignored,
 * too large, by option), and any path in the shipped history that the credential rules would leave
 * out today (a key committed once and deleted since), registry configs judged by their content.
 */
async function droppedPaths(
  snapshot: ProjectSnapshot,
  objects: Array<{ oid: string; path: string }>,
  git: (args: string[], stdin?: string) => Promise<Buffer>,
): Promise<{ covers(p: string): boolean; pathspecs: string[] }> {
  const files = new Set<string>();
  const dirs = new Set<string>();
  for (const e of snapshot.excluded) {
    if (e.kind === 'git') continue;
    if (e.path.endsWith('/')) dirs.add(e.path.slice(0, -1));
    else files.add(e.path);
  }
  const inspect: Array<{ oid: string; path: string }> = [];
  for (const o of objects) {
    if (!o.path) continue;
    const parts = o.path.split('/');
    for (let i = 1; i < parts.length; i++) {
      const dir = parts.slice(0, i).join('/');
      if (exclusionByName(dir, true)) dirs.add(dir);
    }
    if (exclusionByName(o.path, false)) files.add(o.path);
    else if (exclusionByName(o.path, true)) dirs.add(o.path);
    else if (needsTokenInspection(o.path)) inspect.push(o);
  }
  if (inspect.length) {
    const out = await git(['cat-file', '--batch'], `${inspect.map((o) => o.oid).join('\n')}\n`);
    let pos = 0;
    for (const o of inspect) {
      const nl = out.indexOf(0x0a, pos);
      const [, type, size] = out.subarray(pos, nl).toString('latin1').split(' ');
      if (size === undefined) {
        pos = nl + 1; // "<oid> missing": nothing to judge, nothing shipped
        continue;
      }
      const content = out.subarray(nl + 1, nl + 1 + Number(size));
      if (type === 'blob' && exclusionByContent(o.path, content)) files.add(o.path);
      pos = nl + 1 + Number(size) + 1;
    }
  }
  const covers = (p: string) => {
    if (files.has(p) || dirs.has(p)) return true;
    for (let at = p.indexOf('/'); at >= 0; at = p.indexOf('/', at + 1)) if (dirs.has(p.slice(0, at))) return true;
    return false;
  };
  return { covers, pathspecs: [...files, ...dirs] };
}

const deflateAsync = promisify(deflate);

/**
 * Writes a copy of the commits (oldest first) whose trees lack the dropped paths, into the scratch
 * store; parents outside the shipped set are dropped, so the copy needs no `shallow` file. Author,
 * committer and message are kept (signatures go: they no longer match). With `noHistory`, the one
 * commit is a new one by Airlock, with no metadata of the user's.
 */
async function rewrite(
  commits: CommitInfo[],
  pathspecs: string[],
  noHistory: boolean,
  gitDir: string,
  git: (args: string[], stdin?: string, env?: Record<string, string>) => Promise<Buffer>,
): Promise<string> {
  const env = { GIT_INDEX_FILE: path.join(path.dirname(gitDir), 'rewrite.index'), GIT_LITERAL_PATHSPECS: '1' };
  const trees = new Map<string, string>();
  const mapped = new Map<string, string>();
  let tip = '';
  for (const c of [...commits].reverse()) {
    let tree = trees.get(c.tree);
    if (!tree) {
      await git(['read-tree', c.tree], undefined, env);
      if (pathspecs.length) await git(['rm', '--cached', '-r', '-q', '--ignore-unmatch', '--pathspec-from-file=-', '--pathspec-file-nul'], `${pathspecs.join('\0')}\0`, env);
      tree = (await git(['write-tree'], undefined, env)).toString('latin1').trim();
      trees.set(c.tree, tree);
    }
    const body = noHistory
      ? Buffer.from(`tree ${tree}\nauthor ${SNAPSHOT_IDENT}\ncommitter ${SNAPSHOT_IDENT}\n\nThe project as checked out at ${c.oid.slice(0, 12)} (history left out: git history "none")\n`)
      : rewriteCommit(c, tree, c.parents.map((p) => mapped.get(p)).filter((p): p is string => !!p));
    tip = await writeLooseObject(gitDir, 'commit', body);
    mapped.set(c.oid, tip);
  }
  return tip;
}

/** The raw commit with a new tree and parents; multi-line signature headers are dropped. */
function rewriteCommit(c: CommitInfo, tree: string, parents: string[]): Buffer {
  const headerEnd = c.raw.indexOf('\n\n');
  const headers = c.raw.subarray(0, headerEnd).toString('utf8').split('\n');
  const kept: string[] = [`tree ${tree}`, ...parents.map((p) => `parent ${p}`)];
  let skipping = false;
  for (const h of headers) {
    if (h.startsWith(' ')) {
      if (!skipping) kept.push(h);
      continue;
    }
    skipping = /^(tree|parent|gpgsig|gpgsig-sha256|mergetag) /.test(h);
    if (!skipping) kept.push(h);
  }
  return Buffer.concat([Buffer.from(kept.join('\n')), c.raw.subarray(headerEnd)]);
}

async function writeLooseObject(gitDir: string, type: string, body: Buffer): Promise<string> {
  const data = Buffer.concat([Buffer.from(`${type} ${body.length}\0`), body]);
  const oid = createHash('sha1').update(data).digest('hex');
  const dir = path.join(gitDir, 'objects', oid.slice(0, 2));
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, oid.slice(2)), await deflateAsync(data));
  return oid;
}

/**
 * Streams the repository into `<workDir>/.git` through the same channel as the copy and finishes it
 * there, as the agent's user: the index from HEAD (so `git status` shows the user's uncommitted
 * changes as unstaged), or, for a fresh repository, one commit of the copied-in tree (run that
 * one after the copy is in place). `replace` drops a repository installed before.
 */
export async function installSandboxRepo(shell: WorkspaceShell, repo: SandboxRepo, opts: { layout?: WorkspaceLayout; timeoutMs?: number; replace?: boolean } = {}): Promise<void> {
  const layout = opts.layout ?? SANDBOX_LAYOUT;
  const tar = new TarWriter();
  const mtime = new Date(946684800_000);
  const writing = (async () => {
    for (const dir of ['objects', 'objects/info', 'objects/pack', 'refs', 'refs/heads', 'refs/tags', 'info']) await tar.add({ name: dir, type: 'directory', mode: 0o755, mtime });
    for (const f of repo.files) await tar.add({ name: f.path, type: 'file', mode: 0o644, mtime }, f.content);
    await tar.finish();
  })();
  writing.catch((err: unknown) => tar.destroy(err instanceof Error ? err : new Error(String(err))));
  const finish =
    repo.kind === 'history'
      ? // No refresh here (it reads every file, competing with the baseline on the copy's critical
        // path): the agent's first `git status` compares contents once and records the stat data.
        ['git read-tree HEAD']
      : ['git add -A', `git commit -q --no-verify --allow-empty -m 'The project as copied in by Airlock'`];
  const script = ['set -e', 'cd "$1"', ...(opts.replace ? ['rm -rf .git'] : []), 'mkdir .git', 'tar -x -f - -C .git --no-same-owner', ...finish].join('\n');
  await runChecked(
    shell,
    { argv: ['sh', '-c', script, 'sh', layout.workDir], stdin: tar.stream, env: gitEnv(layout), timeoutMs: opts.timeoutMs ?? 30 * 60_000 },
    "setting up the sandbox's git repository",
  );
  await writing;
}
