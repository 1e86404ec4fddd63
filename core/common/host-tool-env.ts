import os from 'node:os';
import path from 'node:path';

/**
 * Where and how Airlock runs a host tool that is not about the project (docs/architecture.md §12,
 * "Host tools never run the project's code"). A project folder is attacker-influenced (a cloned
 * repository, an applied result), and many tools read their working directory: Python puts it first
 * on its import path (a `pip/` or `json/` package there runs as the user), version managers pick the
 * interpreter from `.python-version`/`.tool-versions`/`.nvmrc` there (pyenv, asdf, mise, nvm, volta),
 * `go` downloads and runs the toolchain a `go.mod` `toolchain` line names, npm merges the `.npmrc`
 * of the package folder it finds above it. So such tools run from the user's home folder (their own
 * configuration, which is what these calls mean to read) and never from `process.cwd()`, which for
 * the CLI is often the project.
 */

/** The working directory of a host tool run that is not about the project: the user's home folder. */
export function hostToolCwd(home: string = os.homedir()): string {
  return home;
}

/**
 * The environment of such a run: the caller's (the user's own settings stay), with toolchains
 * pinned to the installed one (`GOTOOLCHAIN=local`: never fetch and run another `go`) and Python's
 * safe path on (`PYTHONSAFEPATH`: no working directory or script folder on the import path, for
 * Pythons run without `-I`, e.g. behind a tool's own launcher script).
 */
export function hostToolEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return { ...env, GOTOOLCHAIN: 'local', PYTHONSAFEPATH: '1' };
}

/** Whether `inner` is `outer` or inside it. */
export function isInsideFolder(inner: string, outer: string): boolean {
  const rel = path.relative(path.resolve(outer), path.resolve(inner));
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}
