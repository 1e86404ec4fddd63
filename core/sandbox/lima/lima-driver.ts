import { resolveTool } from '../../common/resolve-tool';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import { Emitter, type Event } from '../../common/disposable';
import type { ChannelStream, IsolationKind, SandboxDriver, SandboxEvent, SandboxInfo, SandboxSpec, WipeProof } from '../driver';
import { spawnChannelStream } from '../qemu/child-channel';
import { runTool, type ToolResult } from '../../common/run-tool';
import { sandboxArchFrom, type SandboxArch } from '../sandbox-arch';
import {
  LIMA_HOST_GATEWAY,
  LIMA_HOSTGUARD_CHECK,
  LIMA_INSTANCE,
  LIMA_LABEL_RUN,
  limaTemplateFor,
  limaVolumeNames,
  limactlCopyArgs,
  limactlCreateArgs,
  limactlListArgs,
  limactlShellArgs,
  limactlStartArgs,
  limaTemplate,
  nerdctlExecHelperArgs,
  nerdctlImageEnvArgs,
  nerdctlImageInspectArgs,
  nerdctlPsArgs,
  nerdctlRemoveArgs,
  nerdctlRunArgs,
  nerdctlVolumeCreateArgs,
  nerdctlVolumeListArgs,
  nerdctlVolumeRemoveArgs,
  parseLimaList,
  parseNerdctlImageEnv,
  parseNerdctlPs,
  type LimaTemplateOptions,
} from './lima-cli';
import { debugLog } from '../../common/debug-log';

/** Runs `limactl` with the given arguments (tests substitute a recorder). */
export type LimactlRunner = (args: string[], opts?: { timeoutMs?: number; input?: Buffer }) => Promise<ToolResult>;

export interface LimaDriverOptions {
  /** The host's environment (limactl runs with it), from the root. */
  env: NodeJS.ProcessEnv;
  instance?: string;
  /** Path of `limactl`; default from PATH. */
  limactl?: string;
  template?: Partial<LimaTemplateOptions>;
  /** Replaces process execution (tests). */
  runner?: LimactlRunner;
  /** Replaces the channel process (tests). */
  openStream?: (args: string[]) => ChannelStream;
}

/**
 * SandboxDriver for macOS over Lima: one long-lived `airlock` VM with rootless containerd, one
 * hardened container per run inside it (see lima-cli.ts for the reasoning). The channel is
 * `limactl shell airlock nerdctl exec -i <container> node /opt/airlock/helper.js`.
 * NOT run on a real Mac in this repository's CI: see resources/vm/README.md.
 */
export class LimaDriver implements SandboxDriver {
  readonly kind: IsolationKind = 'lima';
  private readonly emitter = new Emitter<SandboxEvent>();
  readonly onDidEvent: Event<SandboxEvent> = this.emitter.event;
  private readonly instance: string;
  private readonly run: LimactlRunner;
  private vmReady: Promise<void> | undefined;
  private vmArchitecture: SandboxArch | undefined;

  constructor(private readonly opts: LimaDriverOptions) {
    this.instance = opts.instance ?? LIMA_INSTANCE;
    const bin = opts.limactl ?? 'limactl';
    this.run = opts.runner ?? ((args, o) => runTool(bin, args, { timeoutMs: o?.timeoutMs ?? 120_000, input: o?.input, env: opts.env }));
  }

  private async ok(args: string[], what: string, timeoutMs = 120_000): Promise<ToolResult> {
    const r = await this.run(args, { timeoutMs });
    if (r.code !== 0) throw new AirlockError('SANDBOX_FAILED', `${what}: limactl ${args.slice(0, 2).join(' ')} failed: ${r.stderr.trim().slice(-800) || `exit ${r.code}`}`);
    return r;
  }

  private nerdctl(argv: string[], what: string, timeoutMs = 120_000): Promise<ToolResult> {
    return this.ok(limactlShellArgs(argv, this.instance), what, timeoutMs);
  }

  /** Creates (first time; downloads the Debian cloud image) and starts the `airlock` VM. */
  ensureVm(): Promise<void> {
    this.vmReady ??= (async () => {
      const listed = await this.run(limactlListArgs(), { timeoutMs: 30_000 });
      if (listed.code !== 0) {
        throw new AirlockError('VM_UNAVAILABLE', `limactl does not work (${listed.stderr.trim() || `exit ${listed.code}`}). Install Lima: brew install lima.`);
      }
      const vm = parseLimaList(listed.stdout.toString('utf8')).find((i) => i.name === this.instance);
      if (!vm) {
        const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-lima-'));
        try {
          const file = path.join(dir, `${this.instance}.yaml`);
          await writeFile(file, limaTemplate({ ...limaTemplateFor(), ...this.opts.template }));
          await this.ok(limactlCreateArgs(file, this.instance), 'Could not create the Airlock Lima VM', 30 * 60_000);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      }
      if (vm?.status !== 'Running') await this.ok(limactlStartArgs(this.instance), 'Could not start the Airlock Lima VM', 30 * 60_000);
      const after = await this.run(limactlListArgs(), { timeoutMs: 30_000 });
      const started = parseLimaList(after.stdout.toString('utf8')).find((i) => i.name === this.instance);
      if (!started || started.status !== 'Running') {
        throw new AirlockError('VM_UNAVAILABLE', `The Lima VM '${this.instance}' did not start (status ${started?.status ?? 'missing'}); see \`limactl start ${this.instance}\`.`);
      }
      this.vmArchitecture = sandboxArchFrom(started.arch, `The Lima VM '${this.instance}'`);
      // A global $LIMA_HOME/_config/override.yaml or default.yaml can add mounts to every instance.
      if (started.mounts > 0) {
        throw new AirlockError('VM_UNAVAILABLE', `The Lima VM '${this.instance}' mounts ${started.mounts} host director${started.mounts === 1 ? 'y' : 'ies'} (from its config or $LIMA_HOME/_config/default.yaml / override.yaml); Airlock's VM must mount nothing. Remove those mounts and run \`limactl delete ${this.instance}\`.`);
      }
      if (started.exposures.length > 0) {
        throw new AirlockError('VM_UNAVAILABLE', `The Lima VM '${this.instance}' connects to the Mac through ${started.exposures.join(', ')} (from its config or $LIMA_HOME/_config/default.yaml / override.yaml, which win over Airlock's template); Airlock's VM must have none. Remove those settings and run \`limactl delete ${this.instance}\`.`);
      }
      // The provision script's guard against host.lima.internal must be in place (it fails quietly otherwise).
      const guard = await this.run(limactlShellArgs(LIMA_HOSTGUARD_CHECK, this.instance), { timeoutMs: 60_000 });
      if (guard.code !== 0 || !guard.stdout.toString('utf8').includes(LIMA_HOST_GATEWAY)) {
        throw new AirlockError('VM_UNAVAILABLE', `The Lima VM '${this.instance}' does not block connections to the Mac's loopback (host.lima.internal, ${LIMA_HOST_GATEWAY}): its provision step did not install the nftables guard (${guard.stderr.trim().slice(-200) || `exit ${guard.code}`}). Run \`limactl delete ${this.instance}\` so Airlock creates it again.`);
      }
    })();
    this.vmReady.catch(() => {
      this.vmReady = undefined;
    });
    return this.vmReady;
  }

  /**
   * Builds `ref` inside the VM from a Docker build context tar (Dockerfile at its root), so a Mac
   * needs no Docker: the same Dockerfile as the Docker driver, built by nerdctl/BuildKit.
   */
  /** The VM's CPU architecture as `limactl list` reports it (the Mac's own: no Rosetta is assumed), which the image is built for. */
  async vmArch(): Promise<SandboxArch> {
    await this.ensureVm();
    return this.vmArchitecture ?? sandboxArchFrom(undefined, `The Lima VM '${this.instance}'`);
  }

  async buildImage(ref: string, contextTar: Buffer, buildargs: Record<string, string> = {}): Promise<void> {
    await this.ensureVm();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-lima-ctx-'));
    const guestTar = `/tmp/airlock-ctx-${randomBytes(6).toString('hex')}.tar`;
    try {
      const hostTar = path.join(dir, 'context.tar');
      await writeFile(hostTar, contextTar);
      await this.ok(limactlCopyArgs(hostTar, guestTar, this.instance), 'Could not copy the image build context into the Lima VM', 10 * 60_000);
      const args = Object.entries(buildargs).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]);
      const script = 'set -e; t=$1; r=$2; shift 2; d=$(mktemp -d); tar -xf "$t" -C "$d"; rm -f "$t"; nerdctl build -t "$r" "$@" "$d"; rm -rf "$d"';
      await this.nerdctl(['sh', '-c', script, 'sh', guestTar, ref, ...args], 'Building the sandbox image in the Lima VM failed', 60 * 60_000);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  /**
   * Makes sure `ref` exists in the VM, building it from `context()` (a Docker build context tar,
   * e.g. core/sandbox/image.ts `buildContextTar`) when missing. Returns whether it built.
   */
  async ensureImage(ref: string, context: () => Promise<Buffer>, buildargs: Record<string, string> = {}): Promise<boolean> {
    await this.ensureVm();
    const r = await this.run(limactlShellArgs(nerdctlImageInspectArgs(ref), this.instance), { timeoutMs: 60_000 });
    if (r.code === 0) return false;
    await this.buildImage(ref, await context(), buildargs);
    return true;
  }

  async create(spec: SandboxSpec): Promise<SandboxInfo> {
    if (spec.network !== 'none') throw new AirlockError('INVALID_INPUT', `The Lima sandbox supports only the 'none' network policy for now; got '${spec.network}'.`);
    await this.ensureVm();
    let id: string;
    try {
      // The image's ENV names, set empty for the helper (lima-cli.ts limaContainerEnv; docs/architecture.md §2.3).
      const inspected = await this.nerdctl(nerdctlImageEnvArgs(spec.image), `Could not read the ENV of image ${spec.image} in the Lima VM`, 60_000);
      const imageEnv = parseNerdctlImageEnv(inspected.stdout.toString('utf8'));
      for (const name of Object.values(limaVolumeNames(spec.runId))) await this.nerdctl(nerdctlVolumeCreateArgs(spec.runId, name), `Could not create the disk-backed volumes of run ${spec.runId}`);
      id = (await this.nerdctl(nerdctlRunArgs({ ...spec, imageEnv }), `Could not start the sandbox container for run ${spec.runId}`)).stdout.toString('utf8').trim().split('\n').pop() ?? '';
    } catch (err) {
      await this.destroy(spec.runId).catch(debugLog.swallow('lima.create.cleanup'));
      throw err;
    }
    this.emitter.fire({ type: 'created', runId: spec.runId, id });
    this.emitter.fire({ type: 'started', runId: spec.runId, id });
    return { id, runId: spec.runId, kind: 'lima', state: 'running', createdAt: new Date().toISOString() };
  }

  async openChannel(sandboxId: string): Promise<ChannelStream> {
    if (!/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(sandboxId)) throw new AirlockError('INVALID_INPUT', `'${sandboxId}' is not a container id.`);
    const args = limactlShellArgs(nerdctlExecHelperArgs(sandboxId), this.instance);
    if (this.opts.openStream) return this.opts.openStream(args);
    return spawnChannelStream(await resolveTool(this.opts.limactl ?? 'limactl', this.opts.env), args, { env: this.opts.env });
  }

  private async containers(runId?: string) {
    const r = await this.nerdctl(nerdctlPsArgs(runId), 'Could not list the sandbox containers in the Lima VM', 60_000);
    return parseNerdctlPs(r.stdout.toString('utf8'));
  }

  private async volumes(runId: string): Promise<string[]> {
    const r = await this.nerdctl(nerdctlVolumeListArgs(runId), 'Could not list the sandbox volumes in the Lima VM', 60_000);
    return r.stdout.toString('utf8').split('\n').map((l) => l.trim()).filter((l) => /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(l));
  }

  async destroy(runId: string): Promise<WipeProof> {
    const t0 = performance.now();
    const found = await this.containers(runId);
    const removed: string[] = [];
    if (found.length > 0) {
      await this.nerdctl(nerdctlRemoveArgs(found.map((c) => c.id)), `Could not remove the sandbox of run ${runId}`, 60_000);
      removed.push(...found.map((c) => `container:${c.id.slice(0, 12)}`));
    }
    const volumes = await this.volumes(runId);
    if (volumes.length > 0) {
      await this.nerdctl(nerdctlVolumeRemoveArgs(volumes), `Could not remove the volumes of run ${runId}`, 60_000);
      removed.push(...volumes.map((v) => `volume:${v}`));
    }
    const leftovers = [...(await this.containers(runId)).map((c) => `container:${c.id.slice(0, 12)}`), ...(await this.volumes(runId)).map((v) => `volume:${v}`)];
    const proof: WipeProof = { runId, removed, leftovers, durationMs: performance.now() - t0, verifiedAt: new Date().toISOString() };
    this.emitter.fire({ type: 'destroyed', runId, proof });
    return proof;
  }

  async list(): Promise<SandboxInfo[]> {
    const vms = await this.run(limactlListArgs(), { timeoutMs: 30_000 });
    const vm = vms.code === 0 ? parseLimaList(vms.stdout.toString('utf8')).find((i) => i.name === this.instance) : undefined;
    if (vm?.status !== 'Running') return [];
    return (await this.containers()).map((c) => ({
      id: c.id,
      runId: c.labels[LIMA_LABEL_RUN] ?? '',
      kind: 'lima' as const,
      state: c.status,
      createdAt: c.createdAt,
    }));
  }

  dispose(): void {
    this.emitter.dispose();
  }
}
