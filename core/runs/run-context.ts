import type { RunMcpGateway } from '../network/mcp-gateway/run-mcp-gateway';
import { AirlockError } from '../../contracts/errors';
import type { AgentEventOf } from '../../contracts/agent-events';
import type { GitHistory, Isolation, NetworkAnswer, NetworkApprovalEvent, RunEventBody, RunStatus, StartRunArgs } from '../../contracts/runs';
import type { AgentAdapter } from '../agents';
import type { PreparedRunEnvironment, PreparedState } from '../environment/run-environment';
import type { SetupPlan } from '../environment/setup-plan';
import type { AuditLog, AuditRecordData, AuditRecordType } from '../audit';
import type { ChannelProcess, RunResult } from '../channel/channel-client';
import type { Disposable, DisposableStore, Event } from '../common/disposable';
import type { EgressEvent } from '../network/egress-proxy';
import type { SecretFetchEvent } from '../network/gateway/host-command-secret';
import type { PreviewPorts } from '../network/preview-ports';
import type { ModelProxy, SandboxCredential } from '../proxy/model-proxy';
import type { ImageProgress, SandboxLimits, SandboxSpec } from '../sandbox/driver';
import type { Sandbox, SandboxManager } from '../sandbox/sandbox';
import { watchChanges } from '../workspace/changes';
import { collectResult, type CollectedResult } from '../workspace/collect';
import type { HostGit } from '../workspace/host-git';
import { HostRepo } from '../workspace/host-repo';
import { hydrate, type HydrateResult } from '../workspace/hydrate';
import { hydrateFromBase } from '../workspace/hydrate-base';
import type { BaseClaim, ProjectBases } from '../sandbox/project-bases';
import { snapshotProject, type ProjectSnapshot } from '../workspace/snapshot';
import type { CommandLedger } from './command-ledger';
import { storeRunResult } from './run-apply';
import type { RunStore, RunUpdate } from './run-store';
import type { RunTerminal } from './run-terminal';
import type { AgentRunSpec, SandboxArgs, SessionRunSpec } from './run-spec';
import type { StoredRun } from './run-record';

/**
 * The shapes the run's steps (run-steps.ts) and the run service share: what a run needs from the
 * rest of the core, and the state of one live run (docs/architecture.md §1).
 */

/** What the run uses of the model proxy. */
export type RunProxy = Pick<ModelProxy, 'onDidCall' | 'onDidSideDoor' | 'issueToken' | 'revokeRun' | 'usage' | 'budgetStop'> & Partial<Pick<ModelProxy, 'sandboxCredential' | 'onDidRefreshSignin'>>;

/**
 * The workspace operations of a run, one function each; `realWorkspace` in the app, fakes in the
 * steps' unit tests. Collect is one call so the way results are derived can change behind it.
 */
export interface RunWorkspace {
  /** Reads the project on the host (never writes it), leaving credential-looking files out. */
  snapshot(projectDir: string, opts?: { include?: string[]; exclude?: string[] }): Promise<ProjectSnapshot>;
  /**
   * Copies the snapshot into the sandbox and writes the same bytes into the run's object store on
   * the host (`objectsDir`) as the host's own baseline; gives the agent a git repository with
   * `gitHistory` of the project's history (a convenience, never read back).
   */
  hydrate(sandbox: Sandbox, snapshot: ProjectSnapshot, objectsDir: string, opts: { gitHistory: GitHistory; base?: BaseClaim }): Promise<HydratedWorkspace>;
  /** Tells of changed paths while the agent works (hints for the live view and for collect). */
  watch(sandbox: Sandbox, onChange: (paths: string[]) => void): Promise<Disposable>;
  /** Derives the result (changed files, patch) on the host against the baseline the host built. */
  collect(sandbox: Sandbox, from: { snapshot: ProjectSnapshot; hydrated: HydratedWorkspace; hints: Iterable<string>; ref?: string; maxResultBytes?: number }): Promise<CollectedResult>;
  /** Keeps a collected result with the run (patch, listing, the blobs apply needs), and a follow-up turn's thread total. */
  store(store: RunStore, runId: string, collected: CollectedResult, thread?: CollectedResult): Promise<void>;
}

/** A hydrated sandbox, and the run's host object store holding the baseline (docs/architecture.md §11). */
export interface HydratedWorkspace extends HydrateResult {
  repo: HostRepo;
}

/** The real workspace operations, reading the project with the root's host git. */
export const realWorkspace = (git: HostGit): RunWorkspace => ({
  snapshot: (projectDir, opts) => snapshotProject(git, projectDir, opts),
  // The agent starts once the copy is in place; change queries wait for the baseline commit.
  async hydrate(sandbox, snapshot, objectsDir, { gitHistory, base }) {
    // From a project base, only what differs streams in; the baselines are the same commits (§11).
    const repo = await HostRepo.create(git, objectsDir, base ? { borrowFrom: base.objectsDir } : {});
    const opts = { waitForBaseline: false, hostRepo: repo, gitHistory };
    return { ...(base ? await hydrateFromBase(sandbox.channel, snapshot, base.record, opts) : await hydrate(sandbox.channel, snapshot, opts)), repo };
  },
  watch: (sandbox, onChange) => watchChanges(sandbox.channel, onChange),
  async collect(sandbox, { snapshot, hydrated, hints, ref, maxResultBytes }) {
    if (!hydrated.hostBaseline) throw new AirlockError('INTERNAL', 'the host baseline was not written at hydrate');
    return collectResult(sandbox.channel, {
      repo: hydrated.repo,
      baseCommit: await hydrated.hostBaseline,
      manifest: hydrated.manifest,
      ...(snapshot.headCommit ? { headCommit: snapshot.headCommit } : {}),
      hints,
      isIgnored: snapshot.isIgnored,
      ...(ref ? { ref } : {}),
      ...(maxResultBytes ? { maxResultBytes } : {}),
    });
  },
  store: storeRunResult,
});

/** What a run needs from the rest of the core; `core/app.ts` wires the real parts. */
export interface RunServiceDeps {
  store: RunStore;
  /** The sandbox manager for an isolation level (throws VM_UNAVAILABLE where there is none). */
  sandboxes(isolation: Isolation): Promise<Pick<SandboxManager, 'create' | 'reapOrphans'>>;
  /** The image for an agent's variant on an isolation level, built on first use. */
  image(variant: 'base' | 'agents', onProgress: (p: ImageProgress) => void, isolation: Isolation): Promise<string>;
  /**
   * The project environment of a run (docs/architecture.md §16): its derived image (none for
   * Airlock's own), the environment for the agent and its commands, and what to record.
   */
  environment?(input: SandboxArgs & { agentVariant: 'base' | 'agents' }, onProgress: (p: ImageProgress) => void): Promise<PreparedRunEnvironment>;
  proxy: RunProxy;
  /** The model proxy's loopback port on the host. */
  proxyPort: number;
  /** Which wire format a provider speaks. */
  providerFormat(provider: string): Promise<'anthropic' | 'openai'>;
  /** Throws (FORBIDDEN, field `provider`) when the agent may not use the provider's credential (§6). */
  checkProviderAccess?(provider: string, agent: string): Promise<void>;
  agent(kind: StartRunArgs['agent']): AgentAdapter;
  /** Workspace operations (default: the real ones). */
  workspace?: RunWorkspace;
  /**
   * Sets up a wider network policy than `none` for a started sandbox (egress proxy through the
   * channel); returns the environment the agent needs and what to record.
   */
  network?(sandbox: Sandbox, run: { runId: string; policy: 'allowlist' | 'open'; allowlist: string[]; egressRules: string[]; secrets: string[]; internalHosts?: string[]; networkApprovals?: 'ask' | 'deny'; projectDir: string }): Promise<RunNetwork>;
  limits?: SandboxLimits;
  /**
   * A run on a project environment's image ended: keep a started sandbox of that image (its id)
   * ready for the next run (the app's warm pool; docs/architecture.md §16, "The prepared path").
   */
  warmEnvironment?(isolation: Isolation, spec: Omit<SandboxSpec, 'runId'>): void;
  /** How long a setup command may print nothing before the run says it is still running (default a minute; tests set it). */
  setupQuietMs?: number;
  /** Called after an approval request is raised (desktop notification). */
  notify?(message: { runId: string; title: string; body: string }): void;
  /**
   * Opens the run's MCP gateway over the user's servers named by the run (docs/architecture.md §20):
   * credentials from the keychain, connected and listed on the host; absent: `--mcp` is refused.
   */
  mcpGateway?(run: { runId: string; projectDir: string; servers: string[]; isolation?: Isolation; /** The run's question mode: `deny` refuses at once what would ask. */ approvals: 'ask' | 'deny' }): Promise<RunMcpGateway>;
  /** Project bases: a run on Airlock's own image starts from its project's last copy on the engine (§11). */
  bases?: Pick<ProjectBases, 'claim' | 'refresh' | 'discard'>;
}

/** A wider network policy in force for one run. */
export interface RunNetwork extends Disposable {
  env: Record<string, string>;
  record: { policy: string; allow: string[]; warning?: string; internalHosts?: string[]; gateway?: { rules: string[]; projectRules: string[]; secrets: string[]; internalHosts: string[] } };
  onDidConnect: Event<EgressAttempt>;
  /** Every run of a command secret's host command (docs/architecture.md §2.8); never the value. */
  onDidFetchSecret?: Event<SecretFetchEvent>;
  /** Lets a denied host through: this once, for the rest of the run, or for every run of the project. */
  allow(host: string, port: number | undefined, scope: 'once' | 'run' | 'project'): Promise<void>;
  /** Questions put to the user while intercepted requests wait (gateway runs only). */
  approvals?: NetworkApprovalsPort;
}

/** What the run needs from the gateway's approvals (core/network/gateway/network-approvals.ts). */
export interface NetworkApprovalsPort {
  onDidAsk: Event<Omit<NetworkApprovalEvent, 'type'>>;
  onDidResolve: Event<{ id: string; answer: NetworkAnswer; by: 'user' | 'timeout' | 'closed'; request: Omit<NetworkApprovalEvent, 'type'> }>;
  answer(id: string, answer: NetworkAnswer): Promise<boolean>;
}

/** One connection attempt through a run's egress proxy (allow-list policy), as a run sees it. */
export type EgressAttempt = Omit<EgressEvent, 'id' | 'runId' | 'at' | 'address'>;

/**
 * What a run has made so far (docs/architecture.md §1, "Kinds of run"): each step records here what
 * it made, for what outlives a failed step — the wipe (the sandbox, the base to refresh, the pool to
 * refill) and the service's calls while the run is live (previews, the network policy's answers, an
 * MCP session's collect so far). No step reads it: a step's inputs are the products of the steps
 * before it, handed on by the pipeline.
 */
export interface MadeSoFar {
  sandbox?: Sandbox;
  previews?: PreviewPorts;
  /** The hydrated workspace (after setup: its new baseline), what an MCP session's collect so far reads. */
  workspace?: RunWorkspaceState;
  /** The run's wider network policy, while it is in force. */
  network?: RunNetwork;
  /** The project's base is written anew from this copy once the sandbox is wiped (§11). */
  refreshBase?: { files: number; bytes: number };
  /**
   * The sandbox spec (image by id) to keep warm for the next run once this one ends: the project
   * environment's derived image, or the prepared environment this run made or used (§16).
   */
  warmNext?: Omit<SandboxSpec, 'runId'>;
  /**
   * The prepared image this run's setup left, being committed while the agent works (run-setup.ts);
   * never rejects. The wipe step waits for it before the pool is refilled and the run ends.
   */
  preparedKept?: Promise<void>;
}

/** What prepare hands on: the sandbox, the project as read, and what the project's environment gives the later steps. */
export interface PreparedSandbox {
  sandbox: Sandbox;
  snapshot: ProjectSnapshot;
  /** The project environment's variables (image env, containerEnv, remoteEnv), under the agent's own. */
  env: Record<string, string>;
  /** The environment's setup phase (lifecycle commands), run after hydrate and before the network step. */
  setup?: SetupPlan;
  /** The setup's prepared environment: reused (setup skipped) or kept after setup (§16). */
  prepared?: PreparedState;
  /** The project base the sandbox's volumes were made from, and how to make the sandbox again without it (its fallback). */
  base?: { claim: BaseClaim; remake(): Promise<Sandbox> };
  /** Whether the project's base is written anew from this run's copy once it is wiped (§11). */
  refreshBase: boolean;
}

/** What hydrate (and setup after it) hands on: the copy in the sandbox and the host's baseline of it. */
export interface RunWorkspaceState {
  sandbox: Sandbox;
  /** The run's baseline as read on the host (a follow-up's: the project with the previous result laid over it). */
  snapshot: ProjectSnapshot;
  hydrated: HydratedWorkspace;
}

/** What hydrate hands on: the workspace, and a reused prepared environment's home being copied into place meanwhile. */
export interface HydratedSandbox extends RunWorkspaceState {
  preparedHome?: Promise<RunResult>;
}

/** What an agent run's network step hands on: the run token, the model proxy inside the sandbox, the policy, the MCP gateway. */
export interface AgentGrant {
  token: string;
  /** The run token as bytes, removed from command output before it is logged or shown. */
  tokenBytes: Buffer;
  /** The model proxy's port inside the sandbox. */
  sandboxPort: number;
  credential?: SandboxCredential;
  /** The wider network policy (absent: `none`). */
  network?: RunNetwork;
  /** The run's MCP gateway and its port inside the sandbox (docs/architecture.md §20). */
  mcp?: { gateway: RunMcpGateway; sandboxPort: number };
}

/** What the agent step hands on: how the agent ended (a failure: the pipeline still collects) and the commands' environment. */
export interface AgentEnd {
  failure?: unknown;
  /** The environment host-run commands and the check get: the agent's minus its provider settings and token. */
  commandEnv: Record<string, string>;
}

/** What the run service sees of a live agent run's agent (its events, its process, the proxy's account of its calls). */
export interface AgentLive {
  /** The run token and what came with it, once the network step made them (host-run commands redact it). */
  grant?: AgentGrant;
  process?: ChannelProcess;
  pendingApprovals: Map<string, string>;
  errors: Array<{ message: string; status?: number }>;
  /** The provider answered 401/403 to a call with the real key (seen by the proxy, not the sandbox). */
  keyRefused?: { provider: string; status: number };
  /** The provider's server failed the last call (unreachable, or a 5xx), as the proxy saw it; a later answer clears it. */
  upstreamFailed?: { provider: string; baseUrl?: string; code?: string; status: number };
  summary?: string;
  finishReason?: string;
}

/** One run in progress in this process: its input, what it made so far, and its bookkeeping. */
interface LiveRunBase {
  id: string;
  /** What every step reads of the sandbox's settings (an agent run's is its whole input). */
  input: SandboxArgs;
  /** What the steps made so far: for the wipe and the service's calls, never read by a later step. */
  made: MadeSoFar;
  /** Paths the live change feed reported (bounded): a hint for collect, like everything from inside. */
  changeHints: Set<string>;
  /** Commands the host runs in the sandbox (host-run commands, an MCP client's), killed when the agent or session ends. */
  hostCommands: Set<ChannelProcess>;
  /** Their environment: the agent's minus its provider settings and token, or a session's (set once the sandbox is ready for them). */
  commandEnv: Record<string, string>;
  cancelRequested: boolean;
  timedOut: boolean;
  /** Aborted when the user cancels or the time limit passes: what waits on the sandbox (setup) stops at once. */
  stop: AbortController;
  seq: number;
  audit: AuditLog;
  terminal: RunTerminal;
  /** What lives as long as the steps (token, forwarded port, watchers, egress proxy); disposed before the wipe. */
  disposables: DisposableStore;
  /** Commands for the audit log: the host's own (host-run) apart from the agent's claims. */
  commands: CommandLedger;
  done: Promise<StoredRun>;
  /** The lifecycle state last written (the audit's `from`). */
  status: RunStatus;
}

/** A live agent run: its spec and what the service sees of its agent. */
export interface LiveAgentRun extends LiveRunBase {
  kind: 'agent';
  spec: AgentRunSpec;
  agent: AgentLive;
}

/** A live MCP session: no agent fields at all. */
export interface LiveSessionRun extends LiveRunBase {
  kind: 'session';
  spec: SessionRunSpec;
}

/** One run in progress in this process, of either kind (run-spec.ts). */
export type LiveRun = LiveAgentRun | LiveSessionRun;

/** What the run service gives the steps: its dependencies and how a run's progress is recorded. */
export interface StepHost {
  readonly deps: RunServiceDeps;
  readonly workspace: RunWorkspace;
  /** A lifecycle transition: audit record, stored status, status event. */
  transition(run: LiveRun, to: RunStatus, phase?: string): Promise<void>;
  update(run: LiveRun, patch: RunUpdate): Promise<void>;
  /** Updates without waiting (event handlers). */
  updateLater(run: LiveRun, patch: RunUpdate): void;
  /** Appends to the audit log without waiting (event handlers). */
  auditLater<T extends AuditRecordType>(run: LiveRun, type: T, data: AuditRecordData[T]): void;
  emitEvent(run: LiveRun, event: RunEventBody): void;
  /** The run's changed files changed: viewers refetch. */
  filesChanged(run: LiveRun): void;
  /** Starts the agent in the sandbox and pumps its events until it exits; throws when it failed. */
  runAgent(run: LiveAgentRun, sandbox: Sandbox, argv: string[], env: Record<string, string>, cwd?: string): Promise<void>;
}

/** A command the agent asked the host to run (host-run commands). */
export type CommandRequest = AgentEventOf<'command_request'>;
