import type Docker from 'dockerode';
import { AirlockError } from '../../contracts/errors';
import { PROCESS_OWNER } from '../common/process-alive';
import { PODMAN_ULIMITS } from '../sandbox/docker/container-config';
import { statusCodeOf } from '../sandbox/docker/engine';
import type { EngineKind } from '../sandbox/docker/engine-endpoint';
import { GVISOR_RUNTIME } from '../sandbox/docker/gvisor';
import type { Isolation } from '../../contracts/runs';
import { LABEL_INSTALLATION, LABEL_KIND, LABEL_OWNER, LABEL_RUN, runLabels } from '../sandbox/labels';
import type { ComposeService } from './compose-file';
import { createContainerWithProfile, seccompSecurityOpt } from '../sandbox/docker/seccomp-profile';
import { dnsHostConfig, sidecarDns, type SidecarDns } from './sidecar-dns';
import { debugLog } from '../common/debug-log';

/**
 * Compose sidecars (docs/architecture.md §16): the devcontainer's other services (a database, a
 * cache) run as hardened containers on a per-run internal network that has no route out, reachable
 * from the agent's sandbox by service name, labelled with the run so the run's wipe removes them and
 * the network and checks they are gone.
 */

/** Marks a sidecar container (its service name). */
export const LABEL_SIDECAR = 'airlock.sidecar';

/**
 * What a sidecar whose process starts as root keeps: what a database entrypoint needs to own its
 * data folder and drop to its own user (chown, read and fix modes, setuid/setgid). Nothing that
 * touches the network, the kernel or other processes; a non-root sidecar keeps none.
 */
export const ROOT_SIDECAR_CAPS = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'SETUID', 'SETGID'];

/** Each sidecar's limits: a development database or cache, not a production one. */
export const SIDECAR_LIMITS = { memoryBytes: 1024 ** 3, cpus: 1, pids: 256 };

/** How long a sidecar may take to become ready when its healthcheck says nothing about it. */
const DEFAULT_READY_MS = 120_000;

/** A sidecar service with the image it runs (built or pulled through the engine connection). */
export interface SidecarImage {
  service: ComposeService;
  /** The image reference the engine knows. */
  image: string;
  /** The image's own user and VOLUME paths (the latter become tmpfs: data goes with the run). */
  imageUser?: string;
  imageVolumes: string[];
}

export interface SidecarOptions {
  /** `runsc` when the run is under gVisor: sidecars get the run's isolation too. */
  runtime?: string;
  installation?: string;
  /**
   * The engine the run is on. Podman's internal networks have no name service (its CNI backend
   * turns DNS off there) and its healthchecks run from systemd timers this host may not have, so on
   * Podman each sidecar gets a fixed address, every name is written into /etc/hosts by the engine
   * (ExtraHosts) and Airlock runs the healthchecks itself (docs/architecture.md §16).
   */
  engine?: EngineKind;
}

/** The run's network as created: its name, and on Podman each sidecar's fixed address. */
export interface SidecarNetwork {
  name: string;
  /** Service name → IPv4 address on the run's network (Podman only; Docker's resolver answers names). */
  addresses?: Record<string, string>;
  /** `name:address` entries for the sandbox's and sidecars' /etc/hosts (Podman only). */
  extraHosts?: string[];
  /** Docker: the embedded resolver's only upstream, an address nobody holds (sidecar-dns.ts). */
  dns?: SidecarDns;
}

export function sidecarNetworkName(runId: string): string {
  return `airlock-${runId}-net`;
}

export function sidecarContainerName(runId: string, service: string): string {
  return `airlock-${runId}-svc-${service}`;
}

function ownerLabels(installation?: string): Record<string, string> {
  return { [LABEL_OWNER]: PROCESS_OWNER, ...(installation ? { [LABEL_INSTALLATION]: installation } : {}) };
}

/** Whether a user string means uid 0 (empty: the image's default, which is root unless it says otherwise). */
function isRoot(user: string | undefined): boolean {
  const u = (user ?? '').split(':')[0]?.trim() ?? '';
  return u === '' || u === 'root' || u === '0';
}

/**
 * The per-run network: `Internal` (the engine adds no route out and forwards nothing off it), and no
 * address of the host on its bridge (`inhibit_ipv4`), so the gateway a container sees is held by
 * nobody and services listening on the host are not reachable either.
 */
export function sidecarNetworkConfig(runId: string, o: SidecarOptions = {}): Docker.NetworkCreateOptions {
  return {
    Name: sidecarNetworkName(runId),
    Driver: 'bridge',
    Internal: true,
    CheckDuplicate: true,
    Attachable: false,
    EnableIPv6: false,
    // Podman has no such options (it warns): its internal bridge holds no host address by itself, checked after creation.
    Options: o.engine === 'podman' ? {} : { 'com.docker.network.bridge.inhibit_ipv4': 'true', 'com.docker.network.bridge.enable_ip_masquerade': 'false' },
    Labels: { ...runLabels(runId, 'network'), ...ownerLabels(o.installation) },
  };
}

/**
 * A sidecar's hardened container: all capabilities dropped (a root entrypoint keeps
 * ROOT_SIDECAR_CAPS), no-new-privileges, read-only root with tmpfs at /tmp, the image's VOLUME paths
 * and the service's `tmpfs` (unless the file says `read_only: false`), limits, no host mounts or
 * ports, only the run's network, its service name as its address there.
 */
export function sidecarContainerConfig(runId: string, s: SidecarImage, o: SidecarOptions = {}, network: SidecarNetwork = { name: sidecarNetworkName(runId) }): Docker.ContainerCreateOptions {
  const svc = s.service;
  const user = svc.user ?? s.imageUser;
  const tmpfs: Record<string, string> = { '/tmp': 'rw,nosuid,nodev,size=256m,mode=1777' };
  for (const p of [...s.imageVolumes, ...svc.tmpfs]) tmpfs[p] = 'rw,nosuid,nodev,size=512m,mode=1777';
  const net = network.name;
  const hc = svc.healthcheck;
  const address = network.addresses?.[svc.name];
  return {
    name: sidecarContainerName(runId, svc.name),
    Image: s.image,
    ...(svc.command ? { Cmd: svc.command } : {}),
    ...(svc.entrypoint ? { Entrypoint: svc.entrypoint } : {}),
    ...(svc.user ? { User: svc.user } : {}),
    ...(svc.workingDir ? { WorkingDir: svc.workingDir } : {}),
    Env: Object.entries(svc.environment).map(([k, v]) => `${k}=${v}`),
    Hostname: svc.name,
    Labels: { ...ownerLabels(o.installation), ...runLabels(runId, 'sidecar'), [LABEL_SIDECAR]: svc.name },
    ...(hc
      ? { Healthcheck: { Test: hc.test, Interval: hc.intervalMs * 1e6, Timeout: hc.timeoutMs * 1e6, Retries: hc.retries, StartPeriod: hc.startPeriodMs * 1e6 } }
      : {}),
    HostConfig: {
      ...(o.runtime ? { Runtime: o.runtime } : {}),
      Init: true,
      Privileged: false,
      CapDrop: ['ALL'],
      CapAdd: isRoot(user) ? ROOT_SIDECAR_CAPS : [],
      // Airlock's seccomp profile, as for the sandbox (docs/architecture.md §2.3).
      SecurityOpt: ['no-new-privileges', seccompSecurityOpt(isRoot(user) ? ROOT_SIDECAR_CAPS : [])],
      ReadonlyRootfs: !svc.writableRoot,
      Tmpfs: tmpfs,
      Binds: [],
      Mounts: [],
      PortBindings: {},
      PublishAllPorts: false,
      ...(network.extraHosts?.length ? { ExtraHosts: network.extraHosts } : {}),
      ...dnsHostConfig(network.dns),
      Memory: SIDECAR_LIMITS.memoryBytes,
      MemorySwap: SIDECAR_LIMITS.memoryBytes,
      NanoCpus: SIDECAR_LIMITS.cpus * 1e9,
      PidsLimit: SIDECAR_LIMITS.pids,
      NetworkMode: net,
      IpcMode: 'private',
      // Podman raises open files and processes past this host's hard limits once any ulimit is named: stated bounds.
      Ulimits: [{ Name: 'core', Soft: 0, Hard: 0 }, ...(o.engine === 'podman' ? PODMAN_ULIMITS : [])],
      RestartPolicy: { Name: 'no' },
      AutoRemove: false,
      // Kept small: the tail explains a sidecar that does not come up.
      LogConfig: { Type: 'json-file', Config: { 'max-size': '1m', 'max-file': '1' } },
    },
    NetworkingConfig: { EndpointsConfig: { [net]: { Aliases: [svc.name], ...(address ? { IPAMConfig: { IPv4Address: address } } : {}) } } },
  };
}

/** The image's own user and VOLUME paths, as the sidecar's config needs them. */
export async function sidecarImage(docker: Docker, service: ComposeService, image: string): Promise<SidecarImage> {
  const info = await docker.getImage(image).inspect();
  const volumes = Object.keys(info.Config?.Volumes ?? {}).filter((p) => p.startsWith('/'));
  return { service, image, imageVolumes: volumes, ...(info.Config?.User ? { imageUser: info.Config.User } : {}) };
}

/**
 * Creates the run's internal network (before the sandbox, which joins it). On Podman the network
 * must come out as Docker's does — internal, no address of the host on its bridge — or it is removed
 * again and the run refused before any container exists; each sidecar then gets a fixed address from
 * the top of the subnet (the engine hands out the bottom ones), named in `extraHosts`.
 */
export async function createSidecarNetwork(docker: Docker, runId: string, services: string[], o: SidecarOptions = {}): Promise<SidecarNetwork> {
  const net = await docker.createNetwork(sidecarNetworkConfig(runId, o));
  const name = sidecarNetworkName(runId);
  try {
    const info = await net.inspect();
    // Docker: outside names may not be forwarded anywhere (CVE-2024-29018 before 26.0.0). Podman's internal networks have no name service.
    if (o.engine !== 'podman') return { name, dns: sidecarDns(info) };
    const plan = podmanSidecarAddresses(info, services);
    return { name, ...plan };
  } catch (err) {
    await net.remove().catch(debugLog.swallow('sidecars.network.remove'));
    throw err;
  }
}

/**
 * The fixed addresses of the sidecars on a Podman network, from what the engine says about it;
 * refuses a network that is not internal or whose bridge holds a host address (a gateway), since
 * the sandbox could then reach services listening on the host (docs/architecture.md §16).
 */
export function podmanSidecarAddresses(info: { Internal?: boolean; IPAM?: { Config?: Array<{ Subnet?: string; Gateway?: string }> } }, services: string[]): Required<Omit<SidecarNetwork, 'name' | 'dns'>> {
  const cfg = info.IPAM?.Config?.[0];
  const gateway = cfg?.Gateway && /^\d+\.\d+\.\d+\.\d+$/.test(cfg.Gateway) ? cfg.Gateway : undefined;
  if (info.Internal !== true || gateway) {
    throw new AirlockError(
      'SANDBOX_FAILED',
      `Podman made the run's internal network ${info.Internal !== true ? 'with a route out' : `with an address of the host on its bridge (${gateway}, as its netavark backend does for its name service)`}, so the sandbox could reach the host's services; compose services run only where the run's network has no route out. Run compose devcontainers on Docker or on Podman with its CNI network backend, or choose --environment airlock.`,
      { field: 'environment' },
    );
  }
  const m = /^(\d+)\.(\d+)\.(\d+)\.(\d+)\/(\d+)$/.exec(cfg?.Subnet ?? '');
  const prefix = Number(m?.[5]);
  // Room for the sidecars at the top, the sandbox and the engine's own pick at the bottom.
  if (!m || prefix > 30 || 2 ** (32 - prefix) - 2 < services.length + 8) {
    throw new AirlockError('SANDBOX_FAILED', `Podman gave the run's network the subnet '${cfg?.Subnet ?? 'none'}', which has no room for ${services.length} compose services; check Podman's default subnet pool (containers.conf) and try again.`, { field: 'environment' });
  }
  const base = m.slice(1, 5).reduce((a, x) => a * 256 + Number(x), 0);
  const broadcast = base - (base % 2 ** (32 - prefix)) + 2 ** (32 - prefix) - 1;
  const ip = (n: number) => [24, 16, 8, 0].map((sh) => Math.floor(n / 2 ** sh) % 256).join('.');
  const addresses: Record<string, string> = {};
  services.forEach((svc, i) => {
    addresses[svc] = ip(broadcast - 1 - i);
  });
  return { addresses, extraHosts: services.map((svc) => `${svc}:${addresses[svc]}`) };
}

/** Creates and starts every sidecar, then waits until each is ready (healthy, or running when it has no healthcheck). */
export async function startSidecars(docker: Docker, runId: string, sidecars: SidecarImage[], o: SidecarOptions & { signal?: AbortSignal; network?: SidecarNetwork } = {}): Promise<void> {
  const network = o.network ?? { name: sidecarNetworkName(runId) };
  await Promise.all(
    sidecars.map(async (s) => {
      const c = await createContainerWithProfile(docker, o.engine ?? 'docker', sidecarContainerConfig(runId, s, o, network));
      await c.start();
    }),
  );
  await Promise.all(sidecars.map((s) => waitReady(docker, runId, s, o)));
}

async function waitReady(docker: Docker, runId: string, s: SidecarImage, o: SidecarOptions & { signal?: AbortSignal }): Promise<void> {
  const name = sidecarContainerName(runId, s.service.name);
  const c = docker.getContainer(name);
  const hc = s.service.healthcheck;
  const limit = hc ? hc.startPeriodMs + (hc.intervalMs + hc.timeoutMs) * (hc.retries + 1) : DEFAULT_READY_MS;
  const deadline = Date.now() + Math.max(limit, 10_000);
  // Podman: the check runs when Airlock asks (its own timers need systemd), at the file's interval.
  let nextCheck = hc && o.engine === 'podman' ? Date.now() + Math.min(hc.intervalMs, 1000) : Infinity;
  for (let delay = 50; ; delay = Math.min(delay * 2, 500)) {
    if (o.signal?.aborted) throw new AirlockError('CANCELLED', 'the run was stopped while its services started');
    if (hc && Date.now() >= nextCheck) {
      await runPodmanHealthcheck(docker, name);
      nextCheck = Date.now() + hc.intervalMs;
    }
    const st = (await c.inspect()).State;
    const health = (st as { Health?: { Status?: string } }).Health?.Status;
    if (!st.Running) throw await notReady(c, s, `exited with status ${st.ExitCode}`);
    if (health === 'healthy' || (!health && st.Running)) return;
    if (health === 'unhealthy') throw await notReady(c, s, 'its healthcheck failed');
    if (Date.now() > deadline) throw await notReady(c, s, `was not healthy within ${Math.round(limit / 1000)} s`);
    await new Promise((r) => setTimeout(r, delay));
  }
}

/** Podman's own `GET /libpod/containers/{name}/healthcheck`: runs the container's healthcheck once and records the result in its state. */
function runPodmanHealthcheck(docker: Docker, name: string): Promise<void> {
  return new Promise((resolve) => {
    // A failure to run it (the container stopped meanwhile) shows in the state read next.
    docker.modem.dial({ path: `/v4.0.0/libpod/containers/${encodeURIComponent(name)}/healthcheck`, method: 'GET', statusCodes: { 200: true }, options: {} }, () => resolve());
  });
}

async function notReady(c: Docker.Container, s: SidecarImage, what: string): Promise<AirlockError> {
  const raw = await c.logs({ stdout: true, stderr: true, tail: 30 }).catch(() => Buffer.alloc(0));
  // json-file logs come multiplexed (8-byte frame headers): keep the text.
  const tail = Buffer.from(raw as unknown as Buffer)
    .toString('utf8')
    .replace(/[\x00-\x08]/g, '')
    .trim();
  return new AirlockError(
    'SANDBOX_FAILED',
    `The compose service '${s.service.name}' (${s.image}) ${what}; the agent was not started.\n--- last output ---\n${tail}\n---\nIt runs hardened: no capabilities but ${ROOT_SIDECAR_CAPS.join(', ')} when it starts as root, read-only root (list paths it writes under tmpfs:, or set read_only: false), no host mounts or ports. Fix the service, or leave it out with runServices.`,
    { field: 'environment' },
  );
}

/** Sidecars run on the Docker-API engines only (runc or gVisor); a VM has no engine beside it. */
export function sidecarRuntime(isolation: Isolation): string | undefined {
  if (isolation === 'gvisor') return GVISOR_RUNTIME;
  if (isolation === 'container') return undefined;
  throw new AirlockError('INVALID_INPUT', `Compose services (sidecars) run as containers beside a container sandbox; --isolation ${isolation} has none. Use --isolation container or gvisor, or --environment airlock.`, { field: 'environment' });
}

/**
 * Removes the run's sidecars and network when no sandbox came to carry the wipe (prepare failed
 * before it existed); the run's wipe covers every other path.
 */
export async function removeSidecars(docker: Docker, runId: string): Promise<void> {
  const gone = (err: unknown) => {
    if (statusCodeOf(err) !== 404) throw err;
  };
  const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN}=${runId}`, `${LABEL_KIND}=sidecar`] } });
  await Promise.all(containers.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true }).catch(gone)));
  await docker.getNetwork(sidecarNetworkName(runId)).remove().catch(gone);
}
