import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';

/** SHA-256 of bytes or a UTF-8 string, as lowercase hex. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

/** SHA-256 of a file's bytes, as lowercase hex, read as a stream (a disk image never sits in memory). */
export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}
