import type Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';
import type { SandboxSpec } from '../driver';
import { AIRLOCK_LOADER, AIRLOCK_NODE, AIRLOCK_NODE_ARGV } from '../../common/airlock-runtime';
import { PROCESS_OWNER } from '../../common/process-alive';
import { LABEL_INSTALLATION, LABEL_OWNER, LABEL_VOLUME, runLabels } from '../labels';
import type { EngineKind } from './engine-endpoint';
import { GVISOR_RUNTIME, gvisorHostPidsLimit } from './gvisor';
import { seccompSecurityOpt } from './seccomp-profile';

/** The unprivileged user every agent process runs as (the image's `airlock`). */
export const SANDBOX_USER = '1000:1000';
/**
 * The helper's user: root inside the container with only HELPER_CAPS, under no-new-privileges. It
 * starts each command as SANDBOX_USER through the spawn's own uid/gid (the kernel then clears every
 * capability set but the bounding one), so the agent cannot signal, ptrace or write the helper, nor
 * write /airlock (root's, 0755 in the image). Why the bounding set left is harmless: §2.3.
 */
export const HELPER_USER = '0:0';
/**
 * SETUID/SETGID: start commands as the agent; KILL: end their trees. Never DAC_READ_SEARCH (or any
 * capability that re-opens `open_by_handle_at`): the helper reads the agent's files as the agent or
 * as root without it (docs/architecture.md §2.3).
 */
export const HELPER_CAPS = ['SETUID', 'SETGID', 'KILL'] as const;
export const WORKSPACE_DIR = '/workspace';
/** Airlock's own state inside the sandbox (baseline git dir, logs), kept apart from the project copy. */
export const STATE_DIR = '/airlock';
export const HELPER_PATH = '/opt/airlock/helper.js';
/** The helper's own Node (the official build: ~3× faster to start than Debian's; see the Dockerfile). */
export const HELPER_NODE = AIRLOCK_NODE;
/** Airlock's copy of the dynamic loader, next to the C libraries its Node and node-pty were linked with. */
export const HELPER_LOADER = AIRLOCK_LOADER;
/**
 * Starts the helper from Airlock's files only: its Node by absolute path, loaded by Airlock's own
 * loader with Airlock's own libraries (never the image's /bin/sh, libc or /etc/ld.so.cache), with an
 * empty OpenSSL configuration (the default one is the image's file, and can name a module to load).
 * The environment is Airlock's too (`helperEnv`); /etc/ld.so.preload, which every glibc loader
 * reads, is refused at create (docs/architecture.md §2.3).
 */
export const HELPER_COMMAND = [...AIRLOCK_NODE_ARGV, HELPER_PATH];
/** The file every glibc loader reads before anything else, and loads what it names into the process. */
export const LOADER_PRELOAD_FILE = '/etc/ld.so.preload';
/** The helper's whole environment. */
export const HELPER_ENV: Readonly<Record<string, string>> = {
  AIRLOCK_AGENT_USER: SANDBOX_USER,
  HOME: '/home/airlock',
  LANG: 'C.UTF-8',
  PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
};

/**
 * The container's `Env`: Airlock's variables, and every other name the image sets (NODE_OPTIONS,
 * LD_PRELOAD, NODE_PATH…) taken away, since an engine starts a container with the image's ENV
 * merged under the given one. Docker removes a name given without `=`; Podman's compatible API
 * keeps the image's value for that, so there it is set empty (an empty LD_PRELOAD or NODE_OPTIONS
 * loads nothing). Commands get the project's environment from the host, never from this.
 */
export function helperEnv(imageEnv: readonly string[] = [], engine: EngineKind = 'docker'): string[] {
  const ours = Object.entries(HELPER_ENV).map(([k, v]) => `${k}=${v}`);
  const names = new Set(imageEnv.map((e) => e.split('=', 1)[0]!).filter((n) => n && !(n in HELPER_ENV)));
  return [...ours, ...[...names].map((n) => (engine === 'podman' ? `${n}=` : n))];
}

/**
 * Scratch space; sized so a runaway writer fills its tmpfs, not the host's memory. The home belongs to
 * the sandbox user: Docker says so with uid=/gid=, Podman (which refuses those) with `U` (chown to the
 * container's user). `/tmp` is `exec` (engines default tmpfs to noexec): test runners build and run
 * binaries there (`go test`), and noexec would add nothing, since the agent can write and run files
 * in /workspace anyway (docs/architecture.md §16).
 */
function tmpfs(engine: EngineKind): Record<string, string> {
  // Podman 4 refuses uid=, and its `U` would give the home to the container's user (root, the
  // helper): a sticky world-writable home instead, which only the agent's user writes to. Podman
  // takes the mode of the image's directory over this one (Airlock's image makes it 1777).
  const owner = engine === 'podman' ? 'mode=1777' : 'uid=1000,gid=1000,mode=0755';
  return {
    '/tmp': 'rw,exec,nosuid,nodev,size=1g,mode=1777',
    '/home/airlock': `rw,nosuid,nodev,size=512m,${owner}`,
  };
}

/**
 * Podman: once a container names any ulimit, rootful Podman raises open files and processes to
 * 1048576/4194304 itself, and the container fails to start on hosts whose hard limits are lower.
 * Stated bounds (plenty for builds; the pids cgroup is the real process limit) always start.
 */
export const PODMAN_ULIMITS = [
  { Name: 'nofile', Soft: 8192, Hard: 8192 },
  { Name: 'nproc', Soft: 32768, Hard: 32768 },
];

/**
 * Core dumps of a crashing agent could hold prompt text: keep none. Under gVisor RLIMIT_NPROC is the
 * agent's process limit (the Sentry's kernel counts uid 1000's tasks in this sandbox only; under runc
 * it would count the host's uid 1000 everywhere, so runc keeps the pids cgroup alone).
 */
function ulimits(engine: EngineKind, gvisor: boolean, pids: number): { Name: string; Soft: number; Hard: number }[] {
  const nproc = gvisor ? [{ Name: 'nproc', Soft: pids, Hard: pids }] : [];
  const podman = engine === 'podman' ? PODMAN_ULIMITS.filter((u) => !(gvisor && u.Name === 'nproc')) : [];
  return [{ Name: 'core', Soft: 0, Hard: 0 }, ...podman, ...nproc];
}

/** How the engine and runtime differ for one sandbox: gVisor's `runsc`, Podman's dialect. */
export interface ContainerConfigOptions {
  /** OCI runtime (`runsc` under gVisor); the engine's default (runc) when absent. */
  runtime?: string;
  /** The engine the config is for (default docker). */
  engine?: EngineKind;
  /** This installation's id, labelled on the container and its volumes (the reaper's test on shared engines). */
  installation?: string;
  /** The image's own `Config.Env`: its names are taken out of the helper's environment (`helperEnv`). */
  imageEnv?: readonly string[];
}

export function containerName(runId: string): string {
  return `airlock-${runId}`;
}

export function volumeNames(runId: string): { workspace: string; state: string } {
  return { workspace: `airlock-${runId}-workspace`, state: `airlock-${runId}-state` };
}

function validateLimits(spec: SandboxSpec): void {
  const { memoryBytes, cpus, pids } = spec.limits;
  if (!(memoryBytes >= 64 * 1024 ** 2)) throw new AirlockError('INVALID_INPUT', `memory limit ${memoryBytes} bytes is too small; use at least 64 MiB`);
  if (!(cpus > 0)) throw new AirlockError('INVALID_INPUT', `cpu limit ${cpus} must be a positive number of CPUs`);
  if (!(Number.isInteger(pids) && pids >= 32)) throw new AirlockError('INVALID_INPUT', `pids limit ${pids} must be an integer of at least 32`);
}

/** This process (`<hostname>:<pid>`) and installation as the owner of what a sandbox creates. */
function ownerLabels(installation?: string): Record<string, string> {
  return { [LABEL_OWNER]: PROCESS_OWNER, ...(installation ? { [LABEL_INSTALLATION]: installation } : {}) };
}

/**
 * The run's two volumes with their labels (run, kind, which, owner). Docker labels them from the
 * mount's VolumeOptions when it creates them with the container; Podman ignores those, so the driver
 * creates them first through the volume API (an unlabelled volume would escape the wipe's check).
 */
export function sandboxVolumes(runId: string, installation?: string): Array<{ Name: string; Labels: Record<string, string>; target: string }> {
  const names = volumeNames(runId);
  // The owner on volumes too: another Airlock's reaper must not take a volume whose container is on its way.
  const labels = (which: string): Record<string, string> => ({ ...runLabels(runId, 'volume'), [LABEL_VOLUME]: which, ...ownerLabels(installation) });
  return [
    { Name: names.workspace, Labels: labels('workspace'), target: WORKSPACE_DIR },
    { Name: names.state, Labels: labels('state'), target: STATE_DIR },
  ];
}

/**
 * The hardened container of docs/architecture.md §2.3: agent non-root with no capabilities, the helper
 * root with HELPER_CAPS only, no-new-privileges, Airlock's seccomp profile, the helper started from
 * Airlock's files and environment only, read-only root with tmpfs scratch, resource limits, no host namespaces, no bind mounts,
 * no network unless the spec asks for `open`. Everything it creates carries the run's labels.
 */
export function hardenedContainerConfig(spec: SandboxSpec, opts: ContainerConfigOptions = {}): Docker.ContainerCreateOptions {
  validateLimits(spec);
  const owner = ownerLabels(opts.installation);
  const gvisor = opts.runtime === GVISOR_RUNTIME;
  return {
    name: containerName(spec.runId),
    Image: spec.image,
    // The helper is the container's own process (under the init), its stdin/stdout attached before
    // start: the channel needs no exec. It exits when the host closes the channel, and so does the
    // container; the driver opens later channels (if any) as execs while it runs.
    Cmd: HELPER_COMMAND,
    Entrypoint: [],
    User: HELPER_USER,
    WorkingDir: WORKSPACE_DIR,
    Env: helperEnv(opts.imageEnv, opts.engine ?? 'docker'),
    Labels: { ...(spec.labels ?? {}), ...owner, ...runLabels(spec.runId, 'sandbox') },
    NetworkDisabled: false,
    Tty: false,
    OpenStdin: true,
    StdinOnce: true,
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    HostConfig: {
      // `runsc` for --isolation gvisor: the same hardening, under gVisor's user-space kernel (§2.3).
      ...(opts.runtime ? { Runtime: opts.runtime } : {}),
      Init: true,
      Privileged: false,
      CapDrop: ['ALL'],
      CapAdd: [...HELPER_CAPS],
      // Under gVisor the profile is not enforced (runsc leaves OCI seccomp to its own flag): the
      // agent's calls reach gVisor's kernel, never the host's. It is passed anyway, so the config is one.
      SecurityOpt: ['no-new-privileges', seccompSecurityOpt(HELPER_CAPS)],
      ReadonlyRootfs: true,
      Tmpfs: tmpfs(opts.engine ?? 'docker'),
      Mounts: sandboxVolumes(spec.runId, opts.installation).map((v) => ({ Type: 'volume' as const, Source: v.Name, Target: v.target, VolumeOptions: { NoCopy: false, Labels: v.Labels, DriverConfig: { Name: 'local', Options: {} } } })),
      Binds: [],
      Memory: spec.limits.memoryBytes,
      // Same as Memory: no swap on top of the limit, so a memory bomb meets the OOM killer.
      MemorySwap: spec.limits.memoryBytes,
      NanoCpus: Math.round(spec.limits.cpus * 1e9),
      // Under gVisor the host cgroup bounds the Sentry; the agent's processes are bounded by nproc below.
      PidsLimit: gvisor ? gvisorHostPidsLimit(spec.limits.pids) : spec.limits.pids,
      // A compose run's sandbox joins its internal sidecar network (no route out) instead of none.
      NetworkMode: spec.network === 'open' ? 'bridge' : (spec.joinNetwork ?? 'none'),
      ...(spec.joinNetwork && spec.extraHosts?.length ? { ExtraHosts: spec.extraHosts } : {}),
      ...(spec.joinNetwork && spec.dns ? { Dns: spec.dns.servers, DnsOptions: spec.dns.options, DnsSearch: spec.dns.search } : {}),
      IpcMode: 'private',
      PidMode: '',
      UTSMode: '',
      UsernsMode: '',
      Ulimits: ulimits(opts.engine ?? 'docker', gvisor, spec.limits.pids),
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
      LogConfig: { Type: 'none', Config: {} },
    },
  };
}
