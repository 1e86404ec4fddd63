import { createReadStream } from 'node:fs';

/**
 * Whether `file` contains `needle` anywhere (streamed, any size; matches across chunk borders).
 * For leak tests: search a VM's disks and memory dump for a canary key.
 */
export async function fileContains(file: string, needle: Buffer | string): Promise<boolean> {
  const n = typeof needle === 'string' ? Buffer.from(needle, 'utf8') : needle;
  if (n.length === 0) return true;
  let carry = Buffer.alloc(0);
  for await (const chunk of createReadStream(file, { highWaterMark: 4 * 1024 * 1024 })) {
    const window = Buffer.concat([carry, chunk as Buffer]);
    if (window.indexOf(n) >= 0) return true;
    carry = window.subarray(Math.max(0, window.length - (n.length - 1)));
  }
  return false;
}
