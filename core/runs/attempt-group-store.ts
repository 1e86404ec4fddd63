import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { AttemptGroup } from '../../contracts/attempts';
import { AirlockError } from '../../contracts/errors';
import { AttemptGroupId, requireAttemptGroupId } from '../../contracts/ids';
import { debugLog } from '../common/debug-log';
import { StoredFile } from '../common/stored-file';
import { parseStoredJson } from '../common/stored-json';

/**
 * Attempt groups on disk (docs/architecture.md §18): `<home>/attempt-groups/<groupId>.json`, next to
 * `<home>/runs/`. A group only names its runs; what each attempt did stays in its run record. One
 * StoredFile per group: every read parsed with the schema, updates serialised (in this process and
 * across processes), writes durable and atomic.
 */
export class AttemptGroupStore {
  readonly root: string;

  /** `home` is Airlock's data directory (the parent of the run store's `runs/`). */
  constructor(home: string) {
    this.root = path.join(home, 'attempt-groups');
  }

  private stored(groupId: string): StoredFile<AttemptGroup | undefined> {
    return new StoredFile(path.join(this.root, `${requireAttemptGroupId(groupId)}.json`), {
      parse: (file, text) => parseStoredJson(AttemptGroup, file, text, `'airlock compare ${groupId}' cannot read it; its runs are intact ('airlock runs' lists them).`),
      empty: () => undefined,
    });
  }

  async create(group: AttemptGroup): Promise<AttemptGroup> {
    const parsed = AttemptGroup.parse(group);
    await this.stored(parsed.id).update(() => parsed);
    return parsed;
  }

  /** NOT_FOUND for an unknown id; INVALID_INPUT naming the file and field for a file that is not a group. */
  async get(groupId: string): Promise<AttemptGroup> {
    return found(groupId, await this.stored(groupId).read());
  }

  async update(groupId: string, fn: (g: AttemptGroup) => AttemptGroup): Promise<AttemptGroup> {
    const next = await this.stored(groupId).update((current) => AttemptGroup.parse(fn(found(groupId, current))));
    return found(groupId, next);
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
}

function found(groupId: string, group: AttemptGroup | undefined): AttemptGroup {
  if (!group) throw new AirlockError('NOT_FOUND', `No attempt group ${groupId}. 'airlock compare' takes the group id 'airlock run --attempts' printed.`);
  return group;
}
