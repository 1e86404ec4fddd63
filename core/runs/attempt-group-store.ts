import { mkdir, open, readdir, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { AttemptGroup } from '../../contracts/attempts';
import { AirlockError } from '../../contracts/errors';
import { AttemptGroupId, requireAttemptGroupId } from '../../contracts/ids';
import { debugLog } from '../common/debug-log';
import { parseStoredJson } from '../common/stored-json';

/**
 * Attempt groups on disk (docs/architecture.md §18): `<home>/attempt-groups/<groupId>.json`, next to
 * `<home>/runs/`. A group only names its runs; what each attempt did stays in its run record. Writes
 * are atomic (temp file, fsync, rename) and serialised per group; every read is parsed with the schema.
 */
export class AttemptGroupStore {
  readonly root: string;
  private readonly locks = new Map<string, Promise<unknown>>();

  /** `home` is Airlock's data directory (the parent of the run store's `runs/`). */
  constructor(home: string) {
    this.root = path.join(home, 'attempt-groups');
  }

  private file(groupId: string): string {
    return path.join(this.root, `${requireAttemptGroupId(groupId)}.json`);
  }

  async create(group: AttemptGroup): Promise<AttemptGroup> {
    const parsed = AttemptGroup.parse(group);
    await mkdir(this.root, { recursive: true });
    await this.withLock(parsed.id, () => this.write(parsed));
    return parsed;
  }

  /** NOT_FOUND for an unknown id; INVALID_INPUT naming the file and field for a file that is not a group. */
  async get(groupId: string): Promise<AttemptGroup> {
    let text: string;
    try {
      text = await readFile(this.file(groupId), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new AirlockError('NOT_FOUND', `No attempt group ${groupId}. 'airlock compare' takes the group id 'airlock run --attempts' printed.`);
      throw err;
    }
    return parseStoredJson(AttemptGroup, this.file(groupId), text, `'airlock compare ${groupId}' cannot read it; its runs are intact ('airlock runs' lists them).`);
  }

  async update(groupId: string, fn: (g: AttemptGroup) => AttemptGroup): Promise<AttemptGroup> {
    return this.withLock(groupId, async () => {
      const next = AttemptGroup.parse(fn(await this.get(groupId)));
      await this.write(next);
      return next;
    });
  }

  /** Newest first; unreadable files are left out (they stay on disk, and the debug log says why). */
  async list(limit = 100): Promise<AttemptGroup[]> {
    const names = await readdir(this.root).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [] as string[];
      throw err;
    });
    const ids = names.map((n) => n.replace(/\.json$/, '')).filter((n) => AttemptGroupId.safeParse(n).success).sort().reverse().slice(0, limit);
    const groups = await Promise.all(ids.map((id) => this.get(id).catch(debugLog.swallow('attempts.list'))));
    return groups.filter((g): g is AttemptGroup => g !== undefined);
  }

  private async write(group: AttemptGroup): Promise<void> {
    const file = this.file(group.id);
    const tmp = `${file}.tmp-${process.pid}-${Math.random().toString(16).slice(2)}`;
    const handle = await open(tmp, 'w');
    try {
      await handle.writeFile(`${JSON.stringify(group, null, 2)}\n`);
      await handle.datasync();
    } finally {
      await handle.close();
    }
    await rename(tmp, file);
  }

  private withLock<T>(id: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(id) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    this.locks.set(id, next.catch(() => undefined));
    return next;
  }
}
