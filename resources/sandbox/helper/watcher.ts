/**
 * Watches a directory tree and reports debounced batches of changed relative paths.
 * Backends, best first: `inotifywait -m -r` (Airlock's copy in a sandbox), `fs.watch` recursive
 * (Node >= 20 on Linux), polling (stat walk).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { watch as fsWatch, type FSWatcher } from 'node:fs';
import { access, readdir, lstat, stat } from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import { join, relative, sep } from 'node:path';
import type { WatchBackend } from '../../../core/channel/protocol';
import { HelperError, fromSystemError } from './errors';
import { escapeForRegex, ignoreMatcher, ignoreRegexSource } from './ignore-globs';

export interface WatchHandle {
  readonly backend: Exclude<WatchBackend, 'auto'>;
  dispose(): void;
}

interface WatchOptions {
  debounceMs: number;
  ignore: string[];
  backend: WatchBackend;
  onPaths(paths: string[]): void;
  onError(message: string): void;
}

/** Collects paths and flushes them after `debounceMs` of quiet (at most every 10 × debounceMs). */
class Debouncer {
  private paths = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private firstAt = 0;

  constructor(
    private readonly ms: number,
    private readonly flushTo: (paths: string[]) => void,
  ) {}

  add(path: string): void {
    if (this.paths.size === 0) this.firstAt = Date.now();
    this.paths.add(path);
    if (this.timer) clearTimeout(this.timer);
    const wait = Math.max(0, Math.min(this.ms, this.firstAt + this.ms * 10 - Date.now()));
    this.timer = setTimeout(() => this.flush(), wait);
  }

  flush(): void {
    this.timer = undefined;
    if (this.paths.size === 0) return;
    const paths = [...this.paths].sort();
    this.paths.clear();
    this.flushTo(paths);
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.paths.clear();
  }
}

/**
 * Inside a sandbox the helper runs from /opt/airlock as root: it starts Airlock's own inotifywait
 * through Airlock's loader and libraries, never the image's program or libc (a derived image's are the
 * project's; docs/architecture.md §2.3). Without it, the fs backend. Elsewhere (a helper on the host,
 * in tests) the one on the PATH.
 */
const AIRLOCK_INOTIFYWAIT = '/opt/airlock/libexec/inotifywait';
const AIRLOCK_LOADER_ARGV = ['/opt/airlock/lib/ld.so', '--inhibit-cache', '--library-path', '/opt/airlock/lib'];

async function inotifyCommand(): Promise<string[] | undefined> {
  if (process.argv[1]?.startsWith('/opt/airlock/')) {
    try {
      await access(AIRLOCK_INOTIFYWAIT, fsConstants.R_OK);
      return [...AIRLOCK_LOADER_ARGV, AIRLOCK_INOTIFYWAIT];
    } catch {
      return undefined;
    }
  }
  const bin = await findOnPath('inotifywait');
  return bin ? [bin] : undefined;
}

async function findOnPath(name: string): Promise<string | undefined> {
  for (const dir of (process.env.PATH || '/usr/local/bin:/usr/bin:/bin').split(':')) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Every file and directory below `dir`, relative to `root`, skipping ignored subtrees. */
async function walk(root: string, dir: string, ignored: (rel: string) => boolean, out: Map<string, string>): Promise<void> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return;
  }
  await Promise.all(
    entries.map(async (entry) => {
      const full = join(dir, entry.name);
      const rel = relative(root, full).split(sep).join('/');
      if (ignored(rel)) return;
      try {
        const st = await lstat(full);
        out.set(rel, `${st.mtimeMs}:${st.size}:${st.ino}:${st.mode}`);
        if (st.isDirectory()) await walk(root, full, ignored, out);
      } catch {
        // Gone meanwhile.
      }
    }),
  );
}

function startInotify(command: string[], root: string, opts: WatchOptions, debouncer: Debouncer, ignored: (rel: string) => boolean): Promise<ChildProcess> {
  const args = ['-m', '-r', '--format', '%e %w%f', '-e', 'modify,attrib,close_write,move,create,delete'];
  const exclude = ignoreRegexSource(opts.ignore, `${escapeForRegex(root.replace(/\/+$/, ''))}/`);
  if (exclude) args.push('--exclude', exclude);
  args.push(root);
  const [bin, ...pre] = command as [string, ...string[]];
  const child = spawn(bin, [...pre, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const prefix = root.endsWith('/') ? root : `${root}/`;
  let lineBuf = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (text: string) => {
    lineBuf += text;
    let nl;
    while ((nl = lineBuf.indexOf('\n')) >= 0) {
      const line = lineBuf.slice(0, nl);
      lineBuf = lineBuf.slice(nl + 1);
      const space = line.indexOf(' ');
      if (space < 0) continue;
      const events = line.slice(0, space);
      const full = line.slice(space + 1);
      if (!full.startsWith(prefix)) continue;
      const rel = full.slice(prefix.length);
      if (rel === '' || ignored(rel)) continue;
      debouncer.add(rel);
      // Files created in a new directory before inotifywait watched it would be missed: scan it.
      if (events.includes('ISDIR') && (events.includes('CREATE') || events.includes('MOVED_TO'))) {
        const found = new Map<string, string>();
        void walk(root, full, ignored, found).then(() => {
          for (const path of found.keys()) debouncer.add(path);
        });
      }
    }
  });
  return new Promise((resolve, reject) => {
    let stderr = '';
    let ready = false;
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (text: string) => {
      if (ready) return;
      stderr += text;
      if (stderr.includes('Watches established')) {
        ready = true;
        resolve(child);
      }
    });
    child.on('error', (err) => reject(err));
    child.on('exit', (code) => {
      if (!ready) reject(new Error(`inotifywait exited (${code}): ${stderr.trim().slice(-300)}`));
      else opts.onError(`inotifywait stopped (exit ${code}); changes are no longer reported`);
    });
  });
}

export async function watchTree(root: string, opts: WatchOptions): Promise<WatchHandle> {
  if (typeof root !== 'string' || root === '') throw new HelperError('INVALID_INPUT', 'watch needs a directory path');
  try {
    const st = await stat(root);
    if (!st.isDirectory()) throw new HelperError('INVALID_INPUT', `watch ${root}: not a directory`);
  } catch (err) {
    throw fromSystemError(err, `watch ${root}`);
  }
  const ignored = ignoreMatcher(opts.ignore);
  const debouncer = new Debouncer(opts.debounceMs, opts.onPaths);
  const want = opts.backend;

  if (want === 'auto' || want === 'inotify') {
    const command = await inotifyCommand();
    if (command) {
      try {
        const child = await startInotify(command, root, opts, debouncer, ignored);
        return {
          backend: 'inotify',
          dispose() {
            debouncer.dispose();
            child.kill('SIGKILL');
          },
        };
      } catch (err) {
        if (want === 'inotify') throw new HelperError('INTERNAL', `watch ${root}: ${(err as Error).message}`);
      }
    } else if (want === 'inotify') {
      throw new HelperError('IMAGE_INCOMPATIBLE', 'watch: inotifywait is not installed (apt-get install inotify-tools)');
    }
  }

  if (want === 'auto' || want === 'fs') {
    try {
      const watcher: FSWatcher = fsWatch(root, { recursive: true }, (_event, filename) => {
        if (!filename) return;
        const rel = filename.toString().split(sep).join('/');
        if (!ignored(rel)) debouncer.add(rel);
      });
      watcher.on('error', (err) => opts.onError(`watch ${root}: ${err.message}`));
      return {
        backend: 'fs',
        dispose() {
          debouncer.dispose();
          watcher.close();
        },
      };
    } catch (err) {
      if (want === 'fs') throw new HelperError('INTERNAL', `watch ${root}: recursive fs.watch unavailable (${(err as Error).message})`);
    }
  }

  // Polling: compare stat snapshots of the tree.
  let snapshot = new Map<string, string>();
  await walk(root, root, ignored, snapshot);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const interval = Math.max(100, Math.min(opts.debounceMs, 1000));
  const tick = async () => {
    const next = new Map<string, string>();
    await walk(root, root, ignored, next);
    if (stopped) return;
    for (const [path, sig] of next) if (snapshot.get(path) !== sig) debouncer.add(path);
    for (const path of snapshot.keys()) if (!next.has(path)) debouncer.add(path);
    snapshot = next;
    timer = setTimeout(() => void tick(), interval);
  };
  timer = setTimeout(() => void tick(), interval);
  return {
    backend: 'poll',
    dispose() {
      stopped = true;
      if (timer) clearTimeout(timer);
      debouncer.dispose();
    },
  };
}
