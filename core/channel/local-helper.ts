/**
 * Runs the helper bundle as a local child process with stdio as the channel — for tests, benchmarks
 * and drivers whose "sandbox" is reached through a plain process (e.g. `limactl shell … node helper.js`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChannelStream } from '../sandbox/driver';
import { loadHelperBundle } from './helper-bundle';

export interface LocalHelper {
  stream: ChannelStream;
  child: ChildProcess;
  /** Everything the helper wrote to stderr so far. */
  stderr(): string;
  /** Kills the helper and removes its bundle directory. */
  dispose(): Promise<void>;
}

/** Starts `node helper.js` locally; `env` is the helper's own environment (never seen by its commands). */
export async function startLocalHelper(opts: { env: NodeJS.ProcessEnv; node?: string }): Promise<LocalHelper> {
  const bundle = await loadHelperBundle();
  const dir = await mkdtemp(join(tmpdir(), 'airlock-helper-'));
  for (const [name, data] of Object.entries(bundle.files)) await writeFile(join(dir, name), data);
  const child = spawn(opts.node ?? process.execPath, [join(dir, 'helper.js')], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: opts.env,
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (text: string) => {
    if (stderr.length < 64 * 1024) stderr += text;
  });
  child.stdin!.on('error', () => undefined); // EPIPE once the helper is gone; the client sees the close.
  const stream: ChannelStream = {
    readable: child.stdout!,
    writable: child.stdin!,
    close: () => {
      // EOF makes the helper stop its commands and exit; a stuck one is killed after a grace.
      child.stdin!.end();
      setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }, 3000).unref();
    },
  };
  return {
    stream,
    child,
    stderr: () => stderr,
    async dispose() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
