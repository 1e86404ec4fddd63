import { StringDecoder } from 'node:string_decoder';
import type Docker from 'dockerode';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { AirlockError } from '../../../contracts/errors';
import { Emitter, type Event } from '../../common/disposable';
import { PROCESS_OWNER } from '../../common/process-alive';
import type { ChannelStream, IsolationKind, ResourceOwner, SandboxDriver, SandboxEvent, SandboxInfo, SandboxSpec, WipeProof } from '../driver';
import { LABEL_INSTALLATION, LABEL_KIND, LABEL_OWNER, LABEL_RUN, assertSafeRunId } from '../labels';
import { HELPER_COMMAND, HELPER_USER, LOADER_PRELOAD_FILE, WORKSPACE_DIR, containerName, hardenedContainerConfig, sandboxVolumes, type ContainerConfigOptions } from './container-config';
import { assertLimitsEnforced } from './engine-limits';
import { engineConnectError, engineIdentity, statusCodeOf, type Engine } from './engine';
import { describeEngine, type EngineIdentity } from './engine-endpoint';
import { GVISOR_RUNTIME, assertGvisorRegistered } from './gvisor';
import { ExecDemuxer, TextTail } from './exec-demux';
import { containerProcessOwners } from './container-processes';
import { createContainerWithProfile } from './seccomp-profile';
import { debugLog } from '../../common/debug-log';

export interface DockerDriverOptions {
  /** The engine the root chose (`AppContext.connectEngine`: the settings, then `--engine-host`). */
  engine: Engine | Promise<Engine>;
  /** The host's environment, from the root (its reading decides whether a refused socket means "not installed"). */
  env: NodeJS.ProcessEnv;
  /** This installation's id, labelled on everything created (the reaper's test on shared engines). */
  installationId?: string;
  /** Receives the helper's stderr (debug output); it never enters the channel. */
  debugSink?: (sandboxId: string, text: string) => void;
  /**
   * `gvisor` runs every container under gVisor's `runsc` runtime, with the same hardening; the engine
   * must have it registered (GVISOR_UNAVAILABLE otherwise, never a silent runc). Default `container` (runc).
   */
  isolation?: 'container' | 'gvisor';
}


function messageOf(err: unknown): string {
  if (err && typeof err === 'object' && 'json' in err) {
    const json = (err as { json: unknown }).json;
    if (json && typeof json === 'object' && 'message' in json) return String((json as { message: unknown }).message);
  }
  return err instanceof Error ? err.message : String(err);
}

/**
 * Hijacks the container's stdio (before start). Not `container.attach()`: dockerode sends its options
 * as a JSON body too, which Docker ignores but Podman hands to the helper's stdin. Here the options
 * travel in the query and the body is empty (an empty buffer still flushes the request headers).
 */
function attachStdio(docker: Docker, id: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    docker.modem.dial(
      {
        path: `/containers/${encodeURIComponent(id)}/attach?`,
        method: 'POST',
        isStream: true,
        hijack: true,
        openStdin: true,
        file: Buffer.alloc(0),
        statusCodes: { 101: true, 200: true, 404: 'no such container', 409: 'container not ready', 500: 'server error' },
        options: { _query: { stream: true, stdin: true, stdout: true, stderr: true } },
      },
      (err: unknown, stream: unknown) => (err ? reject(err) : resolve(stream as Duplex)),
    );
  });
}

/**
 * Force-removes a container with its anonymous volumes. Podman refuses (500, "container state
 * improper") when the container stops by itself while it is being killed (the helper exits as its
 * channel closes); the next attempt finds it stopped and removes it.
 */
async function forceRemove(docker: Docker, id: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await docker.getContainer(id).remove({ force: true, v: true });
      return;
    } catch (err) {
      if (attempt >= 3 || statusCodeOf(err) !== 500 || !/state improper|could not be stopped/i.test(messageOf(err))) throw err;
      await new Promise((r) => setTimeout(r, 100 * attempt));
    }
  }
}

/**
 * SandboxDriver over any Docker-API engine (Docker Engine/Desktop, Colima, OrbStack, Podman).
 * Containers are hardened (see container-config.ts); the helper is the container's own process and
 * the first channel is its attached stdin/stdout (no exec on the ready path); later channels are execs.
 */
export class DockerDriver implements SandboxDriver {
  readonly kind: IsolationKind;
  private readonly emitter = new Emitter<SandboxEvent>();
  readonly onDidEvent: Event<SandboxEvent> = this.emitter.event;
  private readonly enginePromise: Promise<Engine>;
  private resolved: Engine | undefined;
  /** The helper's stdio of containers started by this driver, until their first openChannel. */
  private readonly attached = new Map<string, { runId: string; socket: Duplex }>();

  constructor(private readonly opts: DockerDriverOptions) {
    this.enginePromise = Promise.resolve(opts.engine);
    this.enginePromise.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
    this.kind = opts.isolation === 'gvisor' ? 'gvisor' : 'docker';
  }

  /**
   * What the container config depends on: the engine's dialect (Docker or Podman, asked once) and the
   * OCI runtime (`runsc` under gVisor, after checking the engine has it: never a silent runc).
   */
  private async configOptions(engine: Engine): Promise<ContainerConfigOptions & { identity: EngineIdentity }> {
    const identity = await engineIdentity(engine).catch((err: unknown) => this.fail(err, 'Could not ask the engine what it is'));
    // Never a sandbox without its limits (a rootless engine on cgroup v1 drops them silently).
    assertLimitsEnforced(identity);
    if (this.kind === 'gvisor') assertGvisorRegistered(identity);
    const installation = this.opts.installationId;
    return { identity, engine: identity.kind, ...(this.kind === 'gvisor' ? { runtime: GVISOR_RUNTIME } : {}), ...(installation ? { installation } : {}) };
  }

  /** The engine client the root gave. */
  engine(): Promise<Engine> {
    return this.enginePromise.then((e) => (this.resolved = e));
  }

  private async docker(): Promise<Docker> {
    return (await this.engine()).docker;
  }

  /** Rethrows engine-reachability failures as typed errors; others as SANDBOX_FAILED with `what`. */
  private async fail(err: unknown, what: string): Promise<never> {
    const engine = await this.engine();
    const typed = await engineConnectError(err, engine.endpoint, this.opts.env);
    if (typed) throw typed;
    const msg = messageOf(err);
    if (/no space left on device/i.test(msg)) {
      throw new AirlockError('DISK_FULL', `${what}: the engine's disk is full (${msg}). Free space (docker system prune, remove old images) and retry.`, { cause: err });
    }
    throw new AirlockError('SANDBOX_FAILED', `${what}: ${msg}`, { cause: err });
  }

  async create(spec: SandboxSpec): Promise<SandboxInfo> {
    assertSafeRunId(spec.runId);
    const engine = await this.engine();
    const docker = engine.docker;
    // The image is asked about while the engine's identity is (asked once per driver, then cached).
    const inspecting = docker.getImage(spec.image).inspect();
    inspecting.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
    const { identity, ...configOpts } = await this.configOptions(engine);
    let container: Docker.Container;
    let image: Docker.ImageInspectInfo;
    try {
      // Podman's volumes are made ahead of the container, meanwhile.
      const volumes = identity.kind === 'podman' ? Promise.all(sandboxVolumes(spec.runId, this.opts.installationId).map((v) => docker.createVolume({ Name: v.Name, Labels: v.Labels, Driver: 'local' }))) : undefined;
      volumes?.catch(() => undefined); // handled where awaited; this only keeps it from being unhandled
      image = await inspecting;
      // The image's ENV names, to take out of the helper's environment (container-config.ts helperEnv).
      const config = hardenedContainerConfig(spec, { ...configOpts, imageEnv: image.Config?.Env ?? [] });
      await volumes;
      container = await createContainerWithProfile(docker, identity.kind, config);
    } catch (err) {
      // Volumes made ahead of the container (Podman) go with the failed create.
      if (identity.kind === 'podman') await this.destroy(spec.runId).catch(debugLog.swallow('docker.create.cleanup'));
      if (err instanceof AirlockError) throw err;
      if (statusCodeOf(err) === 404) {
        throw new AirlockError('NOT_FOUND', `Image '${spec.image}' is not available to the engine. Run \`airlock doctor\` to build the Airlock image, or pull/build the image you chose.`, { cause: err });
      }
      return this.fail(err, `Could not create the sandbox for run ${spec.runId}`);
    }
    this.emitter.fire({ type: 'created', runId: spec.runId, id: container.id });
    try {
      // Attached before start, so not a byte of the helper's hello is missed. Meanwhile: no image may
      // carry /etc/ld.so.preload, which every glibc loader reads, Airlock's own included (§2.3).
      // The verdict is kept per image id (content-addressed: the same id is the same files), so only
      // the first sandbox of an image pays for the archive call.
      const [attached] = await Promise.all([attachStdio(docker, container.id), preloadFree.has(image.Id) ? undefined : refusePreload(container, spec.image)]);
      preloadFree.add(image.Id);
      this.attached.set(container.id, { runId: spec.runId, socket: attached });
      await container.start();
    } catch (err) {
      // Leave nothing behind when start fails (a half-made sandbox still has volumes).
      await this.destroy(spec.runId).catch(debugLog.swallow('docker.create.cleanup'));
      if (err instanceof AirlockError) throw err;
      return this.fail(err, `Could not start the sandbox for run ${spec.runId}`);
    }
    this.emitter.fire({ type: 'started', runId: spec.runId, id: container.id });
    const installation = this.opts.installationId;
    const where = engine.endpoint;
    // What the engine says it is (Docker or Podman, its version, rootless) over what the address suggested.
    const description = { ...where.description, kind: identity.kind, rootless: identity.rootless || where.description.rootless };
    return {
      id: container.id,
      runId: spec.runId,
      kind: this.kind,
      state: 'running',
      createdAt: new Date().toISOString(),
      owner: PROCESS_OWNER,
      ...(installation ? { installation } : {}),
      engine: { description: `${describeEngine(description, identity.version)} (${where.display})`, remote: where.description.remote },
    };
  }

  async openChannel(sandboxId: string): Promise<ChannelStream> {
    // The first channel is the helper the container started with; a later one is an exec.
    const first = this.attached.get(sandboxId);
    if (first) {
      this.attached.delete(sandboxId);
      return this.channelOver(sandboxId, first.socket);
    }
    return this.openExecStream(sandboxId, HELPER_COMMAND);
  }

  /**
   * Starts a long-lived exec of `cmd` with stdin/stdout hijacked; stderr goes to the debug sink and a
   * bounded tail. `openChannel` uses it for the helper; tests and benches may use it for baselines.
   */
  async openExecStream(sandboxId: string, cmd: string[]): Promise<ChannelStream> {
    const docker = await this.docker();
    let socket: Duplex;
    try {
      const exec = await docker.getContainer(sandboxId).exec({
        Cmd: cmd,
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        User: HELPER_USER,
        WorkingDir: WORKSPACE_DIR,
      });
      socket = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
    } catch (err) {
      if (statusCodeOf(err) === 404 || statusCodeOf(err) === 409) {
        throw new AirlockError('SANDBOX_FAILED', `Sandbox ${sandboxId.slice(0, 12)} is gone or not running (${messageOf(err)}); create a new one.`, { cause: err });
      }
      return this.fail(err, `Could not open the channel into sandbox ${sandboxId.slice(0, 12)}`);
    }
    return this.channelOver(sandboxId, socket);
  }

  /** A channel over a hijacked exec or attach connection (stdout/stderr multiplexed, stdin raw). */
  private channelOver(sandboxId: string, socket: Duplex): ChannelStream {
    const remote = this.resolved?.endpoint.description;
    if (remote?.remote) {
      // A link that dies without a reset (Wi-Fi gone, VPN down) is found by TCP keepalive probes
      // instead of hanging until the run's limit (ssh has its own ServerAlive).
      (socket as Partial<Socket>).setKeepAlive?.(true, 15_000);
      // Say where it broke: the channel's close reason becomes the run's error.
      socket.prependListener('error', (err: Error) => {
        err.message = `the link to the engine at ${remote.location} (${remote.transport}) dropped: ${err.message}`;
      });
    }
    const tail = new TextTail();
    const sink = this.opts.debugSink;
    // stderr arrives in pieces cut anywhere: decode across them.
    const stderrText = new StringDecoder('utf8');
    const demux = new ExecDemuxer(socket, (chunk) => {
      const text = stderrText.write(chunk);
      tail.append(text);
      sink?.(sandboxId, text);
    });
    let closed = false;
    return {
      readable: demux.stdout,
      writable: socket,
      close: () => {
        if (closed) return;
        closed = true;
        // End stdin first so the helper sees EOF and exits; then drop the connection.
        socket.end();
        socket.destroy();
        demux.stdout.destroy();
      },
      stderrTail: () => tail.toString(),
    };
  }

  async destroy(runId: string): Promise<WipeProof> {
    const t0 = performance.now();
    for (const [id, a] of this.attached) {
      if (a.runId !== runId) continue;
      a.socket.destroy();
      this.attached.delete(id);
    }
    const docker = await this.docker();
    const filters = { label: [`${LABEL_RUN}=${runId}`] };
    const removed: string[] = [];
    const ignoreGone = (err: unknown) => {
      if (statusCodeOf(err) !== 404) throw err;
      return false;
    };
    try {
      // Round 1, in parallel: remove the container by its known name while listing everything
      // labelled with the run (three sequential rounds instead of five: wipe is on the budget).
      const name = containerName(runId);
      const [named, containers, volumes, networks] = await Promise.all([
        forceRemove(docker, name).then(() => true, ignoreGone),
        docker.listContainers({ all: true, filters }),
        docker.listVolumes({ filters }),
        docker.listNetworks({ filters }),
      ]);
      if (named) removed.push(`container:${name}`);
      // Round 2: any other labelled container, then (once no container uses them) volumes and networks.
      const others = containers.filter((c) => !c.Names.includes(`/${name}`));
      await Promise.all(
        others.map(async (c) => {
          if (await forceRemove(docker, c.Id).then(() => true, ignoreGone)) removed.push(`container:${c.Id.slice(0, 12)}`);
        }),
      );
      await Promise.all([
        ...(volumes.Volumes ?? []).map(async (v) => {
          if (await docker.getVolume(v.Name).remove({ force: true }).then(() => true, ignoreGone)) removed.push(`volume:${v.Name}`);
        }),
        ...networks.map(async (n) => {
          if (await docker.getNetwork(n.Id).remove().then(() => true, ignoreGone)) removed.push(`network:${n.Name}`);
        }),
      ]);
      // Round 3: verify by label.
      const leftovers = await this.leftovers(docker, runId);
      const proof: WipeProof = { runId, removed, leftovers, durationMs: performance.now() - t0, verifiedAt: new Date().toISOString() };
      this.emitter.fire({ type: 'destroyed', runId, proof });
      return proof;
    } catch (err) {
      return this.fail(err, `Could not wipe the sandbox of run ${runId}`);
    }
  }

  /** Everything still labelled with the run: containers, volumes, networks. */
  async leftovers(docker: Docker, runId: string): Promise<string[]> {
    const filters = { label: [`${LABEL_RUN}=${runId}`] };
    const [containers, volumes, networks] = await Promise.all([
      docker.listContainers({ all: true, filters }),
      docker.listVolumes({ filters }),
      docker.listNetworks({ filters }),
    ]);
    return [
      ...containers.map((c) => `container:${c.Id.slice(0, 12)}`),
      ...(volumes.Volumes ?? []).map((v) => `volume:${v.Name}`),
      ...networks.map((n) => `network:${n.Name}`),
    ];
  }

  async list(): Promise<SandboxInfo[]> {
    const docker = await this.docker();
    try {
      const containers = await docker.listContainers({ all: true, filters: { label: [`${LABEL_KIND}=sandbox`, LABEL_RUN] } });
      return containers.map((c) => ({
        id: c.Id,
        runId: c.Labels[LABEL_RUN] ?? '',
        kind: 'docker' as const,
        state: c.State,
        createdAt: new Date(c.Created * 1000).toISOString(),
        owner: c.Labels[LABEL_OWNER],
        installation: c.Labels[LABEL_INSTALLATION],
      }));
    } catch (err) {
      return this.fail(err, 'Could not list sandboxes');
    }
  }

  /**
   * Run ids that own volumes or networks but no container (a crash between steps); the reaper
   * removes those too.
   */
  async listRunResources(): Promise<ResourceOwner[]> {
    const docker = await this.docker();
    try {
      const [volumes, networks] = await Promise.all([docker.listVolumes({ filters: { label: [LABEL_RUN] } }), docker.listNetworks({ filters: { label: [LABEL_RUN] } })]);
      const runs = new Map<string, ResourceOwner>();
      for (const labels of [...(volumes.Volumes ?? []).map((v) => v.Labels), ...networks.map((n) => n.Labels)]) {
        const runId = labels?.[LABEL_RUN];
        if (!runId || runs.get(runId)?.owner) continue;
        const owner = labels[LABEL_OWNER];
        const installation = labels[LABEL_INSTALLATION];
        runs.set(runId, { runId, ...(owner ? { owner } : {}), ...(installation ? { installation } : {}) });
      }
      return [...runs.values()];
    } catch (err) {
      return this.fail(err, 'Could not list sandbox volumes');
    }
  }

  /**
   * The host identity of every process in the container, from the engine's `top` (see
   * `containerProcessOwners`); undefined under gVisor, whose processes the engine cannot list.
   */
  async processOwners(sandboxId: string): Promise<string[] | undefined> {
    if (this.kind === 'gvisor') return undefined;
    const engine = await this.engine();
    const identity = await engineIdentity(engine);
    return containerProcessOwners(engine.docker, sandboxId, identity.kind);
  }

  /** A network-reached engine may be shared by several machines (see `SandboxDriver.sharedEngine`). */
  async sharedEngine(): Promise<boolean> {
    return (await this.engine()).endpoint.description.remote;
  }

  dispose(): void {
    this.emitter.dispose();
  }
}

/**
 * Image ids found without /etc/ld.so.preload, for this process's lifetime. An image id is the digest
 * of its configuration, which names every layer's content, so the verdict cannot go stale.
 */
const preloadFree = new Set<string>();

/**
 * Refuses an image that has /etc/ld.so.preload: its libraries would load into Airlock's root helper
 * (Airlock's own loader reads the file too; glibc offers no switch). Asked of the created, not yet
 * started container through the engine's archive API, so nothing of the image runs.
 */
async function refusePreload(container: Docker.Container, image: string): Promise<void> {
  try {
    await container.infoArchive({ path: LOADER_PRELOAD_FILE });
  } catch (err) {
    if (statusCodeOf(err) === 404) return;
    throw err;
  }
  throw new AirlockError(
    'IMAGE_INCOMPATIBLE',
    `The image ${image} has ${LOADER_PRELOAD_FILE}, which would load its libraries into Airlock's helper (root in the sandbox). Remove that file from the image (it is for debugging a system, never for a container) and rebuild it.`,
  );
}
