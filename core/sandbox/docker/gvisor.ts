import { AirlockError } from '../../../contracts/errors';
import type { EngineIdentity } from './engine-endpoint';

/** The OCI runtime name `--isolation gvisor` asks the engine for. */
export const GVISOR_RUNTIME = 'runsc';

/**
 * Under gVisor the sandbox's pids cgroup counts the Sentry's and the gofer's host threads (~90 when
 * idle), not the agent's processes, which are the Sentry's own tasks. Without headroom a busy sandbox
 * at a small limit loses its Sentry (a Go runtime fatal, exit 2). The agent's process count is then
 * bounded by the memory limit: a fork bomb ends the sandbox (docs/architecture.md §2.3).
 */
export const GVISOR_PIDS_HEADROOM = 512;

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
