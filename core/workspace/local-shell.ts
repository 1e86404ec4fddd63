import { spawn } from 'node:child_process';
import { watch as fsWatch } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { toDisposable, type Disposable } from '../common/disposable';
import type { ShellRunOptions, ShellRunResult, ShellWatchOptions, WorkspaceLayout, WorkspaceShell } from './workspace-shell';

/**
 * A `WorkspaceShell` on the host (child_process in a directory of the caller's choosing). It lets
 * the workspace code be tested without a sandbox, and serves `airlock` commands that work on local
 * copies. It isolates nothing: never point it at a user's project.
 */
export class LocalShell implements WorkspaceShell {
  /** `env`: the environment commands run with (the caller's, with each command's own `env` on top). */
  constructor(private readonly env: NodeJS.ProcessEnv) {}

  async run(opts: ShellRunOptions): Promise<ShellRunResult> {
    const started = performance.now();
    const [cmd, ...args] = opts.argv;
    if (!cmd) throw new Error('LocalShell.run: empty argv');
    const maxOutput = opts.maxOutputBytes ?? Number.POSITIVE_INFINITY;
    return new Promise((resolve, reject) => {
      const child = spawn(cmd, args, {
        cwd: opts.cwd,
        env: { ...this.env, ...opts.env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let outputBytes = 0;
      let kept = 0;
      let truncated = false;
      let timedOut = false;
      const collect = (into: Buffer[]) => (chunk: Buffer) => {
        outputBytes += chunk.length;
        if (kept >= maxOutput) {
          truncated = true;
          return;
        }
        const room = maxOutput - kept;
        const part = chunk.length > room ? chunk.subarray(0, room) : chunk;
        if (part.length < chunk.length) truncated = true;
        kept += part.length;
        into.push(part);
      };
      child.stdout.on('data', collect(out));
      child.stderr.on('data', collect(err));
      const timer = opts.timeoutMs
        ? setTimeout(() => {
            timedOut = true;
            child.kill('SIGKILL');
          }, opts.timeoutMs)
        : undefined;
      child.on('error', (e) => {
        if (timer) clearTimeout(timer);
        reject(e);
      });
      child.on('close', (exitCode, signal) => {
        if (timer) clearTimeout(timer);
        resolve({
          exitCode,
          signal,
          timedOut,
          truncated,
          durationMs: performance.now() - started,
          outputBytes,
          stdout: Buffer.concat(out),
          stderr: Buffer.concat(err),
        });
      });
      // A child that exits before reading all of stdin must not crash the host with EPIPE.
      child.stdin.on('error', () => undefined);
      const input = opts.stdin;
      if (input === undefined) {
        child.stdin.end();
      } else if (typeof input === 'string' || Buffer.isBuffer(input)) {
        child.stdin.end(input);
      } else {
        const readable = input instanceof Readable ? input : Readable.from(input as AsyncIterable<Buffer>);
        let ended = false;
        readable.on('end', () => (ended = true));
        readable.on('error', (e) => child.stdin.destroy(e));
        // A source destroyed midway must close the child's stdin, or the child waits forever.
        readable.on('close', () => {
          if (!ended) child.stdin.destroy();
        });
        readable.pipe(child.stdin);
      }
    });
  }

  /** Recursive `fs.watch` with a debounce; paths are relative to `dir`. */
  async watch(dir: string, listener: (paths: string[]) => void, opts: ShellWatchOptions = {}): Promise<Disposable> {
    const debounceMs = opts.debounceMs ?? 100;
    const ignore = opts.ignore ?? [];
    const pending = new Set<string>();
    let timer: NodeJS.Timeout | undefined;
    const watcher = fsWatch(dir, { recursive: true }, (_event, name) => {
      if (!name) return;
      const rel = name.toString().split(path.sep).join('/');
      if (ignore.some((prefix) => rel === prefix.replace(/\/$/, '') || rel.startsWith(prefix) || rel.includes(`/${prefix}`))) return;
      pending.add(rel);
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        const paths = [...pending].sort();
        pending.clear();
        listener(paths);
      }, debounceMs);
    });
    watcher.on('error', () => undefined);
    return toDisposable(() => {
      if (timer) clearTimeout(timer);
      watcher.close();
    });
  }
}

/** A layout under a host directory (tests and local tools): `<root>/workspace` and `<root>/airlock`. */
export async function localLayout(root: string): Promise<WorkspaceLayout> {
  const layout = { workDir: path.join(root, 'workspace'), stateDir: path.join(root, 'airlock') };
  await mkdir(layout.workDir, { recursive: true });
  await mkdir(layout.stateDir, { recursive: true });
  return layout;
}
