import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { blobOid, quoteC, type GitMode } from './git-objects';
import type { HostGit } from './host-git';

/** Attributes that keep host diffs byte-exact whatever `.gitattributes` a project or agent carries. */
const INFO_ATTRIBUTES = '* -text -filter -ident -working-tree-encoding !diff !merge !eol\n';

/** A blob and the mode it has in a tree. */
export interface HostBlob {
  mode: GitMode;
  content: Buffer;
}

/**
 * A run's object store on the host: a bare git repository under the run's folder that holds the
 * baseline (written while the project streams into the sandbox, from the same bytes) and the
 * result (written at collect from what was read out of the sandbox). Review and apply read only
 * from here. `HEAD` names no commit, so no in-tree `.gitattributes` is ever consulted.
 */
export class HostRepo {
  private constructor(
    readonly host: HostGit,
    readonly gitDir: string,
  ) {}

  /**
   * Creates (or opens) the store at `gitDir`. `borrowFrom` names another store whose objects this one
   * reads until `keepOnly` (a project base's, project-base.ts): compaction copies what it keeps, so a
   * compacted store never depends on it.
   */
  static async create(host: HostGit, gitDir: string, opts: { borrowFrom?: string } = {}): Promise<HostRepo> {
    await mkdir(path.dirname(gitDir), { recursive: true });
    await host.ok(['init', '-q', '--bare', gitDir], { cwd: path.dirname(gitDir) }, 'creating the run object store');
    await writeFile(path.join(gitDir, 'info', 'attributes'), INFO_ATTRIBUTES);
    await writeFile(path.join(gitDir, 'HEAD'), 'ref: refs/airlock/no-head\n');
    if (opts.borrowFrom) await writeFile(path.join(gitDir, 'objects', 'info', 'alternates'), `${path.resolve(opts.borrowFrom, 'objects')}\n`);
    return new HostRepo(host, gitDir);
  }

  static open(host: HostGit, gitDir: string): HostRepo {
    return new HostRepo(host, gitDir);
  }

  /** git in this store (hardened; see host-git). */
  git(args: string[], stdin?: Buffer | string, what?: string): Promise<Buffer> {
    return this.host.ok([`--git-dir=${this.gitDir}`, ...args], { cwd: this.gitDir, ...(stdin !== undefined ? { stdin } : {}) }, what);
  }

  /**
   * A `git fast-import` writer: blobs go in as they arrive (bounded buffering), `commit` writes one
   * commit of the given path → blob-mark set and returns its id.
   */
  async importer(): Promise<FastImport> {
    const exe = await this.host.executable();
    const child = spawn(exe, [`--git-dir=${this.gitDir}`, '-c', 'pack.compression=0', '-c', 'fastimport.unpackLimit=0', '-c', `core.hooksPath=${os.devNull}`, 'fast-import', '--quiet', '--done', '--force'], {
      cwd: this.gitDir,
      env: { PATH: this.host.searchPath, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: os.devNull, LC_ALL: 'C' },
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    return new FastImport(child, this);
  }

  /**
   * Drops everything but these objects (one small pack): once a result is collected, apply needs
   * only the base and result blobs of the changed files, not a copy of the whole project.
   */
  async keepOnly(oids: Iterable<string>): Promise<void> {
    const list = [...new Set(oids)];
    const packDir = path.join(this.gitDir, 'objects', 'pack');
    const before = await readdir(packDir).catch(() => [] as string[]);
    const name = (await this.git(['pack-objects', '-q', path.join(packDir, 'kept')], list.length ? `${list.join('\n')}\n` : '', 'compacting the run object store')).toString('latin1').trim();
    for (const f of before) if (!f.startsWith(`kept-${name}.`)) await rm(path.join(packDir, f), { force: true });
    for (const d of await readdir(path.join(this.gitDir, 'objects'))) if (/^[0-9a-f]{2}$/.test(d)) await rm(path.join(this.gitDir, 'objects', d), { recursive: true, force: true });
    // The pack holds borrowed objects too (pack-objects reads alternates): the store stands alone now.
    await rm(path.join(this.gitDir, 'objects', 'info', 'alternates'), { force: true });
    // The commits went with the packs: no ref may point at them.
    await rm(path.join(this.gitDir, 'refs'), { recursive: true, force: true });
    await mkdir(path.join(this.gitDir, 'refs', 'heads'), { recursive: true });
    await mkdir(path.join(this.gitDir, 'refs', 'tags'), { recursive: true });
    const check = await this.readBlobs(list);
    if (check.size !== list.length) throw new AirlockError('INTERNAL', 'Compacting the run object store lost objects.');
  }

  /** Reads blobs by id; each one's content is checked against its id. */
  async readBlobs(oids: Iterable<string>): Promise<Map<string, Buffer>> {
    const list = [...new Set(oids)];
    const out = new Map<string, Buffer>();
    if (!list.length) return out;
    const buf = await this.git(['cat-file', '--batch'], `${list.join('\n')}\n`, 'reading the run objects');
    let pos = 0;
    while (pos < buf.length) {
      const nl = buf.indexOf(0x0a, pos);
      if (nl < 0) break;
      const [oid, type, size] = buf.subarray(pos, nl).toString('latin1').split(' ');
      if (!oid || type !== 'blob' || !size) throw new AirlockError('INTERNAL', `Object ${oid} is missing from the run's object store; the run folder was damaged.`);
      const content = buf.subarray(nl + 1, nl + 1 + Number(size));
      if (blobOid(content) !== oid) throw new AirlockError('INTERNAL', `Object ${oid} in the run's object store is damaged.`);
      out.set(oid, content);
      pos = nl + 1 + Number(size) + 1;
    }
    for (const oid of list) if (!out.has(oid)) throw new AirlockError('INTERNAL', `Object ${oid} is missing from the run's object store.`);
    return out;
  }
}

const BUFFER_BYTES = 64 * 1024 * 1024;

/** Fixed author line of Airlock's own commits in a store. */
export interface CommitSpec {
  ref: string;
  ident: string;
  message: string;
  parent?: string;
  /** The commit starts from this tree (before `changes`) rather than from empty or the parent's. */
  baseTree?: string;
}

/** One path of a commit: a streamed blob (`mark`), an object already in the store (`oid`), or a deletion. */
export type CommitChange = { path: string; mode: GitMode; mark: number } | { path: string; mode: GitMode; oid: string } | { path: string; delete: true };

/** One `git fast-import` process; see `HostRepo.importer`. */
export class FastImport {
  private marks = 0;
  private readonly done: Promise<void>;
  private stderr = '';
  private failed: Error | undefined;

  constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly repo: HostRepo,
  ) {
    child.stderr.on('data', (c: Buffer) => {
      if (this.stderr.length < 16 * 1024) this.stderr += c.toString('utf8');
    });
    child.stdin.on('error', (e) => (this.failed ??= e));
    this.done = new Promise((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code) => (code === 0 ? resolve() : reject(new AirlockError('INTERNAL', `Writing the run's object store failed: ${this.stderr.trim() || `exit ${code}`}`))));
    });
    this.done.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  }

  private async write(chunk: Buffer | string): Promise<void> {
    if (this.failed) throw this.failed;
    // The copy into the sandbox may run ahead of git by up to BUFFER_BYTES (memory stays bounded);
    // past that, the producer waits for git to drain.
    this.child.stdin.write(chunk);
    if (this.child.stdin.writableLength > BUFFER_BYTES) await new Promise<void>((resolve) => this.child.stdin.once('drain', resolve));
  }

  /** Writes a blob; returns its mark for `commit`. */
  async blob(content: Buffer): Promise<number> {
    const mark = ++this.marks;
    await this.write(`blob\nmark :${mark}\ndata ${content.length}\n`);
    await this.write(content);
    await this.write('\n');
    return mark;
  }

  /** Writes a commit of `changes` (a mark, or null to delete) on top of `spec.parent`, and finishes. */
  async commit(spec: CommitSpec, changes: CommitChange[]): Promise<string> {
    const msg = Buffer.from(spec.message);
    const lines = [`commit ${spec.ref}`, `author ${spec.ident}`, `committer ${spec.ident}`, `data ${msg.length}`, msg.toString(), ...(spec.parent ? [`from ${spec.parent}`] : [])];
    if (spec.baseTree) lines.push(`M 040000 ${spec.baseTree} ""`);
    for (const c of changes) lines.push('delete' in c ? `D ${quoteC(c.path)}` : `M ${c.mode} ${'oid' in c ? c.oid : `:${c.mark}`} ${quoteC(c.path)}`);
    lines.push('', 'done', '');
    await this.write(lines.join('\n'));
    this.child.stdin.end();
    await this.done;
    const out = await this.repo.host.run([`--git-dir=${this.repo.gitDir}`, 'rev-parse', '--verify', '-q', spec.ref], { cwd: this.repo.gitDir });
    if (out.code !== 0) throw new AirlockError('INTERNAL', `The commit ${spec.ref} was not written to the run's object store.`);
    return out.stdout.toString('latin1').trim();
  }

  /** Stops without writing a commit. */
  abort(): void {
    this.child.stdin.destroy();
    this.child.kill('SIGKILL');
  }
}
