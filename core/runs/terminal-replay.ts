import { open } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { splitAtCharBoundary } from '../common/utf8';
import type { RunStore } from './run-store';

/** Reads `length` bytes of a file from `offset`; a missing file reads as empty. */
export async function readSlice(file: string, offset: number, length: number): Promise<{ data: Buffer; total: number }> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { data: Buffer.alloc(0), total: 0 };
    throw err;
  }
  try {
    const { size } = await handle.stat();
    const n = Math.max(0, Math.min(length, size - offset));
    const buf = Buffer.alloc(n);
    if (n) await handle.read(buf, 0, n, offset);
    return { data: buf, total: size };
  } finally {
    await handle.close();
  }
}

/** The log file of a terminal id: `run:<runId>` (the run's terminal) or `shell:<runId>:<n>`. */
export function terminalLogFile(store: RunStore, terminalId: string): string {
  const [kind, runId, n] = terminalId.split(':');
  if (!runId || (kind !== 'run' && kind !== 'shell') || (kind === 'shell' && !/^\d+$/.test(n ?? ''))) {
    throw new AirlockError('INVALID_INPUT', `'${terminalId.slice(0, 80)}' is not a terminal id (run:<runId> or shell:<runId>:<n>).`);
  }
  const dir = store.paths(runId).dir; // validates the run id
  return kind === 'run' ? path.join(dir, 'terminal.log') : path.join(dir, `shell-${n}.log`);
}

/**
 * A page of a terminal's full log (`terminals:replay`), never ending inside a UTF-8 sequence, so
 * pages decode on their own.
 */
export async function replayTerminal(store: RunStore, terminalId: string, offset: number, maxBytes: number): Promise<{ data: string; nextOffset: number; done: boolean; totalBytes: number }> {
  const { data, total } = await readSlice(terminalLogFile(store, terminalId), offset, maxBytes);
  // A page that stops short of the end backs off to the last whole character, where the next page
  // starts; a page too small for even one character is sent as it is, so replay always moves on.
  const end = (offset + data.length < total ? splitAtCharBoundary(data).whole.length : 0) || data.length;
  return { data: data.subarray(0, end).toString('utf8'), nextOffset: offset + end, done: offset + end >= total, totalBytes: total };
}
