/**
 * Processes started for the host: clean env, own process group, stdio streamed over the channel
 * with flow control, whole-tree kill, per-command timeout, output cap, optional PTY.
 */
import { spawn as spawnChild, type ChildProcess } from 'node:child_process';
import { constants as osConstants, userInfo } from 'node:os';
import { stat } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { FrameType, type WireExit, type WireSpawn } from '../../../core/channel/protocol';
import type { Mux, StreamSender } from '../../../core/channel/mux';
import { HelperError, fromSystemError } from './errors';
import { signalTree, treeAlive } from './process-tree';
import { loadNodePty, type PtyProcess } from './pty';
import { agentHomeDir, agentIdentity } from './identity';
import { spawnWithRaisedOomScore } from './oom-score';

const BASE_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const DEFAULT_KILL_GRACE_MS = 2000;
/** After the command exits, how long to wait for its pipes to reach EOF while no data flows. */
const STDIO_LINGER_MS = 200;
const MAX_LINGER_MS = 2000;

let cachedHome: string | undefined;
function home(): string {
  if (agentIdentity()) return agentHomeDir();
  if (cachedHome === undefined) {
    try {
      cachedHome = userInfo().homedir || '/';
    } catch {
      cachedHome = '/';
    }
  }
  return cachedHome;
}

/**
 * The environment a command sees: a clean base plus what the caller passed, never the helper's own.
 * A command run as the helper gets HOME=/ (root's, not the agent's writable home: git would read
 * `~/.config/git/ignore` and attributes from there).
 */
export function commandEnv(extra: Record<string, string> | undefined, asHelper = false): Record<string, string> {
  return { PATH: BASE_PATH, HOME: asHelper ? '/' : home(), LANG: 'C.UTF-8', TERM: 'xterm-256color', ...(extra ?? {}) };
}

/** The uid/gid a command starts with: the agent's, unless the host asked for the helper's own. */
function spawnIdentity(spec: WireSpawn): { uid: number; gid: number } | undefined {
  const agent = agentIdentity();
  return agent && spec.as !== 'helper' ? agent : undefined;
}

function signalName(signal: number | string | null | undefined): string | null {
  if (signal === null || signal === undefined || signal === 0) return null;
  if (typeof signal === 'string') return signal;
  for (const [name, value] of Object.entries(osConstants.signals)) if (value === signal) return name;
  return String(signal);
}

/** One running command; owns its stream id on the channel. */
class RunningProcess {
  private readonly started = Date.now();
  private readonly out: StreamSender;
  private readonly known = new Set<number>();
  private readonly stdinDecoder = new StringDecoder('utf8');
  private child: ChildProcess | undefined;
  private pty: PtyProcess | undefined;
  private pid = 0;
  private outputBytes = 0;
  private forwarded = 0;
  private truncated = false;
  private timedOut = false;
  private exited = false;
  private exitedAt = 0;
  private reported = false;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private escalateTimer: NodeJS.Timeout | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  private openPipes = 0;
  private exitStatus: { code: number | null; signal: string | null } | undefined;
  private early: Buffer[] = [];
  private earlyEnd = false;
  private earlyKill: NodeJS.Signals | undefined;
  private readonly paused = new Set<{ pause(): void; resume(): void }>();

  constructor(
    private readonly mux: Mux,
    readonly streamId: number,
    private readonly spec: WireSpawn,
    private readonly onDone: (p: RunningProcess) => void,
  ) {
    this.out = mux.sender(streamId);
  }

  async start(): Promise<{ pid: number }> {
    // The spec was checked on arrival with its one definition (protocol.ts `wireSpawn`).
    const { spec } = this;
    const asHelper = spec.as === 'helper';
    const cwd = spec.cwd ?? (asHelper ? '/' : home());
    // The kernel clears the permitted, effective and ambient sets on the switch to a non-zero uid
    // (no SECBIT_KEEP_CAPS): the command has no capability, and no-new-privileges keeps it so.
    const id = spawnIdentity(spec);
    // cwd is checked only when a spawn fails (ENOENT is ambiguous then): no extra hop on the hot path.
    const cwdProblem = async (): Promise<HelperError | undefined> => {
      try {
        const st = await stat(cwd);
        return st.isDirectory() ? undefined : new HelperError('INVALID_INPUT', `spawn: working directory ${cwd} is not a directory`);
      } catch (err) {
        return fromSystemError(err, `spawn: working directory ${cwd}`);
      }
    };
    const env = commandEnv(spec.env, asHelper);
    const [file, ...args] = spec.argv as [string, ...string[]];
    if (spec.pty) {
      const nodePty = loadNodePty();
      try {
        const opts = { name: env.TERM ?? 'xterm-256color', cols: spec.pty.cols, rows: spec.pty.rows, cwd, env, encoding: null, ...(id ?? {}) };
        // node-pty forks inside spawn: the child starts with the raised score (oom-score.ts).
        this.pty = spawnWithRaisedOomScore(() => nodePty.spawn(file, args, opts));
      } catch (err) {
        throw (await cwdProblem()) ?? fromSystemError(err, `spawn ${file}`);
      }
      this.pid = this.pty.pid;
      const pty = this.pty;
      this.openPipes = 1;
      pty.onData((data) => this.onOutput(typeof data === 'string' ? Buffer.from(data, 'utf8') : data, FrameType.stdout, pty));
      pty.onExit(({ exitCode, signal }) => {
        // node-pty reports exit after the last output; the pty counts as drained.
        this.openPipes = 0;
        this.onExit(signal ? null : exitCode, signalName(signal));
      });
    } else {
      // libuv forks (and the child execs) inside spawn: the child starts with the raised score (oom-score.ts).
      const child = spawnWithRaisedOomScore(() => spawnChild(file, args, { cwd, env, detached: true, stdio: ['pipe', 'pipe', 'pipe'], ...(id ?? {}) }));
      this.child = child;
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', (err) => {
          const code = (err as NodeJS.ErrnoException).code;
          void cwdProblem().then((problem) => {
            if (problem) reject(problem);
            else if (code === 'ENOENT') reject(new HelperError('NOT_FOUND', `command not found: ${file} (not on PATH ${env.PATH})`));
            else if (code === 'EACCES') reject(new HelperError('FORBIDDEN', `cannot execute ${file}: permission denied`));
            else reject(fromSystemError(err, `spawn ${file}`));
          });
        });
      });
      this.pid = child.pid!;
      child.stdin!.on('error', () => undefined); // EPIPE when the command exits without reading stdin.
      this.openPipes = 2;
      for (const [stream, type] of [
        [child.stdout!, FrameType.stdout],
        [child.stderr!, FrameType.stderr],
      ] as const) {
        stream.on('data', (data: Buffer) => this.onOutput(data, type, stream));
        stream.once('close', () => {
          this.openPipes--;
          this.maybeReport();
        });
      }
      child.once('exit', (code, signal) => this.onExit(code, signal));
    }
    if (spec.timeoutMs && spec.timeoutMs > 0) {
      this.timeoutTimer = setTimeout(() => {
        this.timedOut = true;
        this.kill('SIGTERM');
      }, spec.timeoutMs);
    }
    for (const data of this.early.splice(0)) this.write(data);
    if (this.earlyEnd) this.endStdin();
    if (this.earlyKill) this.kill(this.earlyKill);
    return { pid: this.pid };
  }

  private onOutput(data: Buffer, type: FrameType, source: { pause(): void; resume(): void }): void {
    this.outputBytes += data.length;
    // Output after the exit keeps the pipes alive, but only for a bounded time.
    if (this.lingerTimer && Date.now() - this.exitedAt < MAX_LINGER_MS) this.armLinger();
    if (this.truncated) return; // Keep draining so the command does not block on a full pipe.
    const cap = this.spec.maxOutputBytes;
    if (cap !== undefined && cap >= 0 && this.forwarded + data.length > cap) {
      const room = cap - this.forwarded;
      if (room > 0) this.out.write(data.subarray(0, room), type);
      this.forwarded = cap;
      this.truncated = true;
      this.out.write(Buffer.from(`\n[airlock: output truncated after ${cap} bytes; the rest was dropped]\n`), type);
      return;
    }
    this.forwarded += data.length;
    if (!this.out.write(data, type) && !this.paused.has(source)) {
      this.paused.add(source);
      source.pause();
      this.out.onReady(() => {
        this.paused.delete(source);
        source.resume();
      });
    }
  }

  private onExit(code: number | null, signal: string | null): void {
    if (this.exited) return;
    this.exited = true;
    this.exitedAt = Date.now();
    this.exitStatus = { code, signal };
    if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
    this.armLinger();
    this.maybeReport();
  }

  /**
   * A background process may keep the pipes open after the command exits; report the exit once the
   * pipes close, or once no output has flowed for a short while.
   */
  private armLinger(): void {
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    this.lingerTimer = setTimeout(() => {
      if (this.paused.size > 0) {
        this.armLinger(); // Output is still waiting for the host; not idle.
        return;
      }
      this.child?.stdout?.destroy();
      this.child?.stderr?.destroy();
      this.openPipes = 0;
      this.maybeReport();
    }, STDIO_LINGER_MS);
  }

  private maybeReport(): void {
    if (!this.exited || this.openPipes > 0 || this.reported) return;
    this.reported = true;
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    const info: WireExit = {
      exitCode: this.exitStatus!.code,
      signal: this.exitStatus!.signal,
      timedOut: this.timedOut,
      truncated: this.truncated,
      durationMs: Date.now() - this.started,
      outputBytes: this.outputBytes,
    };
    // The exit must follow every byte of output already queued for the host.
    this.out.onFlushed(() => {
      this.mux.sendControl({ t: 'exit', stream: this.streamId, info });
      this.mux.forget(this.streamId);
      if (!this.escalateTimer) this.onDone(this);
    });
  }

  write(data: Buffer): void {
    if (!this.pid) {
      this.early.push(data); // Stdin sent before the process exists; bounded by the host's window.
      return;
    }
    if (this.pty) {
      this.pty.write(this.stdinDecoder.write(data));
      this.mux.consumed(this.streamId, data.length);
      return;
    }
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) {
      this.mux.consumed(this.streamId, data.length);
      return;
    }
    // Credit goes back only when the child has taken the bytes: a child that does not read stalls
    // the host's sender, not the helper's memory.
    stdin.write(data, () => this.mux.consumed(this.streamId, data.length));
  }

  endStdin(): void {
    if (!this.pid) {
      this.earlyEnd = true;
      return;
    }
    if (this.pty) {
      const rest = this.stdinDecoder.end();
      if (rest) this.pty.write(rest);
      this.pty.write('\x04'); // EOF for a terminal in canonical mode.
      return;
    }
    this.child?.stdin?.end();
  }

  resize(cols: number, rows: number): void {
    if (!this.pty) throw new HelperError('INVALID_INPUT', 'resize: this process has no terminal (spawn it with pty)');
    // cols and rows (>= 1) were checked on arrival (protocol.ts).
    this.pty.resize(Math.floor(cols), Math.floor(rows));
  }

  /** Signals the whole tree; SIGTERM escalates to SIGKILL after the grace period. */
  kill(sig: NodeJS.Signals): void {
    if (!this.pid) {
      this.earlyKill = sig;
      return;
    }
    void signalTree(this.pid, sig, this.known).then(() => {
      if (sig !== 'SIGTERM' || this.escalateTimer) return;
      this.escalateTimer = setTimeout(() => {
        if (treeAlive(this.pid, this.known)) void signalTree(this.pid, 'SIGKILL', this.known);
        this.escalateTimer = undefined;
        if (this.reported) this.onDone(this);
      }, this.spec.killGraceMs ?? DEFAULT_KILL_GRACE_MS);
    });
  }

  /** Channel gone: nobody is left to receive output; kill everything now. */
  destroy(): Promise<void> {
    if (this.timeoutTimer) clearTimeout(this.timeoutTimer);
    if (this.escalateTimer) clearTimeout(this.escalateTimer);
    if (this.lingerTimer) clearTimeout(this.lingerTimer);
    return this.pid ? signalTree(this.pid, 'SIGKILL', this.known) : Promise.resolve();
  }
}

/** All processes of one channel, by stream id. */
export class ProcessTable {
  private readonly byStream = new Map<number, RunningProcess>();

  constructor(private readonly mux: Mux) {}

  async spawn(streamId: number, spec: WireSpawn): Promise<{ pid: number }> {
    if (this.byStream.has(streamId)) throw new HelperError('CONFLICT', `stream ${streamId} is already in use`);
    const proc = new RunningProcess(this.mux, streamId, spec, (p) => {
      if (this.byStream.get(p.streamId) === p) this.byStream.delete(p.streamId);
    });
    this.byStream.set(streamId, proc);
    try {
      return await proc.start();
    } catch (err) {
      this.byStream.delete(streamId);
      this.mux.forget(streamId);
      throw err;
    }
  }

  get(streamId: number): RunningProcess | undefined {
    return this.byStream.get(streamId);
  }

  require(streamId: number): RunningProcess {
    const proc = this.byStream.get(streamId);
    if (!proc) throw new HelperError('NOT_FOUND', `no running process on stream ${streamId} (it may have exited)`);
    return proc;
  }

  /** Kills every tree; resolves once the signals are sent. */
  destroyAll(): Promise<void> {
    const all = [...this.byStream.values()].map((proc) => proc.destroy());
    this.byStream.clear();
    return Promise.all(all).then(() => undefined);
  }
}
