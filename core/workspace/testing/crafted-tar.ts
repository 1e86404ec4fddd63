/* Test support: hand-made tar archives, well-formed or deliberately not (a lying sandbox's output). */

export interface CraftedEntry {
  name: string;
  /** Tar typeflag: '0' file, '1' hard link, '2' symlink, '3'/'4' device, '5' dir, '6' FIFO, 'x' PAX. */
  type?: string;
  body?: Buffer | string;
  mode?: number;
  linkname?: string;
  /** Size written into the header (default: the body's length). */
  sizeField?: number;
  /** Corrupts the header checksum. */
  badChecksum?: boolean;
}

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function header(e: CraftedEntry, size: number): Buffer {
  const h = Buffer.alloc(512);
  h.write(e.name, 0, 100, 'utf8');
  h.write(octal(e.mode ?? 0o644, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(e.sizeField ?? size, 12), 124, 'ascii');
  h.write(octal(0, 12), 136, 'ascii');
  h.write('        ', 148, 'ascii');
  h.write(e.type ?? '0', 156, 'ascii');
  h.write(e.linkname ?? '', 157, 100, 'utf8');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += h[i] as number;
  h.write(`${(sum + (e.badChecksum ? 1 : 0)).toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

/** A PAX record body (`len key=value\n`). */
export function paxBody(records: Record<string, string>): Buffer {
  return Buffer.concat(
    Object.entries(records).map(([k, v]) => {
      const body = ` ${k}=${v}\n`;
      let len = Buffer.byteLength(body) + 1;
      while (String(len).length + Buffer.byteLength(body) !== len) len = String(len).length + Buffer.byteLength(body);
      return Buffer.from(`${len}${body}`);
    }),
  );
}

/** An archive of these entries; `end: false` leaves out the end marker (a truncated stream). */
export function craftTar(entries: CraftedEntry[], opts: { end?: boolean } = {}): Buffer {
  const parts: Buffer[] = [];
  for (const e of entries) {
    const body = e.body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(e.body) ? e.body : Buffer.from(e.body);
    parts.push(header(e, body.length), body);
    const rest = body.length % 512;
    if (rest) parts.push(Buffer.alloc(512 - rest));
  }
  if (opts.end !== false) parts.push(Buffer.alloc(1024));
  return Buffer.concat(parts);
}
