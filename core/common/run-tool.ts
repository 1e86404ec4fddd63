import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { AirlockError } from '../../contracts/errors';
import { hostToolCwd, hostToolEnv } from './host-tool-env';
import { findTool } from './resolve-tool';

export interface ToolResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: Buffer;
  stderr: string;
}

export interface RunToolOptions {
  /** The tool is killed (SIGKILL) after this long; default 60 s. */
  timeoutMs?: number;
  /** Written (or piped) to the tool's stdin, which is then closed. */
  input?: string | Buffer | Readable;
  /** The host's environment, from the root (a host tool sees the user's own settings on purpose). */
  env: NodeJS.ProcessEnv;
  /** Default: the user's home folder, never the current folder (often the project: docs/architecture.md §12). */
  cwd?: string;
  /** Stdout kept in memory at most (bytes); the rest is dropped. Default 16 MiB. */
  maxStdoutBytes?: number;
}

/**
 * Runs a host tool (qemu-img, mke2fs, docker, limactl, wsl.exe) to completion, bounded in time and
 * output. Never throws for a non-zero exit: callers decide; throws VM_UNAVAILABLE when the tool is
 * not installed.
 */
export async function runTool(cmd: string, args: readonly string[], opts: RunToolOptions): Promise<ToolResult> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const maxStdout = opts.maxStdoutBytes ?? 16 * 1024 * 1024;
  // From PATH, never from the current folder (which may be the user's project).
  const bin = await findTool(cmd, opts.env);
  if (!bin) throw new AirlockError('VM_UNAVAILABLE', `'${cmd}' is not installed or not on PATH.`);
  return new Promise((resolve, reject) => {
    const child = spawn(bin, [...args], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: hostToolEnv(opts.env),
      cwd: opts.cwd ?? hostToolCwd(),
      windowsHide: true,
    });
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => {
      if (outBytes < maxStdout) out.push(chunk);
      outBytes += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      // Keep the end: that is where tools say what went wrong.
      err = (err + chunk.toString('utf8')).slice(-8192);
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (e.code === 'ENOENT') {
        reject(new AirlockError('VM_UNAVAILABLE', `'${cmd}' is not installed or not on PATH.`, { cause: e }));
      } else {
        reject(new AirlockError('SANDBOX_FAILED', `Could not run '${cmd}': ${e.message}`, { cause: e }));
      }
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out), stderr: err });
    });
    child.stdin.on('error', () => undefined);
    const input = opts.input;
    if (input instanceof Readable) {
      // A failing source ends the tool too (it sees a cut stream and fails on its own).
      input.once('error', (e) => child.stdin.destroy(e));
      input.pipe(child.stdin);
    } else if (input !== undefined) child.stdin.end(input);
    else child.stdin.end();
  });
}

/** runTool that throws SANDBOX_FAILED with `what` and the tool's stderr when it does not exit 0. */
export async function runToolOk(cmd: string, args: readonly string[], what: string, opts: RunToolOptions): Promise<ToolResult> {
  const r = await runTool(cmd, args, opts);
  if (r.code !== 0) {
    const why = r.signal ? `killed by ${r.signal}${r.signal === 'SIGKILL' ? ' (timed out)' : ''}` : `exit code ${r.code}`;
    throw new AirlockError('SANDBOX_FAILED', `${what}: ${cmd} failed (${why}): ${r.stderr.trim().slice(-1000) || 'no error output'}`);
  }
  return r;
}
