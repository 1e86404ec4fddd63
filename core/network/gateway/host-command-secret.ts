import { spawn } from 'node:child_process';
import { AirlockError } from '../../../contracts/errors';
import { Emitter, type Event } from '../../common/disposable';
import { hostToolCwd, hostToolEnv } from '../../common/host-tool-env';
import { findTool } from '../../common/resolve-tool';
import { Secret } from '../../keys/secret';

/**
 * A gateway secret whose value a host command prints (`gh auth token`, `op read op://…`), fetched
 * when the gateway first needs it and again when the upstream answers 401 (docs/architecture.md
 * §2.8, "Secrets fetched when used"). The command runs on the host, never in the sandbox, without a
 * shell (argv as the user wrote it; `sh -c '…'` when they want one), from the user's home folder,
 * bounded in time and output. The value is held in this process's memory only — for its stated life
 * when the binding gives one — and never written, logged or audited; its stderr is never shown (a
 * failing credential tool may print the token it could not use).
 */

/** How long a command may take (a password manager may wait for the user to unlock it). */
export const DEFAULT_COMMAND_TIMEOUT_MS = 60_000;
/** More output than any token: the command is stopped and the fetch fails. */
const MAX_OUTPUT_BYTES = 64 * 1024;

/** Why a value was fetched: the first request that needed it, its life ran out, or a 401 said it is stale. */
export type FetchTrigger = 'first use' | 'expired' | '401';

/** One run of the command, as audited: never the value. */
export interface SecretFetchEvent {
  secret: string;
  trigger: FetchTrigger;
  ok: boolean;
  /** Why it failed (exit code, timeout, not found, bad output); never the command's output. */
  error?: string;
  durationMs: number;
}

export interface HostCommandSecretOptions {
  /** The value is fetched again after this long (the binding's `ttlSeconds`); default: for the run. */
  ttlMs?: number;
  timeoutMs?: number;
  /** The host's environment the command runs with (the user's own, on purpose), from the root. */
  env: NodeJS.ProcessEnv;
  cwd?: string;
}

const SHELL_CHARS = /[|&;<>()$`*?[\]{}~#!]/;

/**
 * Splits a command line into argv the way a POSIX shell would quote, and does nothing else a shell
 * does: `'…'` is literal, `"…"` keeps `\"` and `\\`, a backslash outside quotes escapes the next
 * character. An unquoted character that would mean something to a shell (a pipe, `$`, a glob, `~`,
 * `;`) is refused with a message, so nobody is surprised by a command that runs differently here.
 */
export function parseCommandLine(text: string): string[] {
  const argv: string[] = [];
  let cur = '';
  let has = false;
  let i = 0;
  const fail = (why: string): never => {
    throw new AirlockError('INVALID_INPUT', `the secret's command ${why}; it runs without a shell — write sh -c '…' if you need one`);
  };
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      if (has) argv.push(cur);
      cur = '';
      has = false;
      i++;
    } else if (c === "'") {
      const end = text.indexOf("'", i + 1);
      if (end < 0) fail('has an unclosed single quote');
      cur += text.slice(i + 1, end);
      has = true;
      i = end + 1;
    } else if (c === '"') {
      i++;
      for (;;) {
        if (i >= text.length) fail('has an unclosed double quote');
        const d = text[i] as string;
        if (d === '"') break;
        if (d === '\\' && (text[i + 1] === '"' || text[i + 1] === '\\')) {
          cur += text[i + 1];
          i += 2;
        } else if (d === '$' || d === '`') fail(`uses ${d} inside double quotes (no expansion happens here)`);
        else {
          cur += d;
          i++;
        }
      }
      has = true;
      i++;
    } else if (c === '\\') {
      if (i + 1 >= text.length) fail('ends with a backslash');
      cur += text[i + 1];
      has = true;
      i += 2;
    } else if (SHELL_CHARS.test(c)) {
      fail(`uses ${c}, which a shell would interpret`);
    } else {
      cur += c;
      has = true;
      i++;
    }
  }
  if (has) argv.push(cur);
  if (argv.length === 0) fail('is empty');
  if (argv.some((a) => a.includes('\0'))) fail('holds a NUL character');
  return argv;
}

/** argv as one line a user can read and paste (quoted where needed); for lists, never run. */
export function commandText(argv: readonly string[]): string {
  return argv.map((a) => (/^[A-Za-z0-9_./:=@%+,-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

export class HostCommandSecret {
  private current: { value: Secret<string>; at: number } | undefined;
  /** Every value this run held (scrubbing covers an earlier one a server may still echo). */
  private readonly seen: Secret<string>[] = [];
  private running: Promise<Secret<string>> | undefined;
  private readonly fetched = new Emitter<SecretFetchEvent>();
  /** Each run of the command, ok or not (for the run's audit and terminal). */
  readonly onDidFetch: Event<SecretFetchEvent> = this.fetched.event;

  constructor(
    readonly name: string,
    readonly argv: readonly string[],
    private readonly opts: HostCommandSecretOptions,
  ) {}

  /** The value held now, unless there is none yet or its life ran out. */
  held(): Secret<string> | undefined {
    const c = this.current;
    if (!c) return undefined;
    if (this.opts.ttlMs !== undefined && performance.now() - c.at >= this.opts.ttlMs) return undefined;
    return c.value;
  }

  /** Every value held so far, the current one included. */
  values(): readonly Secret<string>[] {
    return this.seen;
  }

  /** The held value, or the command's (run once however many requests wait for it). */
  get(): Promise<Secret<string>> {
    const held = this.held();
    if (held) return Promise.resolve(held);
    return this.run(this.current ? 'expired' : 'first use');
  }

  /**
   * A value to replace `stale` after a 401: the command runs again, unless another request already
   * replaced it (then that value is the answer: one 401 wave, one run).
   */
  refresh(stale: Secret<string>): Promise<Secret<string>> {
    const c = this.current;
    if (c && c.value !== stale && this.held()) return Promise.resolve(c.value);
    return this.run('401');
  }

  private run(trigger: FetchTrigger): Promise<Secret<string>> {
    this.running ??= (async () => {
      const started = performance.now();
      try {
        const value = new Secret(await this.execute());
        this.current = { value, at: performance.now() };
        if (!this.seen.some((s) => s.reveal() === value.reveal())) this.seen.push(value);
        this.fetched.fire({ secret: this.name, trigger, ok: true, durationMs: Math.round(performance.now() - started) });
        return value;
      } catch (err) {
        this.fetched.fire({ secret: this.name, trigger, ok: false, error: (err as Error).message, durationMs: Math.round(performance.now() - started) });
        throw err;
      } finally {
        this.running = undefined;
      }
    })();
    return this.running;
  }

  private async execute(): Promise<string> {
    const what = `the command of secret "${this.name}" (${this.argv[0]})`;
    const env = this.opts.env;
    const bin = await findTool(this.argv[0] as string, env).catch(() => undefined); // not found is the error thrown below
    if (!bin) throw new AirlockError('NOT_FOUND', `${what} was not found on this machine's PATH; fix it with \`airlock secrets set ${this.name} --command …\``);
    const timeoutMs = this.opts.timeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
    const out = await new Promise<Buffer>((resolve, reject) => {
      const child = spawn(bin, this.argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'], env: hostToolEnv(env), cwd: this.opts.cwd ?? hostToolCwd(), windowsHide: true, shell: false });
      const chunks: Buffer[] = [];
      let bytes = 0;
      let why: string | undefined;
      const stop = (reason: string) => {
        why ??= reason;
        child.kill('SIGKILL');
      };
      const timer = setTimeout(() => stop(`did not finish within ${Math.round(timeoutMs / 1000)} s`), timeoutMs);
      child.stdout.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes > MAX_OUTPUT_BYTES) stop(`printed more than ${MAX_OUTPUT_BYTES / 1024} KiB`);
        else chunks.push(c);
      });
      // Read and dropped: a credential tool's error output may hold the very token it was given.
      child.stderr.resume();
      child.once('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(new AirlockError('KEY_MISSING', `${what} could not start (${e.code ?? 'error'})`));
      });
      child.once('close', (code, signal) => {
        clearTimeout(timer);
        if (why) reject(new AirlockError('COMMAND_TIMEOUT', `${what} ${why}; it was stopped`));
        else if (code !== 0) reject(new AirlockError('KEY_MISSING', `${what} exited with ${code ?? signal}; its error output is not shown (it may hold a secret): run it yourself to see why`));
        else resolve(Buffer.concat(chunks));
      });
    });
    const value = out.toString('utf8').trim();
    if (value.length < 4 || value.length > 16_384 || /[\r\n\0]/.test(value)) {
      throw new AirlockError('INVALID_INPUT', `${what} did not print one line of 4 to 16384 characters (it printed ${value ? `${value.split(/\r?\n/).length} line(s)` : 'nothing'})`);
    }
    return value;
  }

  dispose(): void {
    this.fetched.dispose();
  }
}
