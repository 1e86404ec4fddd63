import path from 'node:path';
import { z } from 'zod';
import { StoredFile } from '../common/stored-file';
import { parseStoredJson } from '../common/stored-json';
import { Allowlist, AllowEntrySchema, type AllowEntry } from './allowlist';
import { sha256Hex } from '../common/sha256';
import { internalHostName } from './address-checks';

/** `<home>/projects/<hash>`: per-project data; the hash is of the project's absolute path. */
export function projectDataDir(projectPath: string, home: string): string {
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
 * the project starts with them. One StoredFile: checked reads, serialised updates, durable writes.
 */
export class ProjectNetworkStore {
  readonly file: string;
  private readonly stored: StoredFile<z.infer<typeof NetworkFile>>;

  constructor(
    readonly projectPath: string,
    home: string,
  ) {
    this.file = path.join(projectDataDir(projectPath, home), 'network.json');
    this.stored = new StoredFile<z.infer<typeof NetworkFile>>(this.file, {
      parse: (file, text) => parseStoredJson(NetworkFile, file, text, "fix or delete it to reset the project's allowed hosts."),
      empty: () => ({ version: 1, allow: [] }),
    });
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
    return checked(await this.stored.read());
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

  private async update(
    change: (list: Allowlist) => Allowlist | void,
    changeRules: (rules: string[]) => string[] = (r) => r,
    changeInternal: (hosts: string[]) => string[] = (h) => h,
  ): Promise<AllowEntry[]> {
    const saved = await this.stored.update((data) => {
      const stored = checked(data);
      const current = new Allowlist(stored.allow);
      const entries = (change(current) ?? current).entries();
      const rules = changeRules(stored.rules);
      const internalHosts = changeInternal(stored.internalHosts);
      return { version: 1, project: path.resolve(this.projectPath), allow: entries, ...(rules.length ? { rules } : {}), ...(internalHosts.length ? { internalHosts } : {}) };
    });
    return saved.allow;
  }
}

/** The file's lists, each host pattern re-validated (the file is user-editable). */
function checked(data: z.infer<typeof NetworkFile>): { allow: AllowEntry[]; rules: string[]; internalHosts: string[] } {
  return { allow: new Allowlist(data.allow).entries(), rules: data.rules ?? [], internalHosts: data.internalHosts ?? [] };
}
