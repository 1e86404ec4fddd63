import { copyFile, mkdir, open, readdir, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { debugLog } from '../common/debug-log';
import { StoredFile } from '../common/stored-file';
import { checkStoredValue } from '../common/stored-json';
import { RunId, requireRunId } from '../../contracts/ids';
import type { Disposable } from '../common/disposable';
import type { HostGit } from '../workspace/host-git';
import { StoredRun, upgradeStoredRun, type StoredRunInput } from './run-record';

/** Where one run's files live. */
export interface RunPaths {
  dir: string;
  /** The run record (atomic writes). */
  record: string;
  /** The previous version of the record, kept as a fallback while a new one is swapped in. */
  recordBackup: string;
  /** Hash-chained audit log (`core/audit`). */
  audit: string;
  /** What was applied to the project, chained on from the audit log's seal (`openApplyLog`). */
  applyLog: string;
  /** Every event of the run as JSON lines, terminal output included, for replay. */
  events: string;
  /** The final patch. */
  patch: string;
  /** A folder for whatever the apply step needs (baseline snapshot, result tree…). */
  artifacts: string;
}

/** A run folder whose record could not be read. */
export interface UnreadableRun {
  runId: string;
  dir: string;
  reason: string;
}

export interface RunListing {
  /** Newest first. */
  runs: StoredRun[];
  /** Folders that are not (or no longer) readable runs; shown, never thrown. */
  unreadable: UnreadableRun[];
}

/** A partial update, or a function from the current record to the next. */
export type RunUpdate = Partial<StoredRun> | ((current: StoredRun) => StoredRun);

export interface RunStoreOptions {
  /** Airlock's data directory (the context's home); runs go under `<home>/runs`. */
  home: string;
  /** Host git, for the runs' object stores (`<run>/artifacts/objects.git`). */
  git: HostGit;
  /** Events are written when this many bytes are buffered … */
  eventFlushBytes?: number;
  /** … or this long after the first buffered one. */
  eventFlushMs?: number;
}

/** Event bytes queued for the disk at most: a producer faster than the disk loses events, not memory. */
const MAX_QUEUED_EVENT_BYTES = 64 * 1024 * 1024;

interface EventBuffer {
  lines: string[];
  bytes: number;
  /** Events dropped because the queue was full (the sandbox can produce events faster than a disk). */
  dropped?: number;
  timer?: NodeJS.Timeout;
  /** The events file may end in a torn line (crash) — checked before the first append. */
  checkedTail: boolean;
  /** The write loop in progress, if any. */
  draining?: Promise<void>;
  /** The open events file, closed after a quiet second. */
  handle?: FileHandle;
  idle?: NodeJS.Timeout;
}

/**
 * Run history on disk: one folder per run under `<home>/runs/<runId>/`.
 *
 * Crash safety: `run.json` is a StoredFile (durable atomic replace, updates serialised in this
 * process and across processes); the previous version stays as `run.json.bak` and is used if
 * `run.json` is unreadable. `events.jsonl` is appended in whole lines and a torn last line is
 * skipped on read and fenced off before the next append.
 */
export class RunStore implements Disposable {
  readonly root: string;
  /** Host git, for the runs' object stores. */
  readonly git: HostGit;
  private readonly locks = new Map<string, Promise<unknown>>();
  private readonly buffers = new Map<string, EventBuffer>();
  private readonly flushBytes: number;
  private readonly flushMs: number;

  constructor(options: RunStoreOptions) {
    this.root = path.join(options.home, 'runs');
    this.git = options.git;
    this.flushBytes = options.eventFlushBytes ?? 64 * 1024;
    this.flushMs = options.eventFlushMs ?? 50;
  }

  /** Paths of one run's files (the run id is validated: no path tricks). */
  paths(runId: string): RunPaths {
    const id = checkRunId(runId);
    const dir = path.join(this.root, id);
    return {
      dir,
      record: path.join(dir, 'run.json'),
      recordBackup: path.join(dir, 'run.json.bak'),
      audit: path.join(dir, 'audit.jsonl'),
      applyLog: path.join(dir, 'apply.jsonl'),
      events: path.join(dir, 'events.jsonl'),
      patch: path.join(dir, 'result.patch'),
      artifacts: path.join(dir, 'artifacts'),
    };
  }

  /** Creates the run's folder and record. CONFLICT if the id exists. */
  async create(input: StoredRunInput): Promise<StoredRun> {
    const record = parseRecord(input);
    const p = this.paths(record.id);
    await mkdir(this.root, { recursive: true });
    try {
      await mkdir(p.dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new AirlockError('CONFLICT', `Run ${record.id} already exists.`);
      throw err;
    }
    await this.withLock(record.id, () => this.writeRecord(p, () => record));
    return record;
  }

  /** Reads a run record (falls back to the backup copy if the main one is damaged). NOT_FOUND if absent. */
  async get(runId: string): Promise<StoredRun> {
    const result = await this.read(this.paths(runId));
    if ('record' in result) return result.record;
    throw new AirlockError(result.missing ? 'NOT_FOUND' : 'INTERNAL', result.missing ? `No run ${runId}. 'airlock runs' lists the runs.` : `Run ${runId} is unreadable: ${result.reason}.`);
  }

  /** Applies a partial update (or a function) to a record and writes it atomically; `updatedAt` is set. */
  async update(runId: string, patch: RunUpdate): Promise<StoredRun> {
    const p = this.paths(runId);
    return this.withLock(runId, async () => {
      // Checked first: the file's lock folder would otherwise bring back the folder of a deleted run.
      await this.get(runId);
      return this.writeRecord(p, async () => {
        const current = await this.get(runId);
        const merged = typeof patch === 'function' ? patch(current) : { ...current, ...patch };
        return parseRecord({ ...merged, id: current.id, updatedAt: new Date().toISOString() });
      });
    });
  }

  /** All runs, newest first; folders that cannot be read are listed in `unreadable` instead of throwing. */
  async list(): Promise<RunListing> {
    let names: string[];
    try {
      names = await readdir(this.root);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { runs: [], unreadable: [] };
      throw err;
    }
    const runs: StoredRun[] = [];
    const unreadable: UnreadableRun[] = [];
    await Promise.all(
      names.map(async (name) => {
        const dir = path.join(this.root, name);
        if (!RunId.safeParse(name).success) {
          const st = await stat(dir).catch(() => undefined); // gone meanwhile: nothing to report
          if (st?.isDirectory()) unreadable.push({ runId: name, dir, reason: 'not a run folder (unexpected name)' });
          return;
        }
        const result = await this.read(this.paths(name));
        if ('record' in result) runs.push(result.record);
        else unreadable.push({ runId: name, dir, reason: result.reason });
      }),
    );
    runs.sort((a, b) => (a.createdAt === b.createdAt ? cmp(b.id, a.id) : cmp(b.createdAt, a.createdAt)));
    unreadable.sort((a, b) => cmp(b.runId, a.runId));
    return { runs, unreadable };
  }

  /** Removes a run's folder and everything in it. NOT_FOUND if absent. */
  async delete(runId: string): Promise<void> {
    const p = this.paths(runId);
    await this.withLock(runId, async () => {
      const buffer = this.buffers.get(runId);
      this.buffers.delete(runId);
      buffer?.lines.splice(0);
      await this.closeEvents(buffer, async () => undefined);
      const st = await stat(p.dir).catch(() => undefined); // no folder: NOT_FOUND below
      if (!st) throw new AirlockError('NOT_FOUND', `No run ${runId}. 'airlock runs' lists the runs.`);
      await rm(p.dir, { recursive: true, force: true });
    });
    this.locks.delete(runId);
  }

  /**
   * Queues events for the run's `events.jsonl` (each one JSON line). Buffered: written after
   * `eventFlushMs` or `eventFlushBytes`, or by `flushEvents`. Values must be JSON-serialisable.
   */
  appendEvents(runId: string, events: readonly unknown[]): void {
    checkRunId(runId);
    if (events.length === 0) return;
    let buffer = this.buffers.get(runId);
    if (!buffer) {
      buffer = { lines: [], bytes: 0, checkedTail: false };
      this.buffers.set(runId, buffer);
    }
    for (const event of events) {
      if (buffer.bytes >= MAX_QUEUED_EVENT_BYTES) {
        if (!buffer.dropped) process.emitWarning(`airlock: run ${runId} produces events faster than they can be written; some are dropped from its event log`);
        buffer.dropped = (buffer.dropped ?? 0) + 1;
        continue;
      }
      const line = `${JSON.stringify(event)}\n`;
      buffer.lines.push(line);
      buffer.bytes += line.length;
    }
    if (buffer.bytes >= this.flushBytes) {
      // One drain at a time: a producer faster than the disk gets fewer, larger writes.
      if (!buffer.draining) void this.drain(runId, buffer).catch(debugLog.swallow('runs.events'));
    } else if (!buffer.timer) {
      buffer.timer = setTimeout(() => void this.flushEvents(runId).catch(debugLog.swallow('runs.events')), this.flushMs);
      buffer.timer.unref?.();
    }
  }

  /** Writes the run's buffered events now; resolves when they are on disk (page cache). */
  async flushEvents(runId: string): Promise<void> {
    const buffer = this.buffers.get(runId);
    if (!buffer) return;
    if (buffer.timer) {
      clearTimeout(buffer.timer);
      buffer.timer = undefined;
    }
    await this.drain(runId, buffer);
  }

  /** Writes until the buffer is empty (events appended meanwhile included). */
  private drain(runId: string, buffer: EventBuffer): Promise<void> {
    if (buffer.draining) return buffer.draining;
    // Nothing to write: the async body below would finish synchronously and its `finally` would
    // run before `draining` is assigned, leaving a settled promise that blocks every later drain.
    if (buffer.lines.length === 0) return Promise.resolve();
    if (buffer.idle) {
      clearTimeout(buffer.idle);
      buffer.idle = undefined;
    }
    const file = this.paths(runId).events;
    buffer.draining = (async () => {
      try {
        while (buffer.lines.length > 0) {
          let data = buffer.lines.join('');
          buffer.lines = [];
          buffer.bytes = 0;
          if (!buffer.checkedTail) {
            // A crash may have left a torn last line: start on a fresh line so ours stay whole.
            if (await endsWithoutNewline(file)) data = `\n${data}`;
            buffer.checkedTail = true;
          }
          buffer.handle ??= await open(file, 'a');
          await buffer.handle.write(data);
        }
      } finally {
        buffer.draining = undefined;
        // Keep the file open while output flows; close it once the run goes quiet.
        if (buffer.handle && !buffer.idle) {
          buffer.idle = setTimeout(() => {
            buffer.idle = undefined;
            if (buffer.draining) return;
            const h = buffer.handle;
            buffer.handle = undefined;
            // Every line is written already: a failed close loses nothing.
            void h?.close().catch(() => undefined);
          }, 1000);
          buffer.idle.unref?.();
        }
      }
    })();
    return buffer.draining;
  }

  /** Stops a run's timers and closes its event file (after writing what is buffered). */
  private async closeEvents(buffer: EventBuffer | undefined, write: () => Promise<void>): Promise<void> {
    if (!buffer) return;
    if (buffer.timer) clearTimeout(buffer.timer);
    buffer.timer = undefined;
    // Closing goes on whatever the last write did; a failure is noted, not thrown at the closer.
    await write().catch(debugLog.swallow('runs.events'));
    await buffer.draining?.catch(debugLog.swallow('runs.events'));
    if (buffer.idle) clearTimeout(buffer.idle);
    buffer.idle = undefined;
    const h = buffer.handle;
    buffer.handle = undefined;
    // What was buffered is written (or noted) above: a failed close loses nothing.
    await h?.close().catch(() => undefined);
  }

  /** Flushes the events of every run. */
  async flushAll(): Promise<void> {
    await Promise.all([...this.buffers.keys()].map((id) => this.flushEvents(id)));
  }

  /**
   * Reads a run's events in order (pending buffered events are flushed first). Lines that do not
   * parse — a torn line left by a crash — are skipped; `onSkipped` hears about them. With `schema`,
   * a line that parses but is not an event is damage, not a torn write: an error naming the file,
   * the line and the field (never a half-read history).
   */
  async *readEvents<T = unknown>(runId: string, options: { schema?: z.ZodType<T>; onSkipped?: (lineNumber: number) => void } = {}): AsyncGenerator<T> {
    await this.flushEvents(runId);
    const file = this.paths(runId).events;
    let handle;
    try {
      handle = await open(file, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    const input = handle.createReadStream({ encoding: 'utf8' });
    const rl = createInterface({ input, crlfDelay: Infinity });
    try {
      let n = 0;
      for await (const line of rl) {
        n += 1;
        if (line === '') continue;
        let value: unknown;
        try {
          value = JSON.parse(line);
        } catch {
          options.onSkipped?.(n);
          continue;
        }
        if (!options.schema) {
          yield value as T;
          continue;
        }
        yield checkStoredValue(options.schema, file, value, "the run's other files are intact — remove that line, or delete the run in History.", `line ${n}`);
      }
    } finally {
      rl.close();
      input.destroy();
      // A read handle: a failed close loses nothing.
      await handle.close().catch(() => undefined);
    }
  }

  /** Flushes pending events and closes the event files. */
  async close(): Promise<void> {
    await Promise.all([...this.buffers.entries()].map(([id, b]) => this.closeEvents(b, () => this.flushEvents(id))));
  }

  /** Disposable: flushes pending events in the background. */
  dispose(): void {
    void this.flushAll().catch(debugLog.swallow('runs.events'));
  }

  private async read(p: RunPaths): Promise<{ record: StoredRun } | { missing: boolean; reason: string }> {
    const main = await readJson(p.record);
    if (main.ok) {
      const parsed = StoredRun.safeParse(upgradeStoredRun(main.value));
      if (parsed.success) return { record: parsed.data };
    }
    const backup = await readJson(p.recordBackup);
    if (backup.ok) {
      const parsed = StoredRun.safeParse(upgradeStoredRun(backup.value));
      if (parsed.success) return { record: parsed.data };
    }
    if (!main.ok && main.missing && !backup.ok && backup.missing) {
      const dirExists = await stat(p.dir).then(() => true, () => false);
      return { missing: !dirExists, reason: dirExists ? 'the folder has no run.json' : 'no such run' };
    }
    return { missing: false, reason: main.ok ? 'run.json does not match the run record schema' : 'run.json is damaged (not valid JSON) and no usable backup' };
  }

  /** Writes the record `next` makes (read under the file's lock), keeping the previous one as `run.json.bak`. */
  private async writeRecord(p: RunPaths, next: () => Promise<StoredRun> | StoredRun): Promise<StoredRun> {
    let written: StoredRun | undefined;
    await recordFile(p.record).update(async () => {
      written = await next();
      // The previous version stays beside it (the main file is only ever replaced whole, so a reader always finds one).
      await copyFile(p.record, p.recordBackup).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
      return written;
    });
    return written as StoredRun;
  }

  private withLock<T>(runId: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(runId) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    this.locks.set(runId, next.catch(() => undefined)); // the chain only orders calls: each caller gets its own error from `next`
    return next;
  }
}

const checkRunId = requireRunId;

function parseRecord(input: unknown): StoredRun {
  const parsed = StoredRun.safeParse(upgradeStoredRun(input));
  if (!parsed.success) {
    const detail = parsed.error.issues.map((i) => `${i.path.join('.') || 'record'}: ${i.message}`).join('; ');
    throw new AirlockError('INVALID_INPUT', `Invalid run record: ${detail}`);
  }
  return parsed.data;
}

type RecordText = { ok: true; value: unknown } | { ok: false; missing: boolean };

/** A run record file: JSON, or the reason it is not (the schema is checked by the reader, with the backup as fallback). */
function recordFile(file: string): StoredFile<unknown> {
  return new StoredFile<unknown>(file, {
    parse: (_file, text) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return NOT_JSON;
      }
    },
    empty: () => MISSING,
  });
}
const NOT_JSON = Symbol('not JSON');
const MISSING = Symbol('missing');

async function readJson(file: string): Promise<RecordText> {
  const value = await recordFile(file)
    .read()
    // Unreadable (permissions, a folder in its place): reported like a damaged record, with the backup tried first.
    .catch(() => NOT_JSON);
  if (value === MISSING) return { ok: false, missing: true };
  if (value === NOT_JSON) return { ok: false, missing: false };
  return { ok: true, value };
}

async function endsWithoutNewline(file: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch {
    return false;
  }
  try {
    const { size } = await handle.stat();
    if (size === 0) return false;
    const buf = Buffer.alloc(1);
    await handle.read(buf, 0, 1, size - 1);
    return buf[0] !== 0x0a;
  } finally {
    await handle.close();
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
