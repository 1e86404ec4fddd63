/**
 * Who the agent is, seen from the helper. In Airlock's own sandboxes the helper runs as root with
 * only the capabilities it needs (SETUID, SETGID, KILL; docs/architecture.md §2.3)
 * and starts every command as the agent's user through the spawn's own uid/gid (no extra exec per
 * command): the agent then cannot signal, ptrace or write the helper, nor write /airlock. Where the
 * helper itself is started as an unprivileged user (no driver of Airlock starts it so today), there is no split
 * and commands run as the helper's user, as before.
 */
import { readFileSync } from 'node:fs';

export interface AgentIdentity {
  uid: number;
  gid: number;
}

/**
 * The agent's user as AIRLOCK_AGENT_USER=<uid>:<gid> says (the container config and the VM's guest init
 * set it). Without it there is no split: a root helper then runs commands as root, which the host
 * refuses for a sandbox (hello's agentUid; core/sandbox/sandbox.ts). Root as the agent is refused here.
 */
function fromEnv(): AgentIdentity | null {
  const raw = process.env.AIRLOCK_AGENT_USER;
  if (raw === undefined) return null;
  const m = /^(\d{1,9}):(\d{1,9})$/.exec(raw);
  const uid = m ? Number(m[1]) : 0;
  const gid = m ? Number(m[2]) : 0;
  if (uid === 0 || gid === 0) {
    process.stderr.write(`airlock-helper: AIRLOCK_AGENT_USER=${JSON.stringify(raw.slice(0, 40))} is not <uid>:<gid> of a non-root user; using 1000:1000\n`);
    return { uid: 1000, gid: 1000 };
  }
  return { uid, gid };
}

let agent: AgentIdentity | null | undefined;

/** The identity commands and file operations take, or null when the helper is not root (no split). */
export function agentIdentity(): AgentIdentity | null {
  if (agent !== undefined) return agent;
  agent = typeof process.getuid === 'function' && process.getuid() === 0 ? fromEnv() : null;
  return agent;
}

/**
 * Once at start: no supplementary groups (root's group would otherwise follow node-pty's children,
 * which call setgid/setuid but not setgroups), and the helper's own environment variable is removed
 * from process.env so nothing copies it on.
 */
export function initIdentity(): void {
  const id = agentIdentity();
  delete process.env.AIRLOCK_AGENT_USER;
  if (!id || typeof process.setgroups !== 'function') return;
  process.setgroups([]);
}

/** The uid commands run as (the helper's own uid when there is no split). */
export function commandUid(): number {
  return agentIdentity()?.uid ?? (typeof process.getuid === 'function' ? process.getuid() : -1);
}

/**
 * Runs `fn` (synchronous: nothing else of the helper runs meanwhile) with the agent's effective
 * uid/gid, so that a path the host names is opened with the agent's rights, never the helper's:
 * a symlink the agent planted cannot make the helper write /airlock or read what the agent cannot.
 * The fd it returns keeps working after the switch back.
 */
export function asAgent<T>(fn: () => T): T {
  const id = agentIdentity();
  if (!id || !process.seteuid || !process.setegid) return fn();
  process.setegid(id.gid);
  process.seteuid(id.uid);
  try {
    return fn();
  } finally {
    restore();
  }
}

function restore(): void {
  try {
    process.seteuid!(0);
    process.setegid!(0);
  } catch (err) {
    // Unreachable with a real uid of 0; if it ever happens the helper must not go on half-switched.
    process.stderr.write(`airlock-helper: could not switch back from the agent's user: ${(err as Error).message}\n`);
    process.exit(70);
  }
}

let agentHome: string | undefined;

/** The agent's home from /etc/passwd (read once; small), else /home/airlock. */
export function agentHomeDir(): string {
  if (agentHome !== undefined) return agentHome;
  agentHome = '/home/airlock';
  const id = agentIdentity();
  if (!id) return agentHome;
  try {
    for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const f = line.split(':');
      if (f.length >= 7 && Number(f[2]) === id.uid && f[5]) {
        agentHome = f[5];
        break;
      }
    }
  } catch {
    // No passwd: keep the default.
  }
  return agentHome;
}
