import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';

/**
 * One stored file of Airlock's home (docs/architecture.md §5, "Stored files"): a checked read, a
 * serialised update and a durable atomic write, with one file mode (0600, folders 0700).
 *
 * - **Read**: `parse` turns the text into the value or throws an error naming the file and the fix
 *   (a damaged file is never silently reset: saving over it would lose the rest). Missing → `empty()`.
 * - **Update**: read, change, write as one step. Updates of the same file queue behind each other in
 *   this process (every StoredFile of one path shares the queue), and across processes (the app and a
 *   CLI) behind a lock folder beside the file; a lock whose owner is gone for 30 s is taken over.
 * - **Write**: a unique temporary file, flushed to disk, renamed over the file, the folder flushed:
 *   after a crash the file is the old one or the new one, whole.
 */
export class StoredFile<T> {
  constructor(
    readonly file: string,
    private readonly format: { parse(file: string, text: string): T; empty(): T },
  ) {}

  /** The stored value, or `empty()` when there is no file yet. */
  async read(): Promise<T> {
    const text = await this.readText();
    return text === undefined ? this.format.empty() : this.format.parse(this.file, text);
  }

  /**
   * Reads, applies `change` and writes, with no other update of this file in between (this process or
   * another). A result that is stored already, byte for byte, is not written again.
   */
  update(change: (current: T) => T | Promise<T>): Promise<T> {
    return serialised(this.file, () =>
      withLockFolder(`${this.file}.lock`, async () => {
        const before = await this.readText();
        const next = await change(before === undefined ? this.format.empty() : this.format.parse(this.file, before));
        const after = `${JSON.stringify(next, null, 2)}\n`;
        if (after !== before) await writeDurably(this.file, after);
        return next;
      }),
    );
  }

  private async readText(): Promise<string | undefined> {
    try {
      return await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }
}

/** The queue of each file's updates in this process, by path. */
const queues = new Map<string, Promise<unknown>>();

function serialised<R>(file: string, step: () => Promise<R>): Promise<R> {
  const before = queues.get(file) ?? Promise.resolve();
  const run = before.then(step, step);
  const tail = run.then(
    () => undefined,
    () => undefined,
  );
  queues.set(file, tail);
  void tail.then(() => {
    if (queues.get(file) === tail) queues.delete(file);
  });
  return run;
}

/** A lock held longer than this by a process that no longer updates it is stale. */
const STALE_LOCK_MS = 30_000;
const LOCK_WAIT_MS = 60_000;

async function withLockFolder<R>(lock: string, step: () => Promise<R>): Promise<R> {
  await mkdir(path.dirname(lock), { recursive: true, mode: 0o700 });
  const started = Date.now();
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    try {
      await mkdir(lock, { mode: 0o700 });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = await stat(lock).then((s) => Date.now() - s.mtimeMs, () => 0);
      if (age > STALE_LOCK_MS) {
        // Its owner died mid-update (an update takes milliseconds): the file itself is whole either way.
        await rm(lock, { recursive: true, force: true });
        continue;
      }
      if (Date.now() - started > LOCK_WAIT_MS) throw new AirlockError('CONFLICT', `${lock} has been held for over a minute by another Airlock process; if none is running, delete that folder and retry.`);
      await new Promise((r) => setTimeout(r, delay));
    }
  }
  try {
    return await step();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

/** Writes `text` to `file` whole or not at all, and durably (0600). */
export async function writeDurably(file: string, text: string): Promise<void> {
  const dir = path.dirname(file);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(tmp, 'w', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  // The rename itself survives a power cut only once the folder is flushed (not possible on Windows).
  if (process.platform !== 'win32') {
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  }
}
