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

/**
 * The commit id git gives the baseline of these files (nested trees, fixed identity and message),
 * computed on the host from what it read: the sandbox's baseline must have exactly this id.
 */
export function baselineCommitOid(files: Array<{ path: string; oid: string; mode: string }>, ident: string, message: string): string {
  interface Dir { files: Map<string, { mode: string; oid: string }>; dirs: Map<string, Dir> }
  const root: Dir = { files: new Map(), dirs: new Map() };
  for (const f of files) {
    const parts = f.path.split('/');
    let dir = root;
    for (const p of parts.slice(0, -1)) {
      let next = dir.dirs.get(p);
      if (!next) dir.dirs.set(p, (next = { files: new Map(), dirs: new Map() }));
      dir = next;
    }
    dir.files.set(parts[parts.length - 1] as string, { mode: f.mode, oid: f.oid });
  }
  const hashObject = (type: string, body: Buffer) => createHash('sha1').update(`${type} ${body.length}\0`).update(body).digest('hex');
  const treeOid = (dir: Dir): string => {
    const entries: Array<{ sortKey: Buffer; bytes: Buffer }> = [];
    for (const [name, f] of dir.files) {
      entries.push({ sortKey: Buffer.from(name), bytes: Buffer.concat([Buffer.from(`${f.mode} ${name}\0`), Buffer.from(f.oid, 'hex')]) });
    }
    for (const [name, d] of dir.dirs) {
      // Git sorts a tree entry for a directory as if its name ended in '/'.
      entries.push({ sortKey: Buffer.from(`${name}/`), bytes: Buffer.concat([Buffer.from(`40000 ${name}\0`), Buffer.from(treeOid(d), 'hex')]) });
    }
    entries.sort((a, b) => Buffer.compare(a.sortKey, b.sortKey));
    return hashObject('tree', Buffer.concat(entries.map((e) => e.bytes)));
  };
  const body = `tree ${treeOid(root)}\nauthor ${ident}\ncommitter ${ident}\n\n${message}\n`;
  return hashObject('commit', Buffer.from(body));
}
