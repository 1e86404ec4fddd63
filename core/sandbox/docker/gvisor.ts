import { AirlockError } from '../../../contracts/errors';
import type { EngineIdentity } from './engine-endpoint';

/** The OCI runtime name `--isolation gvisor` asks the engine for. */
export const GVISOR_RUNTIME = 'runsc';

/**
 * Under gVisor the agent's processes are the Sentry's own tasks, and the host pids cgroup counts the
 * Sentry's, the gofer's and (ptrace platform) the stub threads it makes for each agent process (~50
 * idle, ~8 per idle agent process, more for busy ones and never handed back while the sandbox lives).
 * When that cgroup is full the Sentry dies (a Go runtime fatal, exit 2): it cannot answer EAGAIN. So
 * the agent's own limit is RLIMIT_NPROC (`nproc` = the pids limit), which gVisor's kernel enforces
 * per sandbox, and the host cgroup gets room for the Sentry's threads on top (docs/architecture.md §2.3).
 */
export const GVISOR_PIDS_HEADROOM = 512;

/** Host threads allowed per agent process (a fork bomb held at 128 processes for 8 s peaked at ~20). */
export const GVISOR_THREADS_PER_PROCESS = 32;

/** Upper bound of the host pids limit: one sandbox never gets more than a quarter of a 32768 pid_max. */
export const GVISOR_HOST_PIDS_CAP = 8192;

/** The host pids cgroup limit for a gVisor sandbox whose agent may run `pids` processes. */
export function gvisorHostPidsLimit(pids: number): number {
  const wanted = Math.min(pids * GVISOR_THREADS_PER_PROCESS + GVISOR_PIDS_HEADROOM, GVISOR_HOST_PIDS_CAP);
  return Math.max(pids + GVISOR_PIDS_HEADROOM, wanted);
}

/**
 * The engine configuration that registers gVisor. `--network=none`: Airlock's sandboxes have no
 * network anyway (the channel carries everything, docs/architecture.md §4), and without it runsc
 * refuses to start in the engine's root network namespace on some hosts.
 */
export const GVISOR_DAEMON_JSON = '{ "runtimes": { "runsc": { "path": "/usr/bin/runsc", "runtimeArgs": ["--network=none"] } } }';

/** What to do when the engine has no `runsc`: install it, register it, reload the engine. */
export function gvisorFix(kind: EngineIdentity['kind']): string {
  if (kind === 'podman') {
    return 'Install gVisor (apt-get install runsc, or gvisor.dev) and make sure Podman lists runsc among its OCI runtimes (`podman info --format "{{.Host.OCIRuntime}}"`; [engine.runtimes] in containers.conf), or use Docker for --isolation gvisor.';
  }
  return `Install gVisor (apt-get install runsc, or the release from gvisor.dev), add ${GVISOR_DAEMON_JSON} to /etc/docker/daemon.json (merge with what is there), then reload the engine: sudo kill -HUP $(pidof dockerd) (or sudo systemctl restart docker). Check with \`docker info --format '{{json .Runtimes}}'\`.`;
}

/** Throws GVISOR_UNAVAILABLE (with the fix) unless the engine has the runsc runtime: never a silent runc. */
export function assertGvisorRegistered(identity: EngineIdentity): void {
  if (identity.runtimes.includes(GVISOR_RUNTIME)) return;
  const known = identity.runtimes.length ? identity.runtimes.join(', ') : 'none listed';
  throw new AirlockError('GVISOR_UNAVAILABLE', `gVisor isolation needs the '${GVISOR_RUNTIME}' runtime, which the ${identity.kind === 'podman' ? 'Podman' : 'Docker'} engine does not have (its runtimes: ${known}). ${gvisorFix(identity.kind)}`);
}
