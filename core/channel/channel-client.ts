/**
 * The host side of the channel into a sandbox (docs/architecture.md §4): processes, files, watches and TCP
 * forwarding over one framed, multiplexed byte stream to the in-sandbox helper.
 *
 * Every pending call rejects with AirlockError('CHANNEL_CLOSED') when the channel closes or breaks;
 * nothing waits forever on a dead sandbox.
 */
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { AirlockError, ErrorKind } from '../../contracts/errors';
import { Emitter, toDisposable, type Disposable, type Event } from '../common/disposable';
import type { ChannelStream } from '../sandbox/driver';
import { ChannelDuplex, joinSocket, type StreamSink } from './channel-duplex';
import { Mux } from './mux';
import {
  MAX_SERVICE_CONNECTIONS,
  checkMessage,
  FrameType,
  ProtocolError,
  helperMessage,
  PROTOCOL_VERSION,
  resultGuard,
  type HelperMessage,
  type RawControl,
  type Request,
  type ResultOf,
  type WatchBackend,
  type WireError,
  type WireExit,
  type WireFileEntry,
  type WireSpawn,
} from './protocol';
import type { Guard } from './guards';
import { debugLog } from '../common/debug-log';

/** What to start in the sandbox (the wire request, less the helper-side kill grace). */
export type SpawnOptions = Omit<WireSpawn, 'killGraceMs'>;

/** How a command ended (the helper's exit message, checked on arrival). */
export type ExitInfo = WireExit;

export interface RunResult extends ExitInfo {
  stdout: Buffer;
  stderr: Buffer;
}

/**
 * A process in the sandbox. Subscribe to output synchronously after `spawn()`: output that arrives
 * while nobody listens is not kept. `exited` rejects with a typed AirlockError if the process could
 * not start (NOT_FOUND for a missing command or cwd) or the channel closed.
 */
export interface ChannelProcess {
  readonly id: number;
  readonly onStdout: Event<Buffer>;
  readonly onStderr: Event<Buffer>;
  readonly exited: Promise<ExitInfo>;
  write(data: Buffer | string): void;
  /** Closes stdin (for a PTY: sends EOF, Ctrl-D). */
  end(): void;
  /** Signals the whole process tree; the default SIGTERM escalates to SIGKILL after a grace period. */
  kill(signal?: NodeJS.Signals): void;
  resize(cols: number, rows: number): void;
}

export type FileEntry = WireFileEntry;

/** What the helper said at start (protocol.ts `helloMessage`, less its `t`). */
export type HelperHello = Omit<Extract<HelperMessage, { t: 'hello' }>, 't'>;

export interface WatchOptions {
  /** Quiet time before a batch is delivered (default 100 ms). */
  debounceMs?: number;
  /** gitignore-like patterns, e.g. `.git/`, `node_modules/`, `*.log`. */
  ignore?: string[];
  /** Force a backend (tests); default picks inotifywait, then recursive fs.watch, then polling. */
  backend?: WatchBackend;
}

const DEFAULT_HELLO_TIMEOUT_MS = 15_000;
const DEFAULT_READ_MAX_BYTES = 256 * 1024 * 1024;
/** `run()` gathers output in memory: without a cap of the caller's, it keeps at most this much. */
export const DEFAULT_RUN_MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
/** Room past a command's output cap for the helper's truncation marker. */
const TRUNCATION_MARKER_ROOM = 256;
/**
 * Connections the sandbox may have open at once into one host service (the model proxy, the egress
 * proxy: each has its own, so a busy install never takes the agent's model away), unless the
 * service is exposed with another cap (at most MAX_SERVICE_CONNECTIONS). Past it the helper makes
 * new connections wait (§4).
 */
export const MAX_SANDBOX_CONNECTIONS = 256;

/**
 * Connections to `service` were refused (reset) at its cap: they waited in the helper longer than
 * ACCEPT_WAIT_MS (or too many waited), or a helper that does not wait opened more than the cap.
 * Fired at the first refusal of an episode, and once more when it ends (a connection is accepted
 * again, or the channel closes) if more than one was refused, with the episode's total.
 */
export interface ConnectionsRefused {
  /** The exposed service's name (`model proxy`, `egress proxy`, …) as given to `exposeHostService`. */
  service: string;
  /** The service's cap of open connections. */
  limit: number;
  /** Refused so far in this episode. */
  refused: number;
  /** The episode is over: this is its total. */
  ended: boolean;
}

function toAirlockError(error: WireError): AirlockError {
  const kind = ErrorKind.safeParse(error.kind);
  return new AirlockError(kind.success ? kind.data : 'INTERNAL', error.message);
}

/** A host service exposed in the sandbox, with its own cap and count of open connections. */
interface ExposedService {
  name: string;
  connect: () => Socket;
  limit: number;
  open: number;
}

interface Pending {
  /** Checks the response's value: a malformed one closes the channel (protocol.ts `resultGuard`). */
  result: Guard<unknown>;
  op: string;
  resolve(value: unknown): void;
  reject(err: AirlockError): void;
}

class ProcessHandle implements ChannelProcess {
  readonly stdout = new Emitter<Buffer>();
  readonly stderr = new Emitter<Buffer>();
  readonly onStdout = this.stdout.event;
  readonly onStderr = this.stderr.event;
  readonly exited: Promise<ExitInfo>;
  private settle!: { resolve(info: ExitInfo): void; reject(err: AirlockError): void };
  done = false;
  /** Output bytes delivered so far, counted on the host (the helper's own count is a claim). */
  private delivered = 0;
  /** The host dropped output past the cap: the helper sent more than it was allowed to. */
  hostTruncated = false;

  constructor(
    private readonly client: ChannelClient,
    private readonly mux: Mux,
    readonly id: number,
    /** Most output bytes the host accepts (the cap plus room for the helper's marker). */
    private readonly maxOutput: number = Number.POSITIVE_INFINITY,
  ) {
    this.exited = new Promise<ExitInfo>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    // Callers that only stream output may never await `exited`; a failure must not crash the host.
    this.exited.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
  }

  /** @internal Output from the helper. */
  output(type: FrameType, payload: Buffer): void {
    const room = this.maxOutput - this.delivered;
    if (payload.length > room) {
      // A helper that ignores the cap gets no more credit: it stalls within one window, and a
      // helper that keeps going anyway overruns the window and the channel fails.
      this.hostTruncated = true;
      if (room <= 0) return;
      payload = payload.subarray(0, room);
    }
    this.delivered += payload.length;
    (type === FrameType.stderr ? this.stderr : this.stdout).fire(payload);
    if (!this.hostTruncated) this.mux.consumed(this.id, payload.length);
  }

  /** @internal */
  finish(result: { info: ExitInfo } | { error: AirlockError }): void {
    if (this.done) return;
    this.done = true;
    if ('info' in result) this.settle.resolve(this.hostTruncated ? { ...result.info, truncated: true } : result.info);
    else this.settle.reject(result.error);
    this.mux.forget(this.id);
    this.stdout.dispose();
    this.stderr.dispose();
  }

  /** @internal Writes stdin; false means pause the source until `whenWritable`. */
  send(data: Buffer): boolean {
    if (this.done) return true;
    return this.mux.sender(this.id).write(data, FrameType.data);
  }

  /** @internal */
  whenWritable(cb: () => void): void {
    if (this.done) cb();
    else this.mux.sender(this.id).onReady(cb);
  }

  write(data: Buffer | string): void {
    this.send(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
  }

  end(): void {
    if (!this.done) this.mux.sender(this.id).end();
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): void {
    if (this.done) return;
    this.client.request({ op: 'kill', stream: this.id, signal }).catch(debugLog.swallow('channel.kill'));
  }

  resize(cols: number, rows: number): void {
    if (this.done) return;
    this.client.request({ op: 'resize', stream: this.id, cols, rows }).catch(debugLog.swallow('channel.resize'));
  }
}

/** Collects a file's bytes arriving on a stream (readFile), at most `maxBytes` of them. */
class CollectSink implements StreamSink {
  readonly chunks: Buffer[] = [];
  bytes = 0;
  /** The helper sent more than was asked for: the read fails, whatever the helper answers. */
  overrun = false;
  constructor(
    private readonly mux: Mux,
    private readonly streamId: number,
    private readonly maxBytes: number,
  ) {}
  remoteData(payload: Buffer): void {
    if (this.overrun) return;
    if (this.bytes + payload.length > this.maxBytes) {
      this.overrun = true;
      this.chunks.length = 0;
      this.mux.reset(this.streamId, 'more bytes than asked for');
      return;
    }
    this.bytes += payload.length;
    this.chunks.push(payload);
    this.mux.consumed(this.streamId, payload.length);
  }
  remoteEnd(): void {}
  remoteReset(): void {}
}

export class ChannelClient implements Disposable {
  private readonly mux: Mux;
  private readonly closeEmitter = new Emitter<{ reason: string }>();
  private readonly pending = new Map<number, Pending>();
  private readonly processes = new Map<number, ProcessHandle>();
  private readonly sinks = new Map<number, StreamSink>();
  private readonly watchers = new Map<number, (paths: string[]) => void>();
  private readonly services = new Map<number, ExposedService>();
  private readonly refusedEmitter = new Emitter<ConnectionsRefused>();
  /** The current episode at the cap: refusals per service since the first. */
  private refusing: Map<ExposedService, { refused: number; limit: number }> | undefined;
  private nextRequest = 1;
  private nextStream = 1;
  private nextHandle = 1;
  private acceptedOpen = 0;
  private connectionLimit = MAX_SANDBOX_CONNECTIONS;
  private closedReason: string | undefined;
  private helloWaiter: { resolve(h: HelperHello): void; reject(err: AirlockError): void } | undefined;
  private early = Buffer.alloc(0);
  private _hello: HelperHello | undefined;

  /** Fires once when the channel closes, whatever the reason. */
  readonly onDidClose: Event<{ reason: string }> = this.closeEmitter.event;

  /** Connections the sandbox opened were refused at the cap (never a silent reset: §4). */
  readonly onDidRefuseConnections: Event<ConnectionsRefused> = this.refusedEmitter.event;

  /**
   * Connections the sandbox has open into host services: each holds a slot of the cap from its
   * accept until both directions are done or it is reset (docs/architecture.md §4).
   */
  get openConnections(): number {
    return this.acceptedOpen;
  }

  /** Streams the host routes data to (forwarded connections both ways, file reads): zero when idle. */
  get openStreams(): number {
    return this.sinks.size;
  }

  /**
   * Lowers the default cap per service (never above MAX_SANDBOX_CONNECTIONS) for services exposed
   * afterwards: for tests that must cross it where connections are slow (a VM under emulation).
   */
  lowerConnectionLimit(limit: number): void {
    this.connectionLimit = Math.max(1, Math.min(MAX_SANDBOX_CONNECTIONS, Math.floor(limit)));
  }

  /** The default cap of connections the sandbox may have open at once into one host service. */
  get maxConnections(): number {
    return this.connectionLimit;
  }

  /**
   * Streams open in the helper (its side of the same accounting), and the idle connections it closed
   * for waiting ones, as it reports them (its claims: for tests, benchmarks and diagnostics).
   */
  async helperStats(): Promise<{ streams: number; sinks: number; mux: number; closedIdle: number }> {
    return this.request({ op: 'stats' });
  }

  /**
   * Starts talking to a helper over `stream` and waits for its hello. Fails with SANDBOX_FAILED if
   * the helper does not answer (the message carries what it printed instead, e.g. `node: not found`).
   */
  static async connect(stream: ChannelStream, opts: { helloTimeoutMs?: number } = {}): Promise<ChannelClient> {
    const client = new ChannelClient(stream);
    const timeoutMs = opts.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS;
    let timer: NodeJS.Timeout | undefined;
    try {
      const hello = await new Promise<HelperHello>((resolve, reject) => {
        client.helloWaiter = { resolve, reject };
        timer = setTimeout(
          () =>
            reject(
              new AirlockError(
                'SANDBOX_FAILED',
                `the sandbox helper did not answer within ${timeoutMs} ms${client.earlyText()}; check that the image has node and /opt/airlock/helper.js`,
              ),
            ),
          timeoutMs,
        );
      });
      if (hello.version !== PROTOCOL_VERSION) {
        throw new AirlockError(
          'IMAGE_INCOMPATIBLE',
          `the sandbox helper speaks protocol ${hello.version}, this Airlock speaks ${PROTOCOL_VERSION}; rebuild the sandbox image`,
        );
      }
      client._hello = hello;
      return client;
    } catch (err) {
      client.dispose();
      throw err;
    } finally {
      if (timer) clearTimeout(timer);
      client.helloWaiter = undefined;
      stream.readable.removeListener('data', client.onEarlyData);
    }
  }

  private constructor(private readonly stream: ChannelStream) {
    // Keep the first bytes until hello: if the helper never starts, they say why.
    stream.readable.on('data', this.onEarlyData);
    this.mux = new Mux(stream.readable, stream.writable, {
      control: (message) => this.onControl(message),
      data: (streamId, type, payload) => this.onData(streamId, type, payload),
      end: (streamId) => this.sinks.get(streamId)?.remoteEnd(),
      reset: (streamId, reason) => {
        const sink = this.sinks.get(streamId);
        this.sinks.delete(streamId);
        sink?.remoteReset(reason);
      },
      closed: (reason) => this.onClosed(reason),
    });
  }

  /** What the helper reported at start. */
  get hello(): HelperHello {
    if (!this._hello) throw new AirlockError('CHANNEL_CLOSED', 'the channel has not said hello yet (use ChannelClient.connect)');
    return this._hello;
  }

  get isClosed(): boolean {
    return this.closedReason !== undefined;
  }

  spawn(opts: SpawnOptions): ChannelProcess {
    const id = this.allocateStream();
    const cap = opts.maxOutputBytes;
    const proc = new ProcessHandle(this, this.mux, id, cap !== undefined && cap >= 0 ? cap + TRUNCATION_MARKER_ROOM : undefined);
    if (this.closedReason !== undefined) {
      proc.finish({ error: this.closedError() });
      return proc;
    }
    this.processes.set(id, proc);
    const spawn = {
      argv: opts.argv,
      cwd: opts.cwd,
      env: opts.env,
      pty: opts.pty,
      timeoutMs: opts.timeoutMs,
      maxOutputBytes: opts.maxOutputBytes,
      ...(opts.as ? { as: opts.as } : {}),
    };
    this.request({ op: 'spawn', stream: id, spawn }).catch((err: AirlockError) => {
      this.processes.delete(id);
      proc.finish({ error: err });
    });
    return proc;
  }

  /** Runs a command to its end, gathering its output (at most `maxOutputBytes`, default 64 MiB). */
  async run(opts: SpawnOptions & { stdin?: Buffer | string | NodeJS.ReadableStream }): Promise<RunResult> {
    const proc = this.spawn({ ...opts, maxOutputBytes: opts.maxOutputBytes ?? DEFAULT_RUN_MAX_OUTPUT_BYTES }) as ProcessHandle;
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    proc.onStdout((b) => stdout.push(b));
    proc.onStderr((b) => stderr.push(b));
    const input = opts.stdin;
    let stopInput: () => void = () => undefined;
    if (input === undefined) {
      proc.end();
    } else if (typeof input === 'string' || Buffer.isBuffer(input)) {
      proc.write(input);
      proc.end();
    } else {
      stopInput = pipeInput(input, proc);
    }
    try {
      const info = await proc.exited;
      return { ...info, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr) };
    } finally {
      stopInput();
    }
  }

  /** Reads a file of the sandbox; more than `maxBytes` (default 256 MiB) fails, never buffers on. */
  async readFile(path: string, opts: { maxBytes?: number } = {}): Promise<Buffer> {
    const id = this.allocateStream();
    const maxBytes = opts.maxBytes ?? DEFAULT_READ_MAX_BYTES;
    const sink = new CollectSink(this.mux, id, maxBytes);
    this.sinks.set(id, sink);
    try {
      await this.request({ op: 'readFile', stream: id, path, maxBytes });
      if (sink.overrun) {
        throw new AirlockError('SANDBOX_FAILED', `the sandbox helper sent more than the ${maxBytes} bytes asked for while reading ${path.slice(0, 200)}; the read was refused`);
      }
      return Buffer.concat(sink.chunks);
    } finally {
      this.sinks.delete(id);
      this.mux.forget(id);
    }
  }

  async writeFile(path: string, data: Buffer | string, opts: { mode?: number } = {}): Promise<void> {
    const id = this.allocateStream();
    const done = this.request({ op: 'writeFile', stream: id, path, mode: opts.mode });
    const sender = this.mux.sender(id);
    sender.write(typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    sender.end();
    try {
      await done;
    } finally {
      this.mux.forget(id);
    }
  }

  list(dir: string): Promise<FileEntry[]> {
    return this.request({ op: 'list', path: dir });
  }

  async watch(dir: string, listener: (paths: string[]) => void, opts: WatchOptions = {}): Promise<Disposable> {
    const watchId = this.nextHandle++;
    this.watchers.set(watchId, listener);
    try {
      await this.request({
        op: 'watch',
        watchId,
        path: dir,
        debounceMs: opts.debounceMs ?? 100,
        ignore: opts.ignore ?? [],
        backend: opts.backend ?? 'auto',
      });
    } catch (err) {
      this.watchers.delete(watchId);
      throw err;
    }
    return toDisposable(() => {
      this.watchers.delete(watchId);
      if (!this.isClosed) this.request({ op: 'unwatch', watchId }).catch(debugLog.swallow('channel.unwatch'));
    });
  }

  /**
   * Makes a host service reachable inside the sandbox at 127.0.0.1:`sandboxPort` (0: any free port):
   * each connection made there is joined to a fresh `connect()`. At most `maxConnections` (default
   * `maxConnections` of the channel, at most MAX_SERVICE_CONNECTIONS) are open at once; the helper
   * holds later ones waiting for a slot (§4). `name` says what it is when connections are refused.
   * `closeIdle`: while connections wait, the helper closes the service's idle ones (no bytes for
   * IDLE_CLOSE_MS after the server spoke last), for a service whose clients keep sockets open
   * longer than its own idle timeout (the egress proxy's tunnels); never a connection mid-request.
   */
  async exposeHostService(
    sandboxPort: number,
    connect: () => Socket,
    opts: { name?: string; maxConnections?: number; closeIdle?: boolean } = {},
  ): Promise<{ port: number } & Disposable> {
    const listenerId = this.nextHandle++;
    const limit = Math.max(1, Math.min(MAX_SERVICE_CONNECTIONS, Math.floor(opts.maxConnections ?? this.connectionLimit)));
    this.services.set(listenerId, { name: opts.name ?? `host service ${listenerId}`, connect, limit, open: 0 });
    let port: number;
    try {
      ({ port } = await this.request({ op: 'listen', listenerId, port: sandboxPort, maxConnections: limit, ...(opts.closeIdle ? { closeIdle: true } : {}) }));
    } catch (err) {
      this.services.delete(listenerId);
      throw err;
    }
    const disposable = toDisposable(() => {
      this.services.delete(listenerId);
      if (!this.isClosed) this.request({ op: 'unlisten', listenerId }).catch(debugLog.swallow('channel.unlisten'));
    });
    return { port, dispose: () => disposable.dispose() };
  }

  async connectToSandboxPort(port: number): Promise<Duplex> {
    const id = this.allocateStream();
    const duplex = new ChannelDuplex(this.mux, id, () => this.sinks.delete(id));
    this.sinks.set(id, duplex);
    try {
      await this.request({ op: 'connect', stream: id, port });
    } catch (err) {
      this.sinks.delete(id);
      duplex.remoteReset(String((err as Error).message));
      duplex.on('error', () => undefined);
      throw err;
    }
    return duplex;
  }

  dispose(): void {
    if (this.isClosed) return;
    this.mux.close('the channel was disposed');
  }

  /**
   * @internal Sends a request and waits for its response, whose value is checked with the op's
   * result guard on arrival (a malformed one closes the channel: the helper is not to be trusted).
   */
  request<R extends Request>(req: R): Promise<ResultOf<R['op']>> {
    if (this.closedReason !== undefined) return Promise.reject(this.closedError());
    const id = this.nextRequest++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { result: resultGuard(req.op), op: req.op, resolve: resolve as (value: unknown) => void, reject });
      this.mux.sendControl({ t: 'req', id, ...req });
    });
  }

  private allocateStream(): number {
    const id = this.nextStream;
    this.nextStream = this.nextStream >= 0x7fffffff ? 1 : this.nextStream + 2;
    return id;
  }

  private closedError(): AirlockError {
    return new AirlockError(
      'CHANNEL_CLOSED',
      `the sandbox channel is closed (${this.closedReason}); the sandbox may have stopped — start a new one`,
    );
  }

  private earlyText(): string {
    const text = this.early.toString('utf8').replace(/[^\x20-\x7e\n\t]/g, '').trim();
    return text ? ` (it printed: ${JSON.stringify(text.slice(0, 300))})` : '';
  }

  private readonly onEarlyData = (chunk: Buffer | string): void => {
    if (this.early.length < 1024) this.early = Buffer.concat([this.early, Buffer.from(chunk)]).subarray(0, 1024);
  };

  /** Everything the helper sends is checked with its one definition (protocol.ts) before anything acts on it. */
  private onControl(raw: RawControl): void {
    const m = checkMessage(helperMessage, raw, `${JSON.stringify(raw.t.slice(0, 32))} message from the sandbox helper`);
    switch (m.t) {
      case 'hello':
        this.helloWaiter?.resolve({ version: m.version, node: m.node, uid: m.uid, agentUid: m.agentUid, pid: m.pid, pty: m.pty });
        return;
      case 'res': {
        const pending = this.pending.get(m.id);
        if (!pending) return;
        // A malformed value throws here, while the call is still pending: the close then fails it.
        const value = m.ok ? checkMessage(pending.result, m.value, `${pending.op} result from the sandbox helper`) : undefined;
        this.pending.delete(m.id);
        if (m.ok) pending.resolve(value);
        else pending.reject(toAirlockError(m.error!));
        return;
      }
      case 'exit': {
        const proc = this.processes.get(m.stream);
        if (!proc) return;
        this.processes.delete(proc.id);
        proc.finish({ info: m.info });
        return;
      }
      case 'watch': {
        const listener = this.watchers.get(m.watchId);
        if (!listener) return;
        try {
          listener(m.paths);
        } catch (err) {
          // A throwing listener is the caller's bug; it must not tear down the channel.
          process.emitWarning(`airlock: a watch listener threw: ${(err as Error).message}`);
        }
        return;
      }
      case 'watchError':
        return; // The helper logs it; the watch keeps its listener in case events resume.
      case 'accept':
        // The guard made sure the stream is the helper's (even); one already in use is no real accept.
        if (this.sinks.has(m.stream)) throw new ProtocolError(`malformed accept from the sandbox helper: stream ${m.stream} is already open`);
        this.onAccept(m.listenerId, m.stream);
        return;
      case 'refused': {
        // Only a service the host exposed is named; the helper's count is its claim, bounded by the guard.
        const service = this.services.get(m.listenerId);
        if (service) this.noteRefused(service, m.count);
        return;
      }
    }
  }

  private onData(streamId: number, type: FrameType, payload: Buffer): void {
    const proc = this.processes.get(streamId);
    if (proc) {
      // Output of another type on a process's stream is dropped uncredited; discarding would wipe
      // the stream's in-flight count and let a helper send past its window.
      if (type === FrameType.stdout || type === FrameType.stderr) proc.output(type, payload);
      return;
    }
    const sink = this.sinks.get(streamId);
    if (sink) sink.remoteData(payload);
    else this.mux.discard(streamId);
  }

  private onAccept(listenerId: number, streamId: number): void {
    const service = this.services.get(listenerId);
    if (!service) {
      // Not (or no longer) exposed: nothing on the host to join it to, and no slot to take.
      this.mux.reset(streamId, 'the host service is no longer exposed');
      return;
    }
    // Each accepted stream is a host socket: the sandbox may not open them without bound. The
    // helper waits for a slot before it accepts, so only a helper that ignores the cap gets here.
    if (service.open >= service.limit) {
      this.mux.reset(streamId, `too many open connections (at most ${service.limit})`);
      this.noteRefused(service, 1);
      return;
    }
    this.endRefusals();
    // The slot is held until the stream is finished, which ChannelDuplex says exactly once (§4).
    this.acceptedOpen += 1;
    service.open += 1;
    const duplex = new ChannelDuplex(this.mux, streamId, () => {
      this.acceptedOpen -= 1;
      service.open -= 1;
      this.sinks.delete(streamId);
    });
    this.sinks.set(streamId, duplex);
    const connect = service.connect;
    let socket: Socket;
    try {
      socket = connect();
    } catch (err) {
      duplex.destroy(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    joinSocket(duplex, socket);
  }

  private noteRefused(service: ExposedService, count: number): void {
    this.refusing ??= new Map();
    const before = this.refusing.get(service)?.refused ?? 0;
    const refused = before + count;
    this.refusing.set(service, { refused, limit: service.limit });
    if (before === 0) this.refusedEmitter.fire({ service: service.name, limit: service.limit, refused, ended: false });
  }

  /** A connection was accepted again (or the channel closed): the episode's totals, where they add anything. */
  private endRefusals(): void {
    const refusing = this.refusing;
    if (!refusing) return;
    this.refusing = undefined;
    for (const [service, { refused, limit }] of refusing) {
      if (refused > 1) this.refusedEmitter.fire({ service: service.name, limit, refused, ended: true });
    }
  }

  private onClosed(reason: string): void {
    this.closedReason = reason;
    this.helloWaiter?.reject(
      new AirlockError('SANDBOX_FAILED', `the sandbox helper did not start: ${reason}${this.earlyText()}`),
    );
    const error = this.closedError();
    for (const pending of this.pending.values()) pending.reject(error);
    this.pending.clear();
    for (const proc of this.processes.values()) proc.finish({ error });
    this.processes.clear();
    for (const sink of [...this.sinks.values()]) {
      // A forwarded connection nobody handles errors on must not crash the host: close it quietly.
      if (sink instanceof ChannelDuplex && sink.listenerCount('error') === 0) sink.destroy();
      else sink.remoteReset(`channel closed: ${reason}`);
    }
    this.sinks.clear();
    this.watchers.clear();
    this.services.clear();
    try {
      this.stream.close();
    } catch {
      // Already closed.
    }
    this.endRefusals();
    this.refusedEmitter.dispose();
    this.closeEmitter.fire({ reason });
    this.closeEmitter.dispose();
  }
}

/** Pipes a readable into a process's stdin with backpressure; returns a function that stops it. */
function pipeInput(input: NodeJS.ReadableStream, proc: ProcessHandle): () => void {
  let stopped = false;
  const onData = (chunk: Buffer | string) => {
    if (stopped) return;
    if (!proc.send(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)) {
      input.pause();
      proc.whenWritable(() => {
        if (!stopped) input.resume();
      });
    }
  };
  const onEnd = () => {
    if (!stopped) proc.end();
  };
  const onError = (err: Error) => {
    if (stopped) return;
    // A failing source must not leave the command waiting for more input forever.
    process.emitWarning(`airlock: stdin source failed: ${err.message}`);
    proc.end();
  };
  input.on('data', onData);
  input.on('end', onEnd);
  input.on('error', onError);
  input.resume();
  return () => {
    stopped = true;
    input.removeListener('data', onData);
    input.removeListener('end', onEnd);
    input.removeListener('error', onError);
  };
}
