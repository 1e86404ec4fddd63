/**
 * The Airlock helper: runs inside the sandbox as the non-root user (`node /opt/airlock/helper.js`)
 * and serves the host over stdin/stdout (the channel, docs/architecture.md §4). stderr is for its own
 * diagnostics. It is on the sandbox-ready path: say hello first, load nothing heavy until asked.
 */
import { Socket } from 'node:net';
import { access, createWriteStream } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { Mux } from '../../../core/channel/mux';
import { FrameType, PROTOCOL_VERSION, WATCH_BATCH_PATHS, request, requestEnvelope, type RawControl, type Request } from '../../../core/channel/protocol';
import { GuardError } from '../../../core/channel/guards';
import type { StreamSink } from '../../../core/channel/channel-duplex';
import { HelperError } from './errors';
import { ProcessTable } from './processes';
import { resolveNodePty } from './pty';
import { TcpForwarding, type StreamRegistry } from './tcp';
import { listDir, readFileTo, writeFileFrom } from './files';
import { commandUid, initIdentity } from './identity';
import { initOomScore } from './oom-score';
import { watchTree, type WatchHandle } from './watcher';

// stdout is the channel: nothing else may ever write to it.
console.log = console.error;
console.info = console.error;

function log(message: string): void {
  process.stderr.write(`[airlock-helper] ${message}\n`);
}

/** An asynchronous writer for fd 1 (process.stdout may block on pipes). */
function openOutput(): NodeJS.WritableStream {
  try {
    return new Socket({ fd: 1, readable: false, writable: true });
  } catch {
    return createWriteStream('', { fd: 1 }); // A file or character device (a VM's serial port).
  }
}

initIdentity();
initOomScore(log);
const output = openOutput();
const input = process.stdin;

const sinks = new Map<number, StreamSink>();
let nextStream = 2;
const streams: StreamRegistry = {
  register: (id, sink) => void sinks.set(id, sink),
  unregister: (id) => void sinks.delete(id),
  allocate: () => {
    const id = nextStream;
    nextStream = nextStream >= 0x7ffffffe ? 2 : nextStream + 2;
    return id;
  },
};

const watches = new Map<number, WatchHandle>();
let shuttingDown = false;

const mux: Mux = new Mux(input, output, {
  control: (message) => onControl(message),
  data: (streamId, type, payload) => {
    const proc = type === FrameType.data ? processes.get(streamId) : undefined;
    if (proc) {
      proc.write(payload);
      return;
    }
    const sink = type === FrameType.data ? sinks.get(streamId) : undefined;
    if (sink) sink.remoteData(payload);
    // A stream nobody here knows (finished, or never opened): dropped uncredited, and no state is
    // kept for it (an acknowledgement would put it back in the mux's books for good).
    else if (!processes.get(streamId)) mux.discard(streamId);
  },
  end: (streamId) => {
    const proc = processes.get(streamId);
    if (proc) proc.endStdin();
    else sinks.get(streamId)?.remoteEnd();
  },
  reset: (streamId, reason) => {
    const sink = sinks.get(streamId);
    sinks.delete(streamId);
    sink?.remoteReset(reason);
  },
  closed: (reason) => shutdown(reason),
});

const processes = new ProcessTable(mux);
const tcp = new TcpForwarding(mux, streams);

function shutdown(reason: string): void {
  if (shuttingDown) return;
  shuttingDown = true;
  // The host is gone: nothing the helper started may outlive the channel.
  if (reason !== 'the other side closed the channel') log(`channel closed: ${reason}`);
  const killed = processes.destroyAll();
  tcp.dispose();
  for (const w of watches.values()) w.dispose();
  watches.clear();
  for (const sink of sinks.values()) sink.remoteReset('channel closed');
  const malformed = /malformed/.test(reason);
  output.end();
  // Exit once every command tree got its SIGKILL (finding escaped descendants reads /proc).
  const exit = () => process.exit(malformed ? 2 : 0);
  killed.then(exit, exit);
  setTimeout(exit, 2000).unref();
}

function respond(id: number, result: Promise<unknown>): void {
  result.then(
    (value) => {
      try {
        mux.sendControl({ t: 'res', id, ok: true, value });
      } catch {
        const message = 'the result is too large for one channel message (e.g. a directory with too many entries); narrow the request';
        mux.sendControl({ t: 'res', id, ok: false, error: { kind: 'INVALID_INPUT', message } });
      }
    },
    (err: unknown) => {
      const error =
        err instanceof HelperError
          ? { kind: err.kind, message: err.message }
          : { kind: 'INTERNAL', message: err instanceof Error ? err.message : String(err) };
      mux.sendControl({ t: 'res', id, ok: false, error });
    },
  );
}

/** Requests are checked with their one definition (protocol.ts); a malformed one is answered INVALID_INPUT naming the field. */
function onControl(message: RawControl): void {
  if (message.t !== 'req') {
    log(`ignoring unexpected control message ${JSON.stringify(message.t.slice(0, 32))}`);
    return;
  }
  let id: number;
  try {
    ({ id } = requestEnvelope.check(message));
  } catch {
    log('ignoring a request without a valid id');
    return;
  }
  let req: Request;
  try {
    req = request.check(message);
  } catch (err) {
    const what = typeof message.op === 'string' ? `${message.op.slice(0, 32)} request` : 'request';
    const detail = err instanceof GuardError ? err.message : String(err);
    respond(id, Promise.reject(new HelperError('INVALID_INPUT', `malformed ${what}: ${detail} (do the helper and host versions differ?)`)));
    return;
  }
  respond(id, handle(req));
}

async function handle(req: Request): Promise<unknown> {
  switch (req.op) {
    case 'ping':
      return {};
    case 'spawn':
      return processes.spawn(req.stream, req.spawn);
    case 'kill': {
      const signal = req.signal || 'SIGTERM';
      if (!Object.prototype.hasOwnProperty.call(osConstants.signals, signal)) {
        throw new HelperError('INVALID_INPUT', `kill: unknown signal ${JSON.stringify(signal)} (use a name like SIGTERM or SIGINT)`);
      }
      processes.get(req.stream)?.kill(signal as NodeJS.Signals);
      return {};
    }
    case 'resize':
      processes.require(req.stream).resize(req.cols, req.rows);
      return {};
    case 'readFile':
      return readFileTo(mux, req.stream, req.path, req.maxBytes);
    case 'writeFile': {
      const { sink, done } = writeFileFrom(mux, req.stream, req.path, req.mode);
      sinks.set(req.stream, sink);
      try {
        await done;
      } finally {
        sinks.delete(req.stream);
        mux.forget(req.stream);
      }
      return {};
    }
    case 'list':
      return listDir(req.path);
    case 'watch': {
      if (watches.has(req.watchId)) throw new HelperError('CONFLICT', `watch ${req.watchId} already exists`);
      const handle = await watchTree(req.path, {
        debounceMs: req.debounceMs,
        ignore: req.ignore,
        backend: req.backend,
        onPaths: (paths) => {
          // Keep each batch well inside the frame limit.
          for (let i = 0; i < paths.length; i += WATCH_BATCH_PATHS) {
            mux.sendControl({ t: 'watch', watchId: req.watchId, paths: paths.slice(i, i + WATCH_BATCH_PATHS) });
          }
        },
        onError: (msg) => mux.sendControl({ t: 'watchError', watchId: req.watchId, message: msg }),
      });
      if (shuttingDown) handle.dispose();
      else watches.set(req.watchId, handle);
      return { backend: handle.backend };
    }
    case 'unwatch':
      watches.get(req.watchId)?.dispose();
      watches.delete(req.watchId);
      return {};
    case 'listen':
      return tcp.listen(req.listenerId, req.port, req.maxConnections, req.closeIdle);
    case 'unlisten':
      tcp.unlisten(req.listenerId);
      return {};
    case 'connect':
      await tcp.connect(req.stream, req.port);
      return {};
    case 'stats':
      return { streams: tcp.openStreams, sinks: sinks.size, mux: mux.trackedStreams, closedIdle: tcp.closedIdle };
  }
}

process.on('uncaughtException', (err) => {
  log(`uncaught: ${err.stack ?? err.message}`);
});
process.on('SIGPIPE', () => undefined);

// Start libuv's thread pool now, while threads can still be made. It starts on first use, and a
// thread it cannot create aborts the process: under a fork bomb at the pids limit, that first use
// (the timeout's tree kill reading /proc) ended the helper. An asynchronous OOM-score write used to
// start it by accident (docs/architecture.md §2.3).
access('/', () => undefined);

mux.sendControl({
  t: 'hello',
  version: PROTOCOL_VERSION,
  node: process.version,
  uid: typeof process.getuid === 'function' ? process.getuid() : -1,
  agentUid: commandUid(),
  pid: process.pid,
  pty: resolveNodePty() !== null,
});
