import { Readable } from 'node:stream';

/**
 * A minimal streaming tar writer (ustar + PAX for long names, link targets and large sizes), with
 * backpressure. Written for hydrate's hot path: a generic tar library plus an async-iterator bridge
 * cost more CPU than the copy itself on a project of many small files.
 */
export interface TarEntry {
  name: string;
  type: 'file' | 'directory' | 'symlink';
  mode: number;
  mtime: Date;
  size?: number;
  linkname?: string;
}

const BLOCK = 512;
const ZEROS = Buffer.alloc(BLOCK * 2);
const CHUNK_BYTES = 256 * 1024;

function octal(value: number, width: number): string {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

function paxRecord(key: string, value: string): Buffer {
  const body = ` ${key}=${value}\n`;
  const bodyLen = Buffer.byteLength(body);
  let len = bodyLen + String(bodyLen).length;
  if (String(len).length !== String(bodyLen).length) len = bodyLen + String(len).length;
  return Buffer.from(`${len}${body}`);
}

function header(name: string, typeflag: string, mode: number, size: number, mtime: number, linkname: string): Buffer {
  const h = Buffer.alloc(BLOCK);
  h.write(name, 0, 100, 'utf8');
  h.write(octal(mode & 0o7777, 8), 100, 'ascii');
  h.write(octal(0, 8), 108, 'ascii');
  h.write(octal(0, 8), 116, 'ascii');
  h.write(octal(size, 12), 124, 'ascii');
  h.write(octal(Math.max(0, Math.floor(mtime)), 12), 136, 'ascii');
  h.write('        ', 148, 'ascii');
  h.write(typeflag, 156, 'ascii');
  h.write(linkname, 157, 100, 'utf8');
  h.write('ustar\0', 257, 'ascii');
  h.write('00', 263, 'ascii');
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += h[i] as number;
  h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return h;
}

function padding(size: number): Buffer | undefined {
  const rest = size % BLOCK;
  return rest ? ZEROS.subarray(0, BLOCK - rest) : undefined;
}

export class TarWriter {
  readonly stream: Readable;
  private wake: (() => void) | undefined;
  private closed = false;

  constructor() {
    this.stream = new Readable({
      highWaterMark: 4 * 1024 * 1024,
      read: () => {
        const w = this.wake;
        this.wake = undefined;
        w?.();
      },
    });
    this.stream.once('close', () => {
      this.closed = true;
      const w = this.wake;
      this.wake = undefined;
      w?.();
    });
  }

  private pending: Buffer[] = [];
  private pendingBytes = 0;

  /** Coalesces headers, padding and small files into large chunks: fewer frames on the channel. */
  private async push(buf: Buffer): Promise<void> {
    this.pending.push(buf);
    this.pendingBytes += buf.length;
    if (this.pendingBytes >= CHUNK_BYTES) await this.flush();
  }

  private async flush(): Promise<void> {
    if (!this.pendingBytes) return;
    const chunk = this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    if (this.closed) throw new Error('tar stream closed by its consumer');
    if (!this.stream.push(chunk)) {
      await new Promise<void>((resolve) => (this.wake = resolve));
      if (this.closed) throw new Error('tar stream closed by its consumer');
    }
  }

  /** Adds one entry; `body` is required for files and must be `size` bytes. */
  async add(entry: TarEntry, body?: Buffer): Promise<void> {
    const size = entry.type === 'file' ? (body?.length ?? 0) : 0;
    const linkname = entry.linkname ?? '';
    const name = entry.type === 'directory' ? `${entry.name}/` : entry.name;
    const mtime = entry.mtime.getTime() / 1000;
    const pax: Buffer[] = [];
    if (Buffer.byteLength(name) > 99) pax.push(paxRecord('path', name));
    if (Buffer.byteLength(linkname) > 99) pax.push(paxRecord('linkpath', linkname));
    if (size > 0o77777777777) pax.push(paxRecord('size', String(size)));
    if (pax.length) {
      const data = Buffer.concat(pax);
      await this.push(header('PaxHeader', 'x', 0o644, data.length, mtime, ''));
      await this.push(data);
      const p = padding(data.length);
      if (p) await this.push(p);
    }
    const typeflag = entry.type === 'file' ? '0' : entry.type === 'directory' ? '5' : '2';
    await this.push(header(name, typeflag, entry.mode, size > 0o77777777777 ? 0 : size, mtime, linkname));
    if (body && size) {
      await this.push(body);
      const p = padding(size);
      if (p) await this.push(p);
    }
  }

  /** Writes the end-of-archive blocks and ends the stream. */
  async finish(): Promise<void> {
    await this.push(ZEROS);
    await this.flush();
    this.stream.push(null);
  }

  destroy(err?: Error): void {
    this.stream.destroy(err);
  }
}
