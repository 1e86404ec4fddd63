import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { parseStoredJson } from '../common/stored-json';
import { airlockHome } from '../common/paths';
import { Allowlist, AllowEntrySchema, type AllowEntry } from './allowlist';
import { sha256Hex } from '../common/sha256';
import { internalHostName } from './address-checks';

/** `<airlockHome()>/projects/<hash>`: per-project data; the hash is of the project's absolute path. */
export function projectDataDir(projectPath: string, home: string = airlockHome()): string {
  const hash = sha256Hex(path.resolve(projectPath)).slice(0, 16);
  return path.join(home, 'projects', hash);
}

const NetworkFile = z
  .object({
    version: z.literal(1),
    /** The project path, for humans reading the file; the directory hash is what identifies it. */
    project: z.string().optional(),
    allow: z.array(AllowEntrySchema),
    /** Gateway rules the user approved "for this project" while a run waited (docs/architecture.md §2.8). */
    rules: z.array(z.string().min(1).max(400)).max(500).optional(),
    /** Hosts the user named as internal for the project: they may resolve to private addresses (§2.8). */
    internalHosts: z.array(z.string().min(1).max(253)).max(50).optional(),
  })
  .strict();

/**
 * Hosts the user allowed "for the project" (`<project dir>/network.json`). Every allowlist run of
 * the project starts with them. Writes are atomic (temp file + rename) and serialized.
 */
export class ProjectNetworkStore {
  readonly file: string;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    readonly projectPath: string,
    home: string = airlockHome(),
  ) {
    this.file = path.join(projectDataDir(projectPath, home), 'network.json');
  }

  /** The project's allowed entries; none when the file does not exist yet. */
  async load(): Promise<AllowEntry[]> {
    return (await this.read()).allow;
  }

  /** Gateway rules approved for the project, newest first (each re-checked by the caller's parser). */
  async loadRules(): Promise<string[]> {
    return (await this.read()).rules;
  }

  /** Remembers an approved gateway rule for the project's later runs (newest first, no duplicates). */
  addRule(rule: string): Promise<AllowEntry[]> {
    return this.update((list) => list, (rules) => [rule, ...rules.filter((r) => r !== rule)]);
  }

  /** Hosts the user named as internal for the project (each re-checked: the file is user-editable). */
  async loadInternalHosts(): Promise<string[]> {
    return (await this.read()).internalHosts.map(internalHostName);
  }

  /** Names hosts as internal for the project's later runs (exact names; no duplicates). */
  async addInternalHosts(hosts: readonly string[]): Promise<string[]> {
    const names = hosts.map(internalHostName);
    await this.update((list) => list, (r) => r, (current) => [...new Set([...current, ...names])]);
    return this.loadInternalHosts();
  }

  /** Stops treating these hosts as internal for the project. */
  async removeInternalHosts(hosts: readonly string[]): Promise<string[]> {
    const names = new Set(hosts.map((h) => h.trim().toLowerCase().replace(/\.$/, '')));
    await this.update((list) => list, (r) => r, (current) => current.filter((h) => !names.has(h)));
    return this.loadInternalHosts();
  }

  private async read(): Promise<{ allow: AllowEntry[]; rules: string[]; internalHosts: string[] }> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { allow: [], rules: [], internalHosts: [] };
      throw err;
    }
    const data = parseStoredJson(NetworkFile, this.file, text, "fix or delete it to reset the project's allowed hosts.");
    // Re-validate each host pattern: the file is user-editable.
    return { allow: new Allowlist(data.allow).entries(), rules: data.rules ?? [], internalHosts: data.internalHosts ?? [] };
  }

  /** Adds an entry (merging ports) and returns the stored list. */
  add(entry: AllowEntry | string): Promise<AllowEntry[]> {
    return this.update((list) => {
      list.add(entry);
    });
  }

  /** Removes every entry with this exact host pattern. */
  remove(hostPattern: string): Promise<AllowEntry[]> {
    return this.update((list) => {
      const kept = list.entries().filter((e) => e.host !== hostPattern.trim().toLowerCase());
      return new Allowlist(kept);
    });
  }

  private update(
    change: (list: Allowlist) => Allowlist | void,
    changeRules: (rules: string[]) => string[] = (r) => r,
    changeInternal: (hosts: string[]) => string[] = (h) => h,
  ): Promise<AllowEntry[]> {
    const next = this.queue.then(async () => {
      const stored = await this.read();
      const current = new Allowlist(stored.allow);
      const updated = change(current) ?? current;
      const entries = updated.entries();
      const rules = changeRules(stored.rules);
      const internalHosts = changeInternal(stored.internalHosts);
      await mkdir(path.dirname(this.file), { recursive: true, mode: 0o700 });
      const tmp = `${this.file}.${randomBytes(6).toString('hex')}.tmp`;
      const body = { version: 1 as const, project: path.resolve(this.projectPath), allow: entries, ...(rules.length ? { rules } : {}), ...(internalHosts.length ? { internalHosts } : {}) };
      await writeFile(tmp, `${JSON.stringify(body, null, 2)}\n`, { mode: 0o600 });
      await rename(tmp, this.file);
      return entries;
    });
    this.queue = next.catch(() => undefined);
    return next;
  }
}
