import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { lstat, mkdir } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { hostToolCwd } from '../../common/host-tool-env';

/** Where an `ssh://` engine lives: what `ssh` is told to connect to. */
export interface SshTarget {
  host: string;
  user?: string;
  port?: number;
}

/**
 * Options of every `ssh` this transport runs. The user's own ssh (config, known_hosts, keys, agent,
 * ProxyJump) decides how to reach the host, as with the docker CLI; BatchMode means a missing key or
 * an unknown host key fails at once instead of waiting for a prompt nobody sees.
 */
function sshArgs(target: SshTarget, controlDir: string | undefined, configFile: string | undefined): string[] {
  const args = ['-T', '-o', 'BatchMode=yes', '-o', 'ConnectTimeout=15', '-o', 'ServerAliveInterval=10', '-o', 'ServerAliveCountMax=3', '-o', 'LogLevel=ERROR'];
  if (configFile) args.push('-F', configFile);
  // One SSH connection carries every API call (the docker CLI does the same): a handshake per
  // request would cost more than most requests.
  if (controlDir) args.push('-o', 'ControlMaster=auto', '-o', `ControlPath=${path.join(controlDir, '%C')}`, '-o', 'ControlPersist=60');
  if (target.port) args.push('-p', String(target.port));
  if (target.user) args.push('-l', target.user);
  return [...args, '--', target.host, 'docker', 'system', 'dial-stdio'];
}

/**
 * A private directory for ssh's control sockets (anyone who can open one uses the connection): made
 * 0700 and refused when it exists but is not a directory of ours with that mode.
 */
export async function privateControlDir(base = os.tmpdir()): Promise<string | undefined> {
  if (process.platform === 'win32') return undefined; // Windows' OpenSSH has no ControlMaster.
  const uid = process.getuid?.() ?? 0;
  const dir = path.join(base, `airlock-ssh-${uid}`);
  await mkdir(dir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
  const st = await lstat(dir);
  if (!st.isDirectory() || st.uid !== uid || (st.mode & 0o077) !== 0) return undefined;
  return dir;
}

/** ssh's own words for why it failed, as an errno-like code the engine error mapping understands. */
export function sshFailureCode(stderr: string, exitCode: number | null): string {
  if (/session open refused|administratively prohibited/i.test(stderr)) return 'ESSHSESSIONS';
  if (/host key verification failed|remote host identification has changed/i.test(stderr)) return 'EHOSTKEY';
  if (/permission denied/i.test(stderr)) return 'EAUTH';
  if (/could not resolve hostname/i.test(stderr)) return 'ENOTFOUND';
  if (/connection refused/i.test(stderr)) return 'ECONNREFUSED';
  if (/timed out|timeout/i.test(stderr)) return 'ETIMEDOUT';
  if (/no route to host|network is unreachable/i.test(stderr)) return 'EHOSTUNREACH';
  if (exitCode === 127 || /docker: (command )?not found|command not found/i.test(stderr)) return 'ENODOCKER';
  return 'ECONNRESET';
}

/**
 * One connection to the remote engine: `ssh host docker system dial-stdio`, whose stdin/stdout
 * are the engine's API socket on that host. Looks enough like a socket for Node's HTTP client.
 */
class SshStdioSocket extends Duplex {
  private stderr = '';

  constructor(private readonly child: ChildProcessWithoutNullStreams) {
    super({ allowHalfOpen: true });
    let outEnded = false;
    let exit: { code: number | null } | undefined;
    // The end of the stream is told only once ssh has exited: a failed ssh (unknown host key,
    // refused login) must reach the HTTP client as that error, not as a bare "socket hang up".
    const settle = () => {
      if (!outEnded || !exit) return;
      if (exit.code === 0) {
        child.stderr.destroy(); // a background ssh master (ControlPersist) keeps stderr open
        this.push(null);
        return;
      }
      // Give stderr a moment to arrive after the exit, then say why.
      setTimeout(() => {
        child.stderr.destroy();
        const text = this.stderr.trim().split('\n').slice(-3).join(' ').replace(/\s+/g, ' ').slice(0, 500);
        const err = Object.assign(new Error(`ssh exited ${exit?.code ?? 'on a signal'}${text ? `: ${text}` : ''}`), { code: sshFailureCode(text, exit?.code ?? null) });
        this.destroy(err);
      }, 50).unref();
    };
    child.stdout.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) child.stdout.pause();
    });
    child.stdout.on('end', () => {
      outEnded = true;
      settle();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (this.stderr.length < 4096) this.stderr += chunk.toString('utf8');
    });
    child.stdin.on('error', () => undefined); // reported through the exit
    child.on('error', (err) => this.destroy(err));
    child.on('exit', (code) => {
      exit = { code };
      settle();
    });
  }

  override _read(): void {
    this.child.stdout.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.child.stdin.destroyed) return cb(Object.assign(new Error('ssh connection closed'), { code: 'EPIPE' }));
    this.child.stdin.write(chunk, cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.child.stdin.end(cb);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill();
    cb(err);
  }

  // What Node's HTTP client calls on a socket; a pipe has no such knobs.
  setNoDelay(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  setTimeout(): this {
    return this;
  }
  /** An idle kept-alive connection must not keep Airlock running (Node's agent unrefs free sockets). */
  ref(): this {
    for (const s of [this.child, this.child.stdout, this.child.stdin] as Array<{ ref?: () => void }>) s.ref?.();
    return this;
  }
  unref(): this {
    for (const s of [this.child, this.child.stdout, this.child.stdin] as Array<{ unref?: () => void }>) s.unref?.();
    return this;
  }
}

/**
 * An HTTP agent whose connections are `ssh … docker system dial-stdio` (docs/architecture.md §13):
 * dockerode talks plain HTTP over them, attach and exec streams included. Every child is killed by
 * `destroy()`.
 */
export class SshDialAgent extends http.Agent {
  private readonly sockets_ = new Set<SshStdioSocket>();

  constructor(
    private readonly sshPath: string,
    private readonly target: SshTarget,
    private readonly controlDir: string | undefined,
    private readonly configFile: string | undefined,
    private readonly env: NodeJS.ProcessEnv,
  ) {
    // Connections are kept for the next request: each new one starts a docker CLI on the remote
    // host (~0.1 s). Few are kept idle, since sshd allows 10 sessions per connection by default.
    super({ keepAlive: true, maxFreeSockets: 2 });
  }

  override createConnection(): Duplex {
    const child = spawn(this.sshPath, sshArgs(this.target, this.controlDir, this.configFile), { stdio: ['pipe', 'pipe', 'pipe'], env: this.env, cwd: hostToolCwd(), windowsHide: true });
    const socket = new SshStdioSocket(child);
    this.sockets_.add(socket);
    socket.once('close', () => this.sockets_.delete(socket));
    return socket;
  }

  override destroy(): void {
    for (const s of this.sockets_) s.destroy();
    this.sockets_.clear();
    super.destroy();
  }
}
