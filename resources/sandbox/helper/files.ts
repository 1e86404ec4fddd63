/** File operations for the host: read (bounded), write (streamed, with mode), list. */
import { createReadStream, createWriteStream } from 'node:fs';
import { chmod, lstat, mkdir, readdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Mux } from '../../../core/channel/mux';
import type { WireFileEntry } from '../../../core/channel/protocol';
import type { StreamSink } from '../../../core/channel/channel-duplex';
import { HelperError, fromSystemError } from './errors';

function requirePath(path: unknown, op: string): string {
  if (typeof path !== 'string' || path === '') throw new HelperError('INVALID_INPUT', `${op} needs a path`);
  return path;
}

/** Streams a file to the host on `streamId`; resolves with its size once every byte is queued. */
export async function readFileTo(mux: Mux, streamId: number, path: string, maxBytes: number): Promise<{ size: number }> {
  requirePath(path, 'readFile');
  let st;
  try {
    st = await stat(path);
  } catch (err) {
    throw fromSystemError(err, `readFile ${path}`);
  }
  if (st.isDirectory()) throw new HelperError('INVALID_INPUT', `readFile ${path}: is a directory (use list)`);
  const tooBig = () =>
    new HelperError('INVALID_INPUT', `readFile ${path}: larger than maxBytes (${maxBytes}); raise maxBytes or read a smaller file`);
  if (st.size > maxBytes) throw tooBig();
  const sender = mux.sender(streamId);
  return new Promise((resolve, reject) => {
    let size = 0;
    const input = createReadStream(path);
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
    out!.end(() => {
      if (failed) return;
      const applyMode = mode === undefined ? Promise.resolve() : chmod(path, mode);
      applyMode.then(() => resolveDone(), fail);
    });
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
  void (async () => {
    try {
      requirePath(path, 'writeFile');
      await mkdir(dirname(path), { recursive: true });
    } catch (err) {
      fail(err);
      return;
    }
    if (failed) return;
    out = createWriteStream(path, mode === undefined ? {} : { mode });
    out.on('error', fail);
    for (const buf of pending.splice(0)) write(buf);
    if (ended) finish();
  })();
  return { sink, done };
}

export async function listDir(path: string): Promise<WireFileEntry[]> {
  requirePath(path, 'list');
  let names;
  try {
    names = await readdir(path);
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
