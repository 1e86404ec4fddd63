/**
 * The VM helper's stderr, kept by the host with a cap. QEMU serves the guest's log port as a Unix
 * socket; the host reads it and appends at most `maxBytes` to the log file, then one marker line,
 * then reads and drops the rest, so the guest never blocks on its log and the file never grows past
 * the cap, whatever the guest writes (the helper shares its VM with the agent).
 */
import { createWriteStream } from 'node:fs';
import net from 'node:net';
import type { Disposable } from '../../common/disposable';

/** Bytes of VM helper log kept by default. */
export const DEFAULT_VM_LOG_BYTES = 4 * 1024 * 1024;

export interface CappedLog extends Disposable {
  /** Bytes read from the socket so far (kept or not). */
  readonly receivedBytes: number;
  /** Resolves once the reader is connected (or disposed). */
  readonly connected: Promise<void>;
}

/** Connects to `socketPath` (retrying while QEMU starts) and keeps at most `maxBytes` of it in `file`. */
export function keepCappedLog(socketPath: string, file: string, maxBytes = DEFAULT_VM_LOG_BYTES): CappedLog {
  const out = createWriteStream(file, { flags: 'a', mode: 0o600 });
  out.on('error', () => undefined); // a full disk must not crash the host; the log is diagnostics
  let kept = 0;
  let received = 0;
  let capped = false;
  let disposed = false;
  let socket: net.Socket | undefined;
  let retry: NodeJS.Timeout | undefined;
  let markConnected!: () => void;
  const connected = new Promise<void>((resolve) => (markConnected = resolve));

  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (capped) return;
    const room = maxBytes - kept;
    if (chunk.length <= room) {
      kept += chunk.length;
      out.write(chunk);
      return;
    }
    if (room > 0) out.write(chunk.subarray(0, room));
    kept = maxBytes;
    capped = true;
    out.write(`\n[airlock] helper log limit of ${maxBytes} bytes reached: the rest is not kept\n`);
  };

  const attempt = () => {
    if (disposed) return;
    const s = net.connect(socketPath);
    s.once('connect', () => {
      socket = s;
      markConnected();
    });
    s.on('data', onData);
    s.once('error', () => {
      s.destroy();
      if (socket !== s && !disposed) retry = setTimeout(attempt, 25);
    });
  };
  attempt();

  return {
    get receivedBytes() {
      return received;
    },
    connected,
    dispose() {
      if (disposed) return;
      disposed = true;
      if (retry) clearTimeout(retry);
      socket?.destroy();
      markConnected();
      out.end();
    },
  };
}
