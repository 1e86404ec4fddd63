import os from 'node:os';

/** Whether a process exists (EPERM: it does, but belongs to another user). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** `<hostname>:<pid>` of this process: the owner Airlock records on the runs, sandboxes and VMs it makes. */
export const PROCESS_OWNER = `${os.hostname()}:${process.pid}`;

/**
 * What a recorded owner says about its process: this one, another one on this host that is still
 * running, gone (or never recorded), or on another host (a shared home or engine: cannot tell).
 */
export function ownerStatus(owner: string | undefined): 'self' | 'running' | 'gone' | 'elsewhere' {
  if (!owner) return 'gone';
  const [host, pidText] = owner.split(':');
  if (host !== os.hostname()) return 'elsewhere';
  const pid = Number(pidText);
  if (pid === process.pid) return 'self';
  return pid && isProcessAlive(pid) ? 'running' : 'gone';
}
