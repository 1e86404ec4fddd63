/* Test support for the workspace: temp projects, a local "sandbox", tree fingerprints. */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { collectResult, type CollectedResult, type CollectOptions } from '../../core/workspace/collect';
import { hydrate, type HydrateOptions, type HydrateResult } from '../../core/workspace/hydrate';
import { HostGit } from '../../core/workspace/host-git';
import { HostRepo } from '../../core/workspace/host-repo';
import { LocalShell, localLayout } from '../../core/workspace/local-shell';
import { snapshotProject, type ProjectSnapshot, type SnapshotOptions } from '../../core/workspace/snapshot';
import type { WorkspaceLayout } from '../../core/workspace/workspace-shell';

/** Host git on the test process's environment (a test is a composition root). */
export const testGit = new HostGit(process.env);

export type TreeSpec = Record<string, string | Buffer | { content: string | Buffer; mode?: number } | { symlink: string }>;

const temps: string[] = [];

export function tempDir(prefix = 'airlock-ws-'): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

export function cleanupTemps(): void {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
}

export function writeTree(root: string, spec: TreeSpec): void {
  for (const [rel, v] of Object.entries(spec)) {
    const full = path.join(root, rel);
    mkdirSync(path.dirname(full), { recursive: true });
    if (typeof v === 'object' && !Buffer.isBuffer(v) && 'symlink' in v) {
      symlinkSync(v.symlink, full);
    } else if (typeof v === 'string' || Buffer.isBuffer(v)) {
      writeFileSync(full, v);
    } else {
      writeFileSync(full, v.content);
      if (v.mode !== undefined) chmodSync(full, v.mode);
    }
  }
}

export function git(cwd: string, args: string[], input?: string | Buffer): string {
  return execFileSync('git', ['-c', 'core.safecrlf=false', '-c', 'user.name=Test', '-c', 'user.email=test@example.invalid', '-c', 'init.defaultBranch=main', ...args], {
    cwd,
    input,
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
  }).toString('utf8');
}

export function gitRepo(spec: TreeSpec): string {
  const dir = tempDir('airlock-proj-');
  writeTree(dir, spec);
  git(dir, ['init', '-q']);
  git(dir, ['add', '-A']);
  git(dir, ['commit', '-qm', 'initial']);
  return dir;
}

/** Every entry under `root` (`.git` included) with type, mode and content hash: equal ⇔ untouched. */
export function fingerprint(root: string, opts: { skipGit?: boolean } = {}): string {
  const h = createHash('sha256');
  const walk = (rel: string) => {
    const full = path.join(root, rel);
    const st = lstatSync(full);
    // The root's own mode depends on how the folder was made (mkdtemp, a volume): not compared.
    h.update(`${rel}\0${rel ? st.mode : 0}\0`);
    if (st.isSymbolicLink()) h.update(readlinkSync(full));
    else if (st.isFile()) h.update(readFileSync(full));
    else if (st.isDirectory()) for (const n of readdirSync(full).sort()) if (!(opts.skipGit && !rel && n === '.git')) walk(rel ? `${rel}/${n}` : n);
  };
  walk('');
  return h.digest('hex');
}

export interface LocalSandbox {
  shell: LocalShell;
  layout: WorkspaceLayout;
  snapshot: ProjectSnapshot;
  hydrated: HydrateResult;
  /** The run's host object store (host baseline written at hydrate). */
  repo: HostRepo;
  /** Path inside the local "sandbox" copy. */
  at(rel: string): string;
}

/** A collected result plus the store it lives in (what apply takes). */
export interface LocalResult extends CollectedResult {
  repo: HostRepo;
}

/** Collects the local sandbox's result on the host, like a run does before the wipe. */
export async function collectLocal(sb: LocalSandbox, opts: Partial<CollectOptions> = {}): Promise<LocalResult> {
  const collected = await collectResult(sb.shell, {
    layout: sb.layout,
    repo: sb.repo,
    baseCommit: await (sb.hydrated.hostBaseline as Promise<string>),
    manifest: sb.hydrated.manifest,
    isIgnored: sb.snapshot.isIgnored,
    ...(sb.snapshot.headCommit ? { headCommit: sb.snapshot.headCommit } : {}),
    ...opts,
  });
  return { ...collected, repo: sb.repo };
}

/** Snapshots the project and hydrates it into a temp dir through the LocalShell. */
export async function localSandbox(projectDir: string, opts?: SnapshotOptions, repoDir?: string, hydrateOpts: Pick<HydrateOptions, 'gitHistory'> = {}): Promise<LocalSandbox> {
  const shell = new LocalShell(process.env);
  const layout = await localLayout(tempDir('airlock-sbx-'));
  const snapshot = await snapshotProject(testGit, projectDir, opts);
  const repo = await HostRepo.create(testGit, repoDir ?? path.join(tempDir('airlock-objects-'), 'objects.git'));
  const hydrated = await hydrate(shell, snapshot, { layout, hostRepo: repo, ...hydrateOpts });
  return { shell, layout, snapshot, hydrated, repo, at: (rel) => path.join(layout.workDir, rel) };
}
