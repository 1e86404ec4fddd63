import { AirlockError } from '../../../contracts/errors';
import type { EngineIdentity } from './engine-endpoint';

/**
 * Whether the engine applies a sandbox's memory, CPU and process limits (docs/architecture.md §2.3,
 * "Limits the engine must apply"). Rootless engines on a cgroup v1 host cannot: Podman accepts the
 * limits, warns on its own command line only, and runs the container without them; its compatible
 * `/info` still claims support. A fork bomb or a memory bomb would then reach the host.
 */
export interface EngineLimitSupport {
  enforced: boolean;
  /** The limits the engine says (or is known) not to apply. */
  missing: LimitKind[];
  /** `1` or `2` when the engine says. */
  cgroupVersion?: string;
}

export type LimitKind = 'memory' | 'pids' | 'cpu';

/** The parts of Docker's `GET /info` read here (Podman's compatible one has the same names). */
export interface EngineInfoLimits {
  CgroupVersion?: string;
  MemoryLimit?: boolean;
  PidsLimit?: boolean;
  CpuCfsQuota?: boolean;
}

/** The part of Podman's own `GET /libpod/info` read here: the cgroup controllers its containers get. */
export interface LibpodHostInfo {
  cgroupVersion?: string;
  cgroupControllers?: string[];
  security?: { rootless?: boolean };
}

const CONTROLLER: Record<LimitKind, string> = { memory: 'memory', pids: 'pids', cpu: 'cpu' };

/**
 * Reads what the engine can limit. A field the engine leaves out is not counted against it; one it
 * reports as unsupported is, and so is every limit for a rootless engine on cgroup v1. For Podman the
 * controllers delegated to its containers (libpod info) decide, since its compatible answer does not.
 */
export function limitSupportFrom(info: EngineInfoLimits, rootless: boolean, libpod?: LibpodHostInfo): EngineLimitSupport {
  const cgroupVersion = (libpod?.cgroupVersion ?? info.CgroupVersion)?.replace(/^v/, '');
  const all: LimitKind[] = ['memory', 'pids', 'cpu'];
  let missing: LimitKind[];
  if (rootless && cgroupVersion === '1') missing = all;
  else if (libpod?.cgroupControllers) missing = all.filter((k) => !libpod.cgroupControllers!.includes(CONTROLLER[k]));
  else missing = all.filter((k) => ({ memory: info.MemoryLimit, pids: info.PidsLimit, cpu: info.CpuCfsQuota })[k] === false);
  return { enforced: missing.length === 0, missing, ...(cgroupVersion ? { cgroupVersion } : {}) };
}

/**
 * Refuses a sandbox on an engine that would run it without its limits (ENGINE_LIMITS_UNSUPPORTED,
 * with what to use instead): the safer default; there is no option to run unlimited.
 */
export function assertLimitsEnforced(identity: EngineIdentity): void {
  const { limits } = identity;
  if (limits.enforced) return;
  const who = `${identity.rootless ? 'rootless ' : ''}${identity.kind === 'podman' ? 'Podman' : 'Docker'}`;
  const why = identity.rootless && limits.cgroupVersion === '1'
    ? `${who} cannot apply cgroup limits on a cgroup v1 host`
    : `${who} does not apply the ${limits.missing.join(', ')} limit${limits.missing.length > 1 ? 's' : ''} here (no ${limits.missing.join('/')} cgroup controller for its containers)`;
  throw new AirlockError(
    'ENGINE_LIMITS_UNSUPPORTED',
    `${why}, so a sandbox would run without its memory, CPU and process limits and a runaway agent could exhaust this machine. Airlock does not start sandboxes there. ` +
      `Use rootful Podman (sudo podman system service, then point CONTAINER_HOST or the engine setting at unix:///run/podman/podman.sock) or Docker, ` +
      `or switch the host to cgroup v2 with the controllers delegated to your user (systemd.unified_cgroup_hierarchy=1; Delegate=memory pids cpu).`,
  );
}
