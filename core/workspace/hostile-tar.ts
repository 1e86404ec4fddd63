import { AirlockError } from '../../contracts/errors';

/** A file or symlink read from a sandbox's tar stream. */
export interface TarFile {
  path: string;
  kind: 'file' | 'symlink';
  /** The owner-executable bit (files). */
  exec: boolean;
  /** File bytes, or the symlink's target as bytes. */
  content: Buffer;
}

export interface HostileTarOptions {
  /** Only these exact names are taken; anything else is skipped and listed. */
  wanted: ReadonlySet<string>;
  /** Files above this size are skipped and listed (default 50 MiB). */
  maxFileBytes?: number;
  /** More headers than this is an error (default 4 × wanted + 64). */
  maxEntries?: number;
}

export interface HostileTarResult {
  files: Map<string, TarFile>;
  /** Entries not taken, with why (names not asked for, links, devices, too large…). */
  skipped: Array<{ path: string; reason: string }>;
}

const BLOCK = 512;
const MAX_META_BYTES = 64 * 1024;
const MAX_LINK_BYTES = 4096;

function fail(why: string): never {
  throw new AirlockError('SANDBOX_FAILED', `The sandbox sent a malformed result archive (${why}); nothing from it is used. Retry the run, or export what the live view showed.`);
}

function cstr(b: Buffer, start: number, len: number): Buffer {
  const x = b.subarray(start, start + len);
  const z = x.indexOf(0);
  return z < 0 ? x : x.subarray(0, z);
}

function octal(b: Buffer, start: number, len: number, what: string): number {
  const field = b.subarray(start, start + len);
  if ((field[0] ?? 0) & 0x80) {
    // Base-256: only sizes up to 2^53 make sense, and anything that big is refused by the caps anyway.
    let v = 0;
    for (let i = 1; i < field.length; i++) v = v * 256 + (field[i] as number);
    if (!Number.isSafeInteger(v)) fail(`${what} out of range`);
    return v;
  }
  const text = cstr(field, 0, len).toString('latin1').trim();
  if (!text) return 0;
  if (!/^[0-7]+$/.test(text)) fail(`${what} is not a number`);
  return parseInt(text, 8);
}

function checksumOk(h: Buffer): boolean {
  const stored = octal(h, 148, 8, 'checksum');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : (h[i] as number);
  return sum === stored;
}

function parsePax(data: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let i = 0;
  while (i < data.length) {
    const sp = data.indexOf(0x20, i);
    if (sp < 0) fail('bad PAX record');
    const len = Number(data.subarray(i, sp).toString('latin1'));
    if (!Number.isSafeInteger(len) || len <= sp - i + 1 || i + len > data.length) fail('bad PAX record length');
    const rec = data.subarray(sp + 1, i + len - 1).toString('utf8');
    const eq = rec.indexOf('=');
    if (eq < 0) fail('bad PAX record');
    out[rec.slice(0, eq)] = rec.slice(eq + 1);
    i += len;
  }
  return out;
}

/**
 * Reads a tar stream that came out of a sandbox as hostile input: header checksums checked,
 * every size bounded by the buffer and the caps, names taken only when they are exactly one of
 * the names asked for (so `../x`, absolute paths or names through a symlinked folder never
 * reach the host), only regular files and symlinks kept (hard links, devices and FIFOs are
 * skipped and listed), a name that appears twice is an error, and a stream that ends early is an
 * error. PAX (`path`, `linkpath`, `size`) and GNU long names are understood.
 */
export function parseHostileTar(buf: Buffer, opts: HostileTarOptions): HostileTarResult {
  const maxFileBytes = opts.maxFileBytes ?? 50 * 1024 * 1024;
  const maxEntries = opts.maxEntries ?? opts.wanted.size * 4 + 64;
  const files = new Map<string, TarFile>();
  const skipped: HostileTarResult['skipped'] = [];
  const seen = new Set<string>();
  let off = 0;
  let headers = 0;
  let pax: Record<string, string> = {};
  let longName: string | undefined;
  let longLink: string | undefined;
  for (;;) {
    if (off + BLOCK > buf.length) fail('it ends before its end marker');
    const h = buf.subarray(off, off + BLOCK);
    off += BLOCK;
    if (h.every((x) => x === 0)) {
      // End of archive: one zero block is enough for us (the rest is padding).
      break;
    }
    if (++headers > maxEntries) fail(`more than ${maxEntries} entries`);
    if (!checksumOk(h)) fail('a header checksum does not match');
    const type = String.fromCharCode(h[156] || 0x30);
    let size = octal(h, 124, 12, 'size');
    if (pax.size !== undefined) {
      if (!/^\d+$/.test(pax.size)) fail('bad PAX size');
      size = Number(pax.size);
    }
    const padded = Math.ceil(size / BLOCK) * BLOCK;
    if (!Number.isSafeInteger(size) || off + padded > buf.length) fail('an entry is larger than the archive');
    const body = buf.subarray(off, off + size);
    off += padded;

    if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
      if (size > MAX_META_BYTES) fail('an oversized metadata entry');
      if (type === 'x') pax = { ...pax, ...parsePax(body) };
      else if (type === 'L') longName = cstr(body, 0, body.length).toString('utf8');
      else if (type === 'K') longLink = cstr(body, 0, body.length).toString('utf8');
      continue; // 'g' (global) is read and ignored
    }

    let name = cstr(h, 0, 100).toString('utf8');
    const magic = h.subarray(257, 263).toString('latin1');
    const prefix = cstr(h, 345, 155).toString('utf8');
    if (magic.startsWith('ustar') && prefix) name = `${prefix}/${name}`;
    if (longName !== undefined) name = longName;
    if (pax.path !== undefined) name = pax.path;
    let link = cstr(h, 157, 100).toString('utf8');
    if (longLink !== undefined) link = longLink;
    if (pax.linkpath !== undefined) link = pax.linkpath;
    pax = {};
    longName = undefined;
    longLink = undefined;

    name = name.replace(/^(\.\/)+/, '');
    const isDir = type === '5';
    if (isDir) continue;
    if (!opts.wanted.has(name)) {
      skipped.push({ path: name.slice(0, 300), reason: 'not asked for' });
      continue;
    }
    if (seen.has(name)) fail(`${name} appears twice`);
    seen.add(name);
    const mode = octal(h, 100, 8, 'mode');
    if (type === '0' || type === '7') {
      if (size > maxFileBytes) {
        skipped.push({ path: name, reason: `larger than ${maxFileBytes} bytes` });
        continue;
      }
      files.set(name, { path: name, kind: 'file', exec: (mode & 0o100) !== 0, content: Buffer.from(body) });
    } else if (type === '2') {
      const target = Buffer.from(link, 'utf8');
      if (!target.length || target.length > MAX_LINK_BYTES) {
        skipped.push({ path: name, reason: 'symlink with an empty or oversized target' });
        continue;
      }
      files.set(name, { path: name, kind: 'symlink', exec: false, content: target });
    } else {
      const what = type === '1' ? 'hard link' : type === '3' || type === '4' ? 'device file' : type === '6' ? 'FIFO' : `entry of type '${type}'`;
      skipped.push({ path: name, reason: `${what}: not part of a result` });
    }
  }
  return { files, skipped };
}
