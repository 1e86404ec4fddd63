import { open, readdir, readFile } from 'node:fs/promises';
import { runTool } from '../../common/run-tool';
import { isProcessAlive } from '../../common/process-alive';

/** Reads a QEMU pidfile; undefined when absent or garbled. */
export async function readPidfile(file: string): Promise<number | undefined> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const pid = Number.parseInt(text.trim(), 10);
  return Number.isInteger(pid) && pid > 1 ? pid : undefined;
}

/** Whether a process exists. */
export const isAlive = isProcessAlive;

/** The command line of a process, or undefined when it is gone. `env`: the host's environment (`ps` off Linux runs with it). */
export async function commandLineOf(pid: number, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  if (process.platform === 'linux') {
    const raw = await readFile(`/proc/${pid}/cmdline`).catch(() => undefined); // the process may be gone
    if (!raw || raw.length === 0) return undefined;
    return raw.toString('utf8').replaceAll('\0', ' ');
  }
  const r = await runTool('ps', ['-o', 'command=', '-p', String(pid)], { timeoutMs: 5000, env }).catch(() => undefined); // no ps or the process gone: unknown
  const out = r?.code === 0 ? r.stdout.toString('utf8').trim() : '';
  return out || undefined;
}

/**
 * Whether `pid` is a QEMU process of the run whose directory is `runDir` (its command line names
 * files in it). Guards every kill against a recycled pid.
 */
export async function isRunQemu(pid: number, runDir: string, env: NodeJS.ProcessEnv): Promise<boolean> {
  const cmd = await commandLineOf(pid, env);
  return cmd !== undefined && cmd.includes('qemu') && cmd.includes(`${runDir}/`);
}

/** Every process whose command line mentions `needle` (Linux: /proc; elsewhere: ps). */
export async function processesMentioning(needle: string, env: NodeJS.ProcessEnv): Promise<number[]> {
  const found: number[] = [];
  if (process.platform === 'linux') {
    const entries = await readdir('/proc').catch(() => [] as string[]);
    await Promise.all(
      entries
        .filter((e) => /^\d+$/.test(e) && Number(e) !== process.pid)
        .map(async (e) => {
          // Read only the start: the run directory appears early in QEMU's arguments.
          const fh = await open(`/proc/${e}/cmdline`, 'r').catch(() => undefined); // the process may be gone
          if (!fh) return;
          try {
            const buf = Buffer.alloc(8192);
            const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
            if (buf.subarray(0, bytesRead).toString('utf8').replaceAll('\0', ' ').includes(needle)) found.push(Number(e));
          } catch {
            // Gone meanwhile.
          } finally {
            await fh.close();
          }
        }),
    );
    return found;
  }
  const r = await runTool('ps', ['-axo', 'pid=,command='], { timeoutMs: 10_000, env });
  for (const line of r.stdout.toString('utf8').split('\n')) {
    const m = /^\s*(\d+)\s+(.*)$/.exec(line);
    if (m && m[2]?.includes(needle) && Number(m[1]) !== process.pid) found.push(Number(m[1]));
  }
  return found;
}

/** Waits until `pid` no longer exists; false after `timeoutMs`. */
export async function waitGone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return true;
}
