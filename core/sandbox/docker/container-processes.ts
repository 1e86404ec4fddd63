import type Docker from 'dockerode';
import type { EngineKind } from './engine-endpoint';

/**
 * The host identity (uid, or user name as the host's passwd says) of every process in a container,
 * as the engine sees them from the host: Docker's `top` runs the host's `ps` over the container's
 * cgroup, Podman's reads the container's pid namespace from the host. Nothing here is read from inside
 * the sandbox, so a process cannot hide or rename itself out of it (its command name can change; its
 * uid cannot). docs/architecture.md §16, "Setup ends completely".
 *
 * Not for gVisor: its processes live in the Sentry's own kernel, and the engine's `top` matches the
 * runtime's sandbox-internal pids against the host's process table (answers about unrelated host
 * processes). The caller gets `undefined` there and relies on the sandbox's pid namespace instead.
 */
export async function containerProcessOwners(docker: Docker, containerId: string, engine: EngineKind): Promise<string[]> {
  // Docker: `ps -o` with a numeric uid (the host's). Podman: its own descriptors; `huser` is the host's user.
  const args = engine === 'podman' ? 'pid,huser' : '-o pid,uid';
  const top = (await docker.getContainer(containerId).top({ ps_args: args })) as { Titles?: string[]; Processes?: string[][] };
  const titles = top.Titles ?? [];
  const col = titles.findIndex((t) => /^(UID|HUSER)$/.test(t.trim()));
  if (col < 0 || !Array.isArray(top.Processes)) throw new Error(`the engine's process list has no host user column (titles: ${titles.join(', ').slice(0, 200)})`);
  return top.Processes.map((p) => String(p[col] ?? '').trim());
}
