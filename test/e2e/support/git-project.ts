import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);

/** Runs git in `cwd`; its stdout. */
export const git = async (cwd: string, ...args: string[]): Promise<string> => (await exec('git', args, { cwd })).stdout;

/**
 * A project the e2e tests apply to: a git repository on `main` with `files` committed once, and a
 * user identity of its own in the repository's config (what a branch apply commits as).
 */
export async function gitProject(prefix: string, files: Record<string, string>, person: { name: string; email: string }): Promise<string> {
  const project = await mkdtemp(join(tmpdir(), prefix));
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(project, path)), { recursive: true });
    await writeFile(join(project, path), content);
  }
  await git(project, 'init', '-q', '-b', 'main');
  await git(project, 'config', 'user.name', person.name);
  await git(project, 'config', 'user.email', person.email);
  await git(project, 'add', '-A');
  await git(project, 'commit', '-qm', 'init');
  return project;
}
