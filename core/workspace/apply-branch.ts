import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import type { ApplyOptions, ApplyOutcome } from './apply';
import { ABSENT, foldedTogether, plan, type Entry, type FileState } from './apply-plan';
import type { HostGit } from './host-git';
import { foldName } from './result-paths';
import { gitTopLevel } from './snapshot';

export async function applyToBranch(projectDir: string, entries: Entry[], opts: ApplyOptions, scratch: string): Promise<Omit<ApplyOutcome, 'patchSha256'>> {
  const host = opts.repo.host;
  const top = await gitTopLevel(host, projectDir);
  if (!top || top !== projectDir) {
    throw new AirlockError('INVALID_INPUT', `${projectDir} is not the top folder of a git repository; branch mode needs one. Apply to the working tree instead.`);
  }
  const git = (args: string[], input?: Buffer, env: Record<string, string> = {}) => host.run(args, { cwd: projectDir, env, ...(input ? { stdin: input } : {}) });
  const gitOk = async (args: string[], env: Record<string, string> = {}, input?: Buffer) => (await host.ok(args, { cwd: projectDir, env, ...(input ? { stdin: input } : {}) })).toString('utf8');
  const branch = opts.branch ?? `airlock/result-${new Date().toISOString().replace(/[-:]/g, '').replace(/\..*/, '').replace('T', '-')}`;
  if ((await git(['check-ref-format', '--branch', branch])).code !== 0) {
    throw new AirlockError('INVALID_INPUT', `'${branch}' is not a valid branch name; pick another.`);
  }
  const exists = async (name: string) => (await git(['rev-parse', '--verify', '-q', `refs/heads/${name}`])).code === 0;
  if (await exists(branch)) {
    const free = await freeBranchName(branch, exists);
    throw new AirlockError('CONFLICT', `Branch '${branch}' already exists (this result may have been applied before); apply to a new branch such as '${free}'. Nothing was applied.`, { field: 'branch', suggestion: free });
  }
  const startCandidates = [opts.result.headCommit, 'HEAD'].filter((c): c is string => !!c);
  let start: string | undefined;
  for (const c of startCandidates) {
    const r = await git(['rev-parse', '--verify', '-q', `${c}^{commit}`]);
    if (r.code === 0) {
      start = r.stdout.toString('utf8').trim();
      break;
    }
  }
  if (!start) throw new AirlockError('INVALID_INPUT', 'The repository has no commit to branch from; make a first commit, or apply to the working tree.');

  const tree = await git(['ls-tree', '-r', '-z', '--full-tree', start]);
  const listing = new Map<string, { mode: string; oid: string }>();
  for (const rec of tree.stdout.toString('utf8').split('\0')) {
    const m = /^(\d+) (\w+) ([0-9a-f]+)\t(.*)$/s.exec(rec);
    if (m) listing.set(m[4] as string, { mode: m[1] as string, oid: m[3] as string });
  }
  const ours = async (rel: string): Promise<FileState> => {
    const e = listing.get(rel);
    if (!e) return ABSENT;
    if (e.mode === '160000') return { kind: 'other', what: 'submodule' };
    const blob = await git(['cat-file', 'blob', e.oid]);
    return e.mode === '120000' ? { kind: 'symlink', target: blob.stdout.toString('utf8') } : { kind: 'file', content: blob.stdout, exec: e.mode === '100755' };
  };
  // The branch is checked out somewhere one day: the same name rules as the working tree.
  const folded = foldedTogether(entries);
  const existing = new Map<string, string>();
  for (const p of listing.keys()) {
    const parts = p.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const sub = parts.slice(0, i).join('/');
      existing.set(foldName(sub), sub);
    }
  }
  const refuse = async (rel: string) => {
    if (folded.has(rel)) return folded.get(rel);
    const parts = rel.split('/');
    for (let i = 1; i <= parts.length; i++) {
      const sub = parts.slice(0, i).join('/');
      const other = existing.get(foldName(sub));
      if (other !== undefined && other !== sub) return `the branch has ${other}, the same name as ${sub} on case-insensitive or normalising file systems; refusing it`;
    }
    return undefined;
  };
  const p = await plan(host, entries, scratch, ours, refuse, opts.resolved);
  // Whole or nothing, as in the working tree; and no empty commit when the branch start already has it all.
  if ((p.conflicts.length && !opts.skipConflicts) || p.writes.size === 0) return { applied: [], conflicts: p.conflicts, held: p.conflicts.length ? p.applied : [], unchanged: p.unchanged };
  const index = path.join(scratch, 'branch.index');
  const env = { GIT_INDEX_FILE: index };
  const lines: string[] = [];
  for (const [rel, state] of p.writes) {
    if (state.kind === 'absent') {
      lines.push(`0 ${'0'.repeat(40)}\t${rel}`);
      continue;
    }
    const content = state.kind === 'file' ? state.content : Buffer.from(state.kind === 'symlink' ? state.target : '');
    const w = await git(['hash-object', '-w', '--no-filters', '--stdin'], content);
    if (w.code !== 0) throw new AirlockError('INTERNAL', `Writing ${rel} into the repository failed: ${w.stderr}`);
    const mode = state.kind === 'symlink' ? '120000' : state.kind === 'file' && state.exec ? '100755' : '100644';
    lines.push(`${mode} ${w.stdout.toString('utf8').trim()}\t${rel}`);
  }
  await gitOk(['read-tree', start], env);
  if (lines.length) await gitOk(['update-index', '-z', '--index-info'], env, Buffer.from(lines.map((l) => `${l}\0`).join('')));
  const treeId = (await gitOk(['write-tree'], env)).trim();
  const message = commitMessage(opts.message, p.applied.length, p.conflicts.map((c) => c.path));
  // The author is the user's identity as git resolves it for the project (global config is read
  // for that call only); without one the commit is Airlock's and the caller says so.
  const ident = await userIdentity(host, projectDir);
  const identEnv: Record<string, string> = ident
    ? {}
    : { GIT_AUTHOR_NAME: 'Airlock', GIT_AUTHOR_EMAIL: 'airlock@localhost', GIT_COMMITTER_NAME: 'Airlock', GIT_COMMITTER_EMAIL: 'airlock@localhost' };
  const commit = (await host.ok(['commit-tree', treeId, '-p', start, '-F', '-'], { cwd: projectDir, env: identEnv, stdin: Buffer.from(message), userConfig: true })).toString('utf8').trim();
  await gitOk(['update-ref', '-m', 'airlock: apply run result', `refs/heads/${branch}`, commit, '0'.repeat(40)]);
  return { applied: p.applied, conflicts: p.conflicts, held: [], unchanged: p.unchanged, branch, commit, author: ident ?? 'Airlock <airlock@localhost>', ...(ident ? {} : { authorFallback: true }) };
}

/** `Name <email>` from the user's git config for the project (local, then global), or undefined. */
async function userIdentity(host: HostGit, projectDir: string): Promise<string | undefined> {
  const get = async (key: string) => {
    const r = await host.run(['config', '--get', key], { cwd: projectDir, userConfig: true });
    return r.code === 0 ? r.stdout.toString('utf8').trim() : '';
  };
  const [name, email] = [await get('user.name'), await get('user.email')];
  return name && email ? `${name} <${email}>` : undefined;
}

/** `base-2`, `base-3`… : the first name that `exists` says is free. */
export async function freeBranchName(base: string, exists: (name: string) => Promise<boolean>): Promise<string> {
  for (let i = 2; ; i++) {
    const name = `${base}-${i}`;
    if (!(await exists(name))) return name;
  }
}

/**
 * The branch commit's message: the given text (e.g. the task) with a subject of at most 72
 * characters (a longer first line is cut at a word and continued in the body), or a default.
 */
export function commitMessage(text: string | undefined, applied: number, leftOut: string[]): string {
  const footer = `Applied: ${applied} ${applied === 1 ? 'file' : 'files'}${leftOut.length ? `; left out (conflicts): ${leftOut.join(', ')}` : ''}`;
  const lines = (text ?? '').replace(/\r\n?/g, '\n').trim().split('\n');
  let subject = (lines.shift() ?? '').trim();
  let body = lines.join('\n').trim();
  if (!subject) return `Airlock run result\n\n${footer}\n`;
  if (subject.length > 72) {
    const cut = subject.lastIndexOf(' ', 71);
    const at = cut > 20 ? cut : 71;
    const rest = subject.slice(at).trim();
    subject = `${subject.slice(0, at).trimEnd()}…`;
    body = `…${rest}${body ? `\n\n${body}` : ''}`;
  }
  return `${subject}\n\n${body ? `${body}\n\n` : ''}${footer}\n`;
}
