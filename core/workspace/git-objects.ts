import { createHash } from 'node:crypto';

/** Git file modes the baseline distinguishes (git keeps only the executable bit of a file). */
export type GitMode = '100644' | '100755' | '120000';

export const ZERO_OID = '0000000000000000000000000000000000000000';

/** The object id git gives a blob with this content (SHA-1 of `blob <len>\0<content>`). */
export function blobOid(content: Buffer): string {
  return createHash('sha1').update(`blob ${content.length}\0`).update(content).digest('hex');
}

/** Git mode of a file from its `stat` mode. */
export function gitModeOf(statMode: number, isSymlink: boolean): GitMode {
  if (isSymlink) return '120000';
  return statMode & 0o100 ? '100755' : '100644';
}

/** C-style quoting as git's fast-import and diff headers read it; raw UTF-8 bytes pass through. */
export function quoteC(path: string): string {
  let out = '"';
  for (const ch of path) {
    const code = ch.codePointAt(0) as number;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (code < 0x20 || code === 0x7f) out += `\\${code.toString(8).padStart(3, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

/** Reverses git's C-style quoting (`"a\tb\303\251"`); unquoted input comes back unchanged. */
export function unquoteC(text: string): string {
  if (!text.startsWith('"') || !text.endsWith('"') || text.length < 2) return text;
  const body = text.slice(1, -1);
  const bytes: number[] = [];
  const simple: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };
  for (let i = 0; i < body.length; i++) {
    const ch = body[i] as string;
    if (ch !== '\\') {
      bytes.push(...Buffer.from(ch, 'utf8'));
      continue;
    }
    const next = body[i + 1] ?? '';
    if (/[0-7]/.test(next)) {
      bytes.push(parseInt(body.slice(i + 1, i + 4), 8));
      i += 3;
    } else {
      bytes.push(simple[next] ?? next.charCodeAt(0));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/** Subtree ids to take as they are: `trees` by folder path ('' the root), for every folder `clean` says is unchanged. */
export interface KnownTrees {
  trees: ReadonlyMap<string, string> | Readonly<Record<string, string>>;
  clean: (dir: string) => boolean;
}

/**
 * The tree id of every folder of these files ('' is the root), as git gives them (nested trees; a
 * folder's entry sorts as if its name ended in '/'). With `known`, a clean folder's id is taken as
 * given and nothing under it is hashed (a project base's trees: only changed folders cost).
 */
export function treeOids(files: ReadonlyArray<{ path: string; oid: string; mode: string }>, known?: KnownTrees): Map<string, string> {
  /** A folder; `hit` when it is clean and its id known (nothing under it is gathered or hashed). */
  interface Dir { files: Map<string, { mode: string; oid: string }>; dirs: Map<string, Dir>; hit?: string }
  const cached = (dir: string): string | undefined => {
    if (!known || !known.clean(dir)) return undefined;
    const t = known.trees;
    return t instanceof Map ? t.get(dir) : Object.prototype.hasOwnProperty.call(t, dir) ? (t as Record<string, string>)[dir] : undefined;
  };
  const root: Dir = { files: new Map(), dirs: new Map() };
  const rootHit = cached('');
  if (rootHit) return new Map([['', rootHit]]);
  file: for (const f of files) {
    let dir = root;
    let start = 0;
    for (let i = f.path.indexOf('/'); i !== -1; i = f.path.indexOf('/', start)) {
      const name = f.path.slice(start, i);
      let next = dir.dirs.get(name);
      if (!next) {
        const hit = cached(f.path.slice(0, i));
        dir.dirs.set(name, (next = { files: new Map(), dirs: new Map(), ...(hit ? { hit } : {}) }));
      }
      if (next.hit) continue file;
      dir = next;
      start = i + 1;
    }
    dir.files.set(f.path.slice(start), { mode: f.mode, oid: f.oid });
  }
  const out = new Map<string, string>();
  const treeOid = (dir: Dir, at: string): string => {
    if (dir.hit) {
      out.set(at, dir.hit);
      return dir.hit;
    }
    const entries: Array<{ sortKey: Buffer; head: string; oid: string }> = [];
    for (const [name, f] of dir.files) entries.push({ sortKey: Buffer.from(name), head: `${f.mode} ${name}\0`, oid: f.oid });
    for (const [name, d] of dir.dirs) entries.push({ sortKey: Buffer.from(`${name}/`), head: `40000 ${name}\0`, oid: treeOid(d, at ? `${at}/${name}` : name) });
    // Byte order of the UTF-8 names, as git sorts.
    entries.sort((a, b) => Buffer.compare(a.sortKey, b.sortKey));
    const body = Buffer.concat(entries.flatMap((e) => [Buffer.from(e.head), Buffer.from(e.oid, 'hex')]));
    const oid = hashObject('tree', body);
    out.set(at, oid);
    return oid;
  };
  treeOid(root, '');
  return out;
}

function hashObject(type: string, body: Buffer): string {
  return createHash('sha1').update(`${type} ${body.length}\0`).update(body).digest('hex');
}

/** The baseline commit of a tree: fixed identity and message, no parent. */
export function baselineCommitOfTree(tree: string, ident: string, message: string): string {
  return hashObject('commit', Buffer.from(`tree ${tree}\nauthor ${ident}\ncommitter ${ident}\n\n${message}\n`));
}

/**
 * The commit id git gives the baseline of these files (nested trees, fixed identity and message),
 * computed on the host from what it read: the sandbox's baseline must have exactly this id.
 */
export function baselineCommitOid(files: ReadonlyArray<{ path: string; oid: string; mode: string }>, ident: string, message: string, known?: KnownTrees): string {
  return baselineCommitOfTree(treeOids(files, known).get('') as string, ident, message);
}
