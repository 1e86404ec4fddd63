import { spawn } from 'node:child_process';
import os from 'node:os';
import type { Readable } from 'node:stream';
import { findTool } from '../common/resolve-tool';
import { AirlockError } from '../../contracts/errors';

/**
 * The one way Airlock runs `git` on the host. Whatever folder it works in (the user's project, a
 * run's object store), git runs:
 * - from an absolute path found once on `PATH`, skipping relative entries, so a `git`/`git.exe`
 *   dropped into the project folder never runs;
 * - with no system or global config, no hooks, no fsmonitor, no pager, no prompts, C locale;
 * - without inherited `GIT_*` variables (`GIT_DIR`, `GIT_INDEX_FILE`… of the caller's shell).
 */

/** Config every host git call gets: nothing from the repository can run code on the host. */
const HARDENING = [
  '-c', `core.hooksPath=${os.devNull}`,
  '-c', 'core.fsmonitor=false',
  '-c', 'core.untrackedCache=false',
  '-c', 'core.quotepath=false',
  '-c', 'core.autocrlf=false',
  '-c', 'core.safecrlf=false',
  '-c', 'core.symlinks=true',
  '-c', 'core.pager=cat',
  '-c', 'diff.external=',
  '-c', 'diff.noprefix=false',
  '-c', 'diff.mnemonicPrefix=false',
  '-c', 'diff.relative=false',
  '-c', 'color.ui=false',
  '-c', 'protocol.allow=never',
];

export interface HostGitOptions {
  cwd: string;
  /** Extra environment (e.g. `GIT_INDEX_FILE`, author identity); `GIT_*` from the caller's shell is dropped. */
  env?: Record<string, string>;
  stdin?: Buffer | string | Readable;
  /** Read the user's global config too (only for the author identity of a branch commit). */
  userConfig?: boolean;
  /** Output above this is an error (default 1 GiB). */
  maxOutputBytes?: number;
}

export interface HostGitResult {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** The host's environment as the root read it (`AppContext.env`, a test's `process.env`). */
export type HostGitEnvironment = Readonly<Record<string, string | undefined>>;

/**
 * Host git for one environment, made once by the composition root (`AppContext.git`,
 * docs/architecture.md §5, "One composition root") and handed to every workspace operation that
 * reads the project or a run's object store. The environment gives git its `PATH` and `HOME` (the
 * user's identity for a branch commit); `GIT_*` variables are dropped from it.
 */
export class HostGit {
  private resolved: Promise<string> | undefined;

  constructor(private readonly hostEnv: HostGitEnvironment) {}

  /** The `PATH` git was looked up on (git's own helpers, e.g. `fast-import`, need it too). */
  get searchPath(): string {
    return this.hostEnv.PATH ?? '';
  }

  /** The absolute path of `git` from `PATH` (resolved once per instance). */
  executable(): Promise<string> {
    // Only git.exe on Windows: a .cmd would need a shell.
    this.resolved ??= findTool(process.platform === 'win32' ? 'git.exe' : 'git', this.hostEnv).then((found) => {
      if (!found) throw new AirlockError('INVALID_INPUT', 'git was not found on PATH; install git to review and apply results.');
      return found;
    });
    this.resolved.catch(() => (this.resolved = undefined));
    return this.resolved;
  }

  /** Runs host git hardened (see the module comment); never throws on a non-zero exit. */
  async run(args: string[], opts: HostGitOptions): Promise<HostGitResult> {
    const exe = await this.executable();
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(this.hostEnv)) if (v !== undefined && !k.startsWith('GIT_')) env[k] = v;
    Object.assign(env, {
      GIT_CONFIG_NOSYSTEM: '1',
      ...(opts.userConfig ? {} : { GIT_CONFIG_GLOBAL: os.devNull }),
      GIT_TERMINAL_PROMPT: '0',
      GIT_OPTIONAL_LOCKS: '0',
      GIT_NO_REPLACE_OBJECTS: '1',
      LC_ALL: 'C',
      ...opts.env,
    });
    return runGit(exe, args, opts, env);
  }

  /** Like `run`, but a non-zero exit is a typed error naming `what`. */
  async ok(args: string[], opts: HostGitOptions, what = `git ${args[0]}`): Promise<Buffer> {
    const r = await this.run(args, opts);
    if (r.code !== 0) throw new AirlockError('INTERNAL', `${what} failed in ${opts.cwd}: ${r.stderr.trim().slice(-500) || `exit ${r.code}`}`);
    return r.stdout;
  }
}

function runGit(exe: string, args: string[], opts: HostGitOptions, env: Record<string, string>): Promise<HostGitResult> {
  const max = opts.maxOutputBytes ?? 1024 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(exe, [...HARDENING, ...args], { cwd: opts.cwd, env, stdio: ['pipe', 'pipe', 'pipe'], windowsHide: true });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      outBytes += c.length;
      if (outBytes > max) {
        child.kill('SIGKILL');
        return;
      }
      out.push(c);
    });
    child.stderr.on('data', (c: Buffer) => {
      if (err.length < 64 * 1024) err += c.toString('utf8');
    });
    child.on('error', (e) => reject(new AirlockError('INVALID_INPUT', `git could not be started (${e.message}); install git to review and apply results.`)));
    child.on('close', (code) => {
      if (outBytes > max) reject(new AirlockError('INTERNAL', `git ${args[0]} produced more than ${max} bytes; refusing the output.`));
      else resolve({ code, stdout: Buffer.concat(out), stderr: err });
    });
    child.stdin.on('error', () => undefined);
    const input = opts.stdin;
    if (input === undefined) child.stdin.end();
    else if (typeof input === 'string' || Buffer.isBuffer(input)) child.stdin.end(input);
    else input.pipe(child.stdin);
  });
}
