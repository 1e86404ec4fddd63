/** File operations for the host: read (bounded), write (streamed, with mode), list. */
import { chmodSync, closeSync, createReadStream, createWriteStream, fstatSync, mkdirSync, openSync, readdirSync } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Mux } from '../../../core/channel/mux';
import type { WireFileEntry } from '../../../core/channel/protocol';
import type { StreamSink } from '../../../core/channel/channel-duplex';
import { HelperError, fromSystemError } from './errors';
import { asAgent } from './identity';

// Paths (non-empty strings) were checked on arrival with the request's one definition (protocol.ts).

/** Streams a file to the host on `streamId`; resolves with its size once every byte is queued. */
export async function readFileTo(mux: Mux, streamId: number, path: string, maxBytes: number): Promise<{ size: number }> {
  // Opened with the agent's rights (identity.ts): the host's read cannot reach what the agent cannot.
  let st;
  let fd: number;
  try {
    fd = asAgent(() => openSync(path, 'r'));
  } catch (err) {
    throw fromSystemError(err, `readFile ${path}`);
  }
  try {
    st = fstatSync(fd);
  } catch (err) {
    closeSync(fd);
    throw fromSystemError(err, `readFile ${path}`);
  }
  if (st.isDirectory() || st.size > maxBytes) closeSync(fd);
  if (st.isDirectory()) throw new HelperError('INVALID_INPUT', `readFile ${path}: is a directory (use list)`);
  const tooBig = () =>
    new HelperError('INVALID_INPUT', `readFile ${path}: larger than maxBytes (${maxBytes}); raise maxBytes or read a smaller file`);
  if (st.size > maxBytes) throw tooBig();
  const sender = mux.sender(streamId);
  return new Promise((resolve, reject) => {
    let size = 0;
    const input = createReadStream(path, { fd });
    input.on('data', (data: Buffer | string) => {
      const buf = typeof data === 'string' ? Buffer.from(data) : data;
      size += buf.length;
      if (size > maxBytes) {
        input.destroy();
        mux.forget(streamId);
        reject(tooBig());
        return;
      }
      if (!sender.write(buf)) {
        input.pause();
        sender.onReady(() => input.resume());
      }
    });
    input.on('error', (err) => {
      mux.forget(streamId);
      reject(fromSystemError(err, `readFile ${path}`));
    });
    input.on('end', () => {
      sender.onFlushed(() => {
        mux.forget(streamId);
        resolve({ size });
      });
    });
  });
}

/**
 * Receives a file from the host on `streamId` (data frames then END). Returns the sink to register
 * for the stream at once (data may follow the request immediately) and the completion promise.
 */
export function writeFileFrom(
  mux: Mux,
  streamId: number,
  path: string,
  mode: number | undefined,
): { sink: StreamSink; done: Promise<void> } {
  let failed: HelperError | undefined;
  const pending: Buffer[] = [];
  let ended = false;
  let out: ReturnType<typeof createWriteStream> | undefined;
  let resolveDone!: () => void;
  let rejectDone!: (err: unknown) => void;
  const done = new Promise<void>((res, rej) => {
    resolveDone = res;
    rejectDone = rej;
  });
  const fail = (err: unknown) => {
    if (failed) return;
    failed = fromSystemError(err, `writeFile ${path}`);
    out?.destroy();
    rejectDone(failed);
  };
  const write = (buf: Buffer) => out!.write(buf, () => mux.consumed(streamId, buf.length));
  const finish = () => {
    // Answer once the fd is closed ('close'), not at 'finish': a command the host starts next from
    // this file would otherwise meet the still-open writer (ETXTBSY).
    out!.once('close', () => {
      if (failed) return;
      try {
        if (mode !== undefined) asAgent(() => chmodSync(path, mode));
        resolveDone();
      } catch (err) {
        fail(err);
      }
    });
    out!.end();
  };
  const sink: StreamSink = {
    remoteData(payload) {
      if (failed) {
        mux.consumed(streamId, payload.length); // Keep the sender moving; the error is reported.
        return;
      }
      if (out) write(payload);
      else pending.push(payload);
    },
    remoteEnd() {
      ended = true;
      if (out && !failed) finish();
    },
    remoteReset(reason) {
      fail(new HelperError('CANCELLED', `writeFile ${path}: the host aborted (${reason})`));
    },
  };
  // Errors end in `fail`, which rejects `done`: nothing is left to catch here.
  // Created with the agent's rights (identity.ts): the file is the agent's, and a symlink it planted
  // cannot turn the host's write into one into /airlock or /opt/airlock.
  queueMicrotask(() => {
    let fd: number;
    try {
      fd = asAgent(() => {
        mkdirSync(dirname(path), { recursive: true });
        return openSync(path, 'w', mode ?? 0o666);
      });
    } catch (err) {
      fail(err);
      return;
    }
    if (failed) {
      closeSync(fd);
      return;
    }
    out = createWriteStream(path, { fd });
    out.on('error', fail);
    for (const buf of pending.splice(0)) write(buf);
    if (ended) finish();
  });
  return { sink, done };
}

export async function listDir(path: string): Promise<WireFileEntry[]> {
  let names;
  try {
    names = asAgent(() => readdirSync(path));
  } catch (err) {
    throw fromSystemError(err, `list ${path}`);
  }
  const entries = await Promise.all(
    names.map(async (name): Promise<WireFileEntry | undefined> => {
      try {
        const st = await lstat(join(path, name));
        const type = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other';
        return { name, type, size: st.size, mode: st.mode & 0o7777 };
      } catch {
        return undefined; // Removed between readdir and lstat.
      }
    }),
  );
  return entries.filter((e): e is WireFileEntry => e !== undefined).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
