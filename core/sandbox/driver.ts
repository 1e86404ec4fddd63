import type { Event } from '../common/disposable';

/** Which isolation a sandbox uses. */
export type IsolationKind = 'docker' | 'gvisor' | 'qemu' | 'lima' | 'wsl';

/** Network policy of a sandbox. `none` leaves only loopback; the model proxy arrives through the channel. */
export type NetworkMode = 'none' | 'open';

export interface SandboxLimits {
  /** Memory limit in bytes (default 4 GiB). */
  memoryBytes: number;
  /** CPU limit in CPUs (default 2). */
  cpus: number;
  /** Max processes (default 512). */
  pids: number;
}

export const DEFAULT_LIMITS: SandboxLimits = { memoryBytes: 4 * 1024 ** 3, cpus: 2, pids: 512 };

export interface SandboxSpec {
  /** The run this sandbox belongs to; every resource is labelled `airlock.run=<runId>`. */
  runId: string;
  /** Image reference (the built Airlock image unless the user chose another). */
  image: string;
  limits: SandboxLimits;
  network: NetworkMode;
  /**
   * With `network: 'none'`: the run's internal sidecar network to join instead of no network at all
   * (docs/architecture.md §16: it has no route out; the sandbox reaches its compose services there).
   */
  joinNetwork?: string;
  /** With `joinNetwork`: `name:address` lines for /etc/hosts (Podman's internal networks answer no names, §16). */
  extraHosts?: string[];
  /**
   * With `joinNetwork` (Docker): the engine's embedded resolver's only upstream, an address nobody
   * holds, so outside names are forwarded nowhere (docs/architecture.md §16, CVE-2024-29018).
   */
  dns?: { servers: string[]; options: string[]; search: string[] };
  /** Extra labels (e.g. `airlock.pool`); the run and kind labels are always set and win. */
  labels?: Record<string, string>;
  /** The run's volumes were made before the sandbox (a project base's overlays, core/sandbox/docker/project-base-volumes.ts): never a pooled sandbox. */
  volumesReady?: boolean;
}

/** A sandbox as the engine knows it, found by label. */
export interface SandboxInfo {
  id: string;
  runId: string;
  kind: IsolationKind;
  state: string;
  createdAt: string;
  /** `<hostname>:<pid>` of the process that created it, where the driver records one (reaper safety). */
  owner?: string;
  /** The installation id of the Airlock that created it (label `airlock.installation`), where recorded. */
  installation?: string;
  /** Which engine runs it and where ("Docker 20.10 over SSH at build-box"), when the driver has one. */
  engine?: { description: string; remote: boolean };
  /**
   * Why the driver's own record of this sandbox could not be read (damaged), when it could not.
   * Crash recovery leaves such a sandbox alone while it runs: its owner is unknown.
   */
  recordProblem?: string;
}

/** Who made a sandbox's resources, as the reaper needs to know. */
export interface ResourceOwner {
  runId: string;
  owner?: string;
  installation?: string;
}

/** A byte stream to the in-sandbox helper (docs/architecture.md §4). */
export interface ChannelStream {
  readable: NodeJS.ReadableStream;
  writable: NodeJS.WritableStream;
  /** Ends the stream and releases whatever carries it (an exec, a serial port, a child process). */
  close(): void;
  /** The last lines the helper wrote to stderr (diagnostics only; never part of the channel). */
  stderrTail?(): string;
}

/** What was checked after a wipe: nothing labelled with the run may remain. */
export interface WipeProof {
  runId: string;
  removed: string[];
  /** Resources still found with the run's label after removal; empty means verified gone. */
  leftovers: string[];
  durationMs: number;
  verifiedAt: string;
  /** The label that was checked, when it differs from `runId` (a sandbox taken from the warm pool). */
  labelRunId?: string;
}

export interface ImageProgress {
  phase: 'check' | 'context' | 'build' | 'done';
  message: string;
  /** 0..1 where known. */
  fraction?: number;
  /** During `build`: the Dockerfile step being run (1-based) and the number of steps. */
  step?: number;
  totalSteps?: number;
  /** Which image is being prepared. */
  variant?: 'base' | 'agents' | 'custom';
}

export type SandboxEvent =
  | { type: 'created'; runId: string; id: string }
  | { type: 'started'; runId: string; id: string }
  | { type: 'destroyed'; runId: string; proof: WipeProof }
  | { type: 'reaped'; runId: string; id: string };

/**
 * One isolation backend. Drivers only create, connect and destroy; process, file and TCP work goes
 * through the channel, so every driver gets them for free.
 */
export interface SandboxDriver {
  readonly kind: IsolationKind;
  readonly onDidEvent: Event<SandboxEvent>;
  /** Creates and starts a sandbox for the spec. */
  create(spec: SandboxSpec): Promise<SandboxInfo>;
  /** Opens the channel to the helper inside a started sandbox. */
  openChannel(sandboxId: string): Promise<ChannelStream>;
  /** Removes everything labelled with the run and verifies nothing remains. */
  destroy(runId: string): Promise<WipeProof>;
  /** All sandboxes this driver owns (label `airlock.run`). */
  list(): Promise<SandboxInfo[]>;
  /**
   * Runs that own other resources (volumes, networks, disks) — e.g. left by a crash between creating
   * a volume and its container — with the `<hostname>:<pid>` that made them where recorded.
   * Optional; the reaper also wipes these unless their owner is still running.
   */
  listRunResources?(): Promise<ResourceOwner[]>;
  /**
   * Whether the engine may be shared with other machines (reached over a network): then the reaper
   * only touches resources of this installation. Drivers that create per-machine resources omit it.
   */
  sharedEngine?(): Promise<boolean>;
  /**
   * The host's identity (uid or user name) of every process in a sandbox, read by the engine from the
   * host, never from inside. Undefined where the engine cannot see the sandbox's processes (gVisor,
   * VMs); drivers without it omit it. docs/architecture.md §16, "Setup ends completely".
   */
  processOwners?(sandboxId: string): Promise<string[] | undefined>;
}
