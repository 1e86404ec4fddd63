import path from 'node:path';
import { LimitError } from '../common/limit-error';
import type { ChannelClient } from '../channel/channel-client';

/**
 * Reads a file of a session's sandbox for `sandbox_read_file` (docs/architecture.md §17), at most
 * `cap` bytes. A file over the cap is a `LimitError` (`file-bytes`), told apart by its class: the
 * helper's listing says how big the file is, before the read and again when the read failed (the
 * file may have grown meanwhile); the host's own `maxBytes` on the read is what enforces the cap.
 */
export async function readCapped(channel: Pick<ChannelClient, 'readFile' | 'list'>, file: string, cap: number): Promise<Buffer> {
  await throwIfOverCap(channel, file, cap);
  try {
    return await channel.readFile(file, { maxBytes: cap });
  } catch (err) {
    await throwIfOverCap(channel, file, cap);
    throw err;
  }
}

async function throwIfOverCap(channel: Pick<ChannelClient, 'list'>, file: string, cap: number): Promise<void> {
  // A listing that fails (no such folder) says nothing about size: the read says what is wrong.
  const entries = await channel.list(path.posix.dirname(file)).catch(() => []);
  const entry = entries.find((e) => e.name === path.posix.basename(file));
  if (entry?.type === 'file' && entry.size > cap) {
    throw new LimitError('INVALID_INPUT', 'file-bytes', cap, `${file} is larger than the ${cap}-byte cap of sandbox_read_file; read part of it with sandbox_exec (head, tail, sed).`);
  }
}
