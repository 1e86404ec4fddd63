import { z } from 'zod';
import { AgentEvent } from './agent-events';
import { EnvironmentChoiceText, LocalEnvName, RunEnvironment } from './environments';
import { ErrorInfo } from './errors';
import { AttemptGroupId, ProviderId, RunId } from './ids';

/**
 * Runs: one task on one project with one agent and one provider/model, in its own sandbox
 * (docs/architecture.md §1). Status changes are pushed (`runs:onDidChangeStatus`), agent activity is pushed as
 * numbered run events (`runs:onDidEvent`) and can be replayed from disk (`runs:events`).
 */

export const AgentKind = z.enum(['builtin', 'claude-code', 'codex', 'custom']);
export type AgentKind = z.infer<typeof AgentKind>;

/**
 * Who drove a run: one of the agents, or `mcp` — an MCP session, where a client on the host (Claude
 * Code, Codex, an IDE) drove the sandbox through `airlock mcp` (docs/architecture.md §17).
 */
export const RunAgent = z.enum([...AgentKind.options, 'mcp']);
export type RunAgent = z.infer<typeof RunAgent>;

/** `ask` pauses before each shell command until the user approves or denies it. */
export const ApprovalMode = z.enum(['auto', 'ask']);
export type ApprovalMode = z.infer<typeof ApprovalMode>;

/**
 * `container`: a hardened container (runc); `gvisor`: the same container under gVisor's user-space
 * kernel (runsc), so the agent never talks to the host kernel directly; `vm`: a micro-VM with its own kernel.
 */
export const Isolation = z.enum(['container', 'gvisor', 'vm']);
export type Isolation = z.infer<typeof Isolation>;

/** `none`: loopback + the model proxy only. Wider policies are explicit choices, audited. */
export const NetworkPolicy = z.enum(['none', 'allowlist', 'open']);
export type NetworkPolicy = z.infer<typeof NetworkPolicy>;

/**
 * How much of the project's git history the sandbox's repository holds (docs/architecture.md §11):
 * `none` (one commit of the checked-out tree, no history), the last N commits, or `all`.
 */
export const GitHistory = z.union([z.enum(['none', 'all']), z.number().int().min(1).max(1_000_000)]);
export type GitHistory = z.infer<typeof GitHistory>;
/** The default: recent history helps an agent; old commits are where forgotten secrets live. */
export const DEFAULT_GIT_HISTORY: GitHistory = 50;

/** The lifecycle of docs/architecture.md §1. */
export const RunStatus = z.enum(['queued', 'preparing', 'running', 'collecting', 'wiping', 'done', 'failed', 'cancelled', 'interrupted']);
export type RunStatus = z.infer<typeof RunStatus>;

/** States a run never leaves. */
export const FINAL_RUN_STATUSES: readonly RunStatus[] = ['done', 'failed', 'cancelled', 'interrupted'];
/** Whether a run has ended (it never leaves this state). */
export function isFinalStatus(status: RunStatus): boolean {
  return FINAL_RUN_STATUSES.includes(status);
}

export const RunLimits = z.strictObject({
  /** Wall-clock limit of the whole run. */
  timeoutSec: z.number().int().min(10).max(7 * 24 * 3600).default(1800),
  budgetTokens: z.number().int().positive().optional(),
  budgetUsd: z.number().positive().optional(),
});
export type RunLimits = z.infer<typeof RunLimits>;

/**
 * The check of a run (`npm test`, say; docs/architecture.md §18): run by the host in the sandbox after
 * the agent ended and every process it left was killed, with the run's environment and network
 * policy but no run token. Its exit code, duration and output are the host's own observation.
 */
export const RunCheckSpec = z.strictObject({
  command: z.string().trim().min(1, 'enter the check command').max(4000),
  timeoutSec: z.number().int().min(1).max(3600).default(600),
});
export type RunCheckSpec = z.infer<typeof RunCheckSpec>;

/** What the host measured of a run's check. `passed` is exit code 0 within the time limit. */
export const RunCheckResult = z.object({
  command: z.string(),
  exitCode: z.number().int().nullable(),
  passed: z.boolean(),
  timedOut: z.boolean(),
  durationMs: z.number().nonnegative(),
  /** Head and tail of stdout and stderr together, run token removed (at most about 64 KiB). */
  output: z.string(),
  outputBytes: z.number().int().nonnegative(),
  truncated: z.boolean(),
  /** Processes the agent left behind that the host killed before the check. */
  killedProcesses: z.number().int().nonnegative(),
  /** How the check was started: shell, its fresh home, the fixed PATH, and the names of the variables it got. */
  environment: z.object({ shell: z.string(), home: z.string(), path: z.string(), variables: z.array(z.string()) }).optional(),
  /** Why the check could not run (no sandbox, the run was cancelled, the channel closed). */
  notRun: z.string().optional(),
});
export type RunCheckResult = z.infer<typeof RunCheckResult>;

/** A run that is one attempt of an attempt group (docs/architecture.md §18). */
export const RunAttempt = z.object({ groupId: AttemptGroupId, index: z.number().int().nonnegative() });
export type RunAttempt = z.infer<typeof RunAttempt>;

/**
 * What a request refused by the user's own gateway rules does (docs/architecture.md §2.8): `ask` holds
 * it (bounded) for the user's Allow once / Allow for this project / Deny; `deny` refuses it at once,
 * for runs nobody watches (a non-interactive `airlock run`, CI). Absent: `ask`.
 */
export const NetworkApprovalMode = z.enum(['ask', 'deny']);
export type NetworkApprovalMode = z.infer<typeof NetworkApprovalMode>;

/**
 * A host the user names as internal (docs/architecture.md §2.8): reachable although it resolves to a
 * private (LAN) address. One exact name: no wildcard, no address, no port.
 */
export const InternalHostName = z
  .string()
  .trim()
  .toLowerCase()
  .max(253)
  .regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?$/, 'an internal host is one exact host name (no wildcard, no IP address, no port)')
  .refine((h) => !/^[0-9]+$/.test(h.replace(/\.$/, '').split('.').pop() ?? ''), 'an internal host is a host name, not an IP address');

export const StartRunInput = z
  .strictObject({
    /** Absolute path of the project on the host; it is copied in, never written during the run. */
    projectDir: z.string().min(1, 'choose a project folder'),
    task: z.string().trim().min(1, 'describe the task').max(100_000),
    agent: AgentKind.default('builtin'),
    /** Command line for the `custom` agent (aider, opencode…). */
    customCommand: z.string().trim().min(1).max(4000).optional(),
    provider: ProviderId,
    model: z.string().trim().min(1, 'choose a model').max(200),
    approval: ApprovalMode.default('auto'),
    isolation: Isolation.default('container'),
    network: NetworkPolicy.default('none'),
    /** Domains reachable through the logging egress proxy when `network` is `allowlist`. */
    allowlist: z.array(z.string().min(1).max(253)).max(200).optional(),
    /** Egress gateway rules (`HOST read-only`, `HOST git-push=agent/`…), in order; allow-list policy only. */
    egressRules: z.array(z.string().min(1).max(400)).max(200).optional(),
    /** Names of the gateway secrets this run may use (values stay in the keychain). */
    secrets: z.array(z.string().regex(/^[a-z][a-z0-9_-]{0,39}$/)).max(20).optional(),
    /** Whether a request a gateway rule refused waits for the user (`ask`, the default) or is refused at once (`deny`). */
    networkApprovals: NetworkApprovalMode.optional(),
    /** The user's MCP servers this run's agent may use through the run's MCP gateway (credentials stay on the host; §20). */
    mcpServers: z.array(z.string().regex(/^[a-z][a-z0-9-]{0,23}$/, 'an MCP server name (see `airlock mcp-servers list`)')).max(10).optional(),
    /** Allow-listed hosts that may resolve to private (LAN) addresses: a company git server or registry. */
    internalHosts: z.array(InternalHostName).max(50).optional(),
    limits: RunLimits.default({ timeoutSec: 1800 }),
    /** History in the sandbox's repository; absent: the `gitHistory` setting. */
    gitHistory: GitHistory.optional(),
    /** The project environment (docs/architecture.md §16); absent: the `defaultEnvironment` setting, else `auto`. */
    environment: EnvironmentChoiceText.optional(),
    /** Host variables the devcontainer may read through `${localEnv:NAME}` (explicit, recorded; never secrets). */
    allowLocalEnv: z.array(LocalEnvName).max(50).optional(),
    /** Hosts the setup phase may reach beyond the registries the project's manifests imply (allow-list entries). */
    setupAllowlist: z.array(z.string().min(1).max(253)).max(200).optional(),
    /** The user accepts the project's devcontainer as it is now (building it runs the project's code); recorded. */
    trustEnvironment: z.boolean().optional(),
    /** A command the host runs in the sandbox once the agent's processes are gone (docs/architecture.md §18). */
    check: RunCheckSpec.optional(),
  })
  .superRefine((v, ctx) => {
    if (v.agent === 'custom' && !v.customCommand) {
      ctx.addIssue({ code: 'custom', path: ['customCommand'], message: 'the custom agent needs a command line' });
    }
    if (v.network !== 'allowlist' && (v.egressRules?.length || v.secrets?.length)) {
      ctx.addIssue({ code: 'custom', path: ['network'], message: 'gateway rules and secrets need the allow-list network policy' });
    }
    if (v.network !== 'allowlist' && v.internalHosts?.length) {
      ctx.addIssue({ code: 'custom', path: ['internalHosts'], message: 'internal hosts need the allow-list network policy (--network allowlist --allow HOST)' });
    }
    if (v.network === 'allowlist' && !v.allowlist?.length) {
      ctx.addIssue({ code: 'custom', path: ['allowlist'], message: 'list at least one domain for the allow-list policy' });
    }
  });
export type StartRunInput = z.input<typeof StartRunInput>;
export type StartRunArgs = z.output<typeof StartRunInput>;

export const Usage = z.object({
  /** Input tokens not served from the provider's prompt cache. */
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  /** Input read from the provider's prompt cache (billed at its own, lower rate). */
  cacheReadTokens: z.number().int().nonnegative().default(0),
  /** Input written to the provider's prompt cache (billed at its own, higher rate). */
  cacheWriteTokens: z.number().int().nonnegative().default(0),
  /** Where the price table knows the model (docs/architecture.md §9). */
  costUsd: z.number().nonnegative().optional(),
  requests: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof Usage>;

/** A command waiting for the user's approval (approval mode `ask`). */
export const PendingApproval = z.object({
  requestId: z.string(),
  command: z.string(),
  cwd: z.string().optional(),
  requestedAt: z.string(),
});
export type PendingApproval = z.infer<typeof PendingApproval>;

/** What lists and status pushes show about a run. */
/** Where and when a run's result was last applied (working tree, or a branch of `target`). */
export const RunApplied = z.object({ at: z.string(), target: z.string(), branch: z.string().optional(), files: z.array(z.string()) });
export type RunApplied = z.infer<typeof RunApplied>;

/**
 * A run that continues an earlier one (a follow-up turn, docs/architecture.md §15): its sandbox
 * starts from the project plus the parent's result, and the agent's conversation is carried over
 * when the agent and wire format are the parent's (`fresh` otherwise). The first run of a thread
 * has no `thread`; every later turn names the first (`rootRunId`) and the one it continues.
 */
export const RunThread = z.object({
  rootRunId: RunId,
  parentRunId: RunId,
  /** 2 for the first follow-up. */
  turn: z.number().int().min(2),
  conversation: z.enum(['carried', 'fresh']),
  /** Continued from this checkpoint of the parent instead of its result (docs/architecture.md §19). */
  checkpoint: z.number().int().positive().optional(),
});
export type RunThread = z.infer<typeof RunThread>;

export const RunSummary = z.object({
  id: RunId,
  task: z.string(),
  projectDir: z.string(),
  agent: RunAgent,
  /** MCP sessions: the client's name and version as it introduced itself (a claim, for display). */
  mcpClient: z.string().max(200).optional(),
  provider: ProviderId,
  model: z.string(),
  status: RunStatus,
  /** What the run is doing right now, in words ("copying project", "agent working"…). */
  phase: z.string().optional(),
  createdAt: z.string(),
  startedAt: z.string().nullable(),
  endedAt: z.string().nullable(),
  usage: Usage,
  /** Number of changed files so far. */
  changedFiles: z.number().int().nonnegative(),
  error: ErrorInfo.optional(),
  isolation: Isolation,
  network: NetworkPolicy,
  approval: ApprovalMode,
  pendingApproval: PendingApproval.optional(),
  /** Set once the result was applied (the latest apply). */
  applied: RunApplied.optional(),
  /** Set when this run continues an earlier one. */
  thread: RunThread.optional(),
  /** Set when this run is one attempt of an attempt group. */
  attempt: RunAttempt.optional(),
  /** The host's check, once it ran. */
  check: RunCheckResult.optional(),
  /** The devcontainer's `forwardPorts`, offered as preview ports while the run is live (§16). */
  forwardPorts: z.array(z.number().int().min(1).max(65535)).max(100).optional(),
});
export type RunSummary = z.infer<typeof RunSummary>;

/** A file left out of the copy into the sandbox, and why. */
export const ExcludedFile = z.object({ path: z.string(), reason: z.string() });
export type ExcludedFile = z.infer<typeof ExcludedFile>;

/** Everything known about one run. */
export const RunRecord = RunSummary.extend({
  customCommand: z.string().optional(),
  allowlist: z.array(z.string()).optional(),
  egressRules: z.array(z.string()).optional(),
  secrets: z.array(z.string()).optional(),
  /** `deny`: requests the gateway's rules refused were not put to the user (absent: `ask`). */
  networkApprovals: NetworkApprovalMode.optional(),
  /** The MCP servers the run's gateway served (docs/architecture.md §20). */
  mcpServers: z.array(z.string()).optional(),
  /** Hosts this run was given as internal (`--internal-host`); the project's own are in its network record (§2.8). */
  internalHosts: z.array(z.string()).optional(),
  /** History the sandbox's repository held (a follow-up turn keeps it). */
  gitHistory: GitHistory.optional(),
  limits: z.object({ timeoutSec: z.number(), budgetTokens: z.number().optional(), budgetUsd: z.number().optional() }),
  excludedFiles: z.array(ExcludedFile),
  /** The project environment that ran, and what of its configuration was not applied (§16). */
  environment: RunEnvironment.optional(),
  /** The agent's closing summary. */
  summary: z.string().optional(),
  /** Path of the final patch on the host, once collected. */
  patchPath: z.string().optional(),
  /** The wipe and its verification (docs/architecture.md §2.5). */
  wipe: z
    .object({
      /** Nothing labelled with the run was left. */
      verified: z.boolean(),
      /** What was removed (containers, volumes, disks…). */
      removed: z.array(z.string()).default([]),
      leftovers: z.array(z.string()),
      /**
       * The warm-pool id the sandbox was started under before this run took it: its resources
       * (`removed`) are named after that id, not the run's, and were checked by that label.
       */
      pooledAs: z.string().optional(),
      durationMs: z.number().nonnegative().optional(),
      at: z.string(),
    })
    .optional(),
});
export type RunRecord = z.infer<typeof RunRecord>;

export const ExcludedPreview = z.object({
  projectDir: z.string(),
  excluded: z.array(ExcludedFile),
  includedFiles: z.number().int().nonnegative(),
  includedBytes: z.number().int().nonnegative(),
  isGitRepo: z.boolean(),
});
export type ExcludedPreview = z.infer<typeof ExcludedPreview>;

/** A status transition of a run, as it appears in the run's event log. */
export const RunStatusEvent = z.object({
  type: z.literal('status'),
  status: RunStatus,
  phase: z.string().optional(),
  error: ErrorInfo.optional(),
});

/**
 * A connection the run's egress proxy (on the host) denied under the allow-list policy. Typed and
 * host-observed: the UI and CLI offer "Allow" from these, never from text the sandbox printed.
 */
export const NetworkBlockedEvent = z.object({
  type: z.literal('network_blocked'),
  host: z.string().max(300),
  port: z.number().int().min(1).max(65535),
  method: z.string().max(20),
  reason: z.string().max(500).optional(),
  /** An intercepted request (egress gateway): its path, query values redacted. */
  path: z.string().max(500).optional(),
  /** The gateway rule that refused it. */
  rule: z.string().max(400).optional(),
});
export type NetworkBlockedEvent = z.infer<typeof NetworkBlockedEvent>;

/** How a user answers a network question: this request only, the rule for this run, for this project, or no. */
export const NetworkAnswer = z.enum(['once', 'run', 'project', 'deny']);
export type NetworkAnswer = z.infer<typeof NetworkAnswer>;

/**
 * An intercepted request a user rule refused is waiting for the user (kind `request`), or the agent
 * proposes a rule (kind `proposal`). Host-made: `rule` is the host's own text of what an allow adds;
 * `reason` is the agent's words (cleaned, bounded) and must be shown as such.
 */
export const NetworkApprovalEvent = z.object({
  type: z.literal('network_approval'),
  id: z.string().max(64),
  kind: z.enum(['request', 'proposal']),
  host: z.string().max(300),
  port: z.number().int().min(1).max(65535),
  method: z.string().max(80),
  path: z.string().max(500),
  rule: z.string().max(400).optional(),
  deniedBy: z.string().max(500).optional(),
  reason: z.string().max(400).optional(),
  answers: z.array(NetworkAnswer),
  expiresAt: z.string(),
});
export type NetworkApprovalEvent = z.infer<typeof NetworkApprovalEvent>;

/** A network question was answered (by the user), timed out, or its request went away. */
export const NetworkApprovalResolvedEvent = z.object({
  type: z.literal('network_approval_resolved'),
  id: z.string().max(64),
  answer: NetworkAnswer,
  by: z.enum(['user', 'timeout', 'closed']),
});
export type NetworkApprovalResolvedEvent = z.infer<typeof NetworkApprovalResolvedEvent>;

/**
 * The environment a run uses, once prepare resolved it (docs/architecture.md §16): its name, what of
 * the configuration is not applied, and — when `auto` could not use the devcontainer it found — the
 * fallback to Airlock's own image with its one-line reason. Host-made.
 */
export const EnvironmentEvent = z.object({
  type: z.literal('environment'),
  name: z.string().max(700),
  kind: z.enum(['airlock', 'image', 'devcontainer']),
  notApplied: z.array(z.object({ field: z.string().max(200), reason: z.string().max(1000) })).max(200),
  fallback: z.object({ config: z.string().max(1000), reason: z.string().max(1000) }).optional(),
});
export type EnvironmentEvent = z.infer<typeof EnvironmentEvent>;

/**
 * The setup phase as it goes (docs/architecture.md §16): a lifecycle command started, printed output,
 * is still running after a quiet interval, or ended. Host-made (the command is the configuration's
 * text; the output is the command's own, shown as such); `elapsedMs` since the command started.
 */
export const SetupEvent = z.object({
  type: z.literal('setup'),
  phase: z.enum(['started', 'output', 'still_running', 'exited', 'stopped']),
  /** `postCreateCommand`, or `postCreateCommand.name` for an object form's entry. */
  step: z.string().max(200),
  command: z.string().max(2000),
  elapsedMs: z.number().int().nonnegative(),
  /** With `output`: what the command printed (bounded per event). */
  data: z.string().max(65_536).optional(),
  /** With `exited`. */
  exitCode: z.number().int().nullable().optional(),
});
export type SetupEvent = z.infer<typeof SetupEvent>;

/**
 * The sandbox reached its cap of connections open at once into the host's services, so connections
 * to `service` were refused (reset), never silently (docs/architecture.md §4). Host-observed: sent at
 * the first refusal, and with `ended` and the total once connections are accepted again (if more
 * than one was refused).
 */
export const ConnectionsRefusedEvent = z.object({
  type: z.literal('connections_refused'),
  /** What the sandbox tried to reach: `model proxy`, `egress proxy`. */
  service: z.string().max(100),
  limit: z.number().int().positive(),
  refused: z.number().int().positive(),
  ended: z.boolean(),
});
export type ConnectionsRefusedEvent = z.infer<typeof ConnectionsRefusedEvent>;

/** How a user answers an MCP call that waits: this call, this tool for the rest of the run, or no. */
export const McpAnswer = z.enum(['once', 'run', 'deny']);
export type McpAnswer = z.infer<typeof McpAnswer>;

/**
 * A call through the run's MCP gateway waits for the user (docs/architecture.md §20): the tool's rule
 * is ask (`why: policy`), or its description is not the one pinned when the server was enabled
 * (`changed`, `new`: then `description` is what the server says now). Host-made, except `args`: the
 * agent's arguments (cleaned, bounded), to be shown as the agent's words.
 */
export const McpApprovalEvent = z.object({
  type: z.literal('mcp_approval'),
  id: z.string().max(64),
  server: z.string().max(64),
  tool: z.string().max(200),
  why: z.enum(['policy', 'changed', 'new']),
  description: z.string().max(1100).optional(),
  args: z.string().max(1100),
  answers: z.array(McpAnswer),
  expiresAt: z.string(),
});
export type McpApprovalEvent = z.infer<typeof McpApprovalEvent>;

/** An MCP question was answered (by the user), timed out, or its call went away. */
export const McpApprovalResolvedEvent = z.object({
  type: z.literal('mcp_approval_resolved'),
  id: z.string().max(64),
  answer: McpAnswer,
  by: z.enum(['user', 'timeout', 'closed']),
});
export type McpApprovalResolvedEvent = z.infer<typeof McpApprovalResolvedEvent>;

/** One finished call through the run's MCP gateway: who decided and how it went (no arguments, no answer). */
export const McpCallRunEvent = z.object({
  type: z.literal('mcp_call'),
  server: z.string().max(64),
  tool: z.string().max(200),
  decision: z.enum(['allow', 'deny']),
  by: z.string().max(40).optional(),
  reason: z.string().max(500).optional(),
  isError: z.boolean(),
  durationMs: z.number().int().nonnegative(),
});
export type McpCallRunEvent = z.infer<typeof McpCallRunEvent>;

/**
 * The body of one run event: a status transition, a host-observed network event, the environment
 * and its setup, or one of the agent's events (agent-events.ts).
 */
export const RunEventBody = z.union([RunStatusEvent, NetworkBlockedEvent, NetworkApprovalEvent, NetworkApprovalResolvedEvent, McpApprovalEvent, McpApprovalResolvedEvent, McpCallRunEvent, ConnectionsRefusedEvent, EnvironmentEvent, SetupEvent, AgentEvent]);
export type RunEventBody = z.infer<typeof RunEventBody>;

/** One numbered event of a run, as stored in its event log. `seq` increases by one per run. */
export const RunEvent = z.object({
  runId: RunId,
  seq: z.number().int().nonnegative(),
  at: z.string(),
  event: RunEventBody,
});
export type RunEvent = z.infer<typeof RunEvent>;

/** A sandbox port published on the host's loopback interface. */
export const PreviewPort = z.object({
  sandboxPort: z.number().int(),
  hostPort: z.number().int(),
  /** `http://localhost:<hostPort>/`: another site than the browser UI on 127.0.0.1 (docs/architecture.md §12). */
  url: z.string(),
});
export type PreviewPort = z.infer<typeof PreviewPort>;

/** How long a user's "allow" of a denied host lasts. */
export const NetworkAllowScope = z.enum(['once', 'run', 'project']);
export type NetworkAllowScope = z.infer<typeof NetworkAllowScope>;

const RunRef = z.strictObject({ runId: RunId });

/**
 * A follow-up turn: a new run on the parent's project, starting from the parent's result, with the
 * same agent, provider, model and policies unless given here. A different agent (or wire format)
 * than the parent's starts a fresh conversation (recorded as `thread.conversation: 'fresh'`).
 */
export const ContinueRunInput = z.strictObject({
  /** The run to continue (any turn of a thread: an earlier one forks the thread). */
  runId: RunId,
  task: z.string().trim().min(1, 'describe the follow-up').max(100_000),
  agent: AgentKind.optional(),
  customCommand: z.string().trim().min(1).max(4000).optional(),
  provider: ProviderId.optional(),
  model: z.string().trim().min(1).max(200).optional(),
  approval: ApprovalMode.optional(),
  /** Absent: the parent's. */
  networkApprovals: NetworkApprovalMode.optional(),
  limits: RunLimits.optional(),
  /** Start from this checkpoint of the parent instead of its result ("Continue from here", docs/architecture.md §19). */
  checkpoint: z.number().int().positive().max(100_000).optional(),
});
export type ContinueRunInput = z.input<typeof ContinueRunInput>;
export type ContinueRunArgs = z.output<typeof ContinueRunInput>;

export const runsContracts = {
  /** Starts a run; resolves once it is queued (status pushes follow). */
  'runs:start': { input: StartRunInput, output: RunSummary },
  /** Starts a follow-up turn of a finished run (docs/architecture.md §15); resolves once it is queued. */
  'runs:continue': { input: ContinueRunInput, output: RunSummary },
  /** Which files of a project would be left out of the copy, and why. */
  'runs:previewExcluded': { input: z.strictObject({ projectDir: z.string().min(1, 'choose a project folder') }), output: ExcludedPreview },
  /** Runs, newest first. */
  'runs:list': {
    input: z.strictObject({ limit: z.number().int().positive().max(10_000).optional(), status: z.array(RunStatus).optional() }).default({}),
    output: z.array(RunSummary),
  },
  'runs:get': { input: RunRef, output: RunRecord },
  /** Stops the agent, keeps the diff so far, wipes the sandbox. */
  'runs:cancel': { input: RunRef, output: RunSummary },
  /** Deletes a finished run's folder (record, logs, patch). */
  'runs:delete': { input: RunRef, output: z.object({ deleted: z.boolean() }) },
  /** Answers an approval request of a run in `ask` mode. */
  'runs:approve': {
    input: z.strictObject({ runId: RunId, requestId: z.string().min(1), approved: z.boolean(), reason: z.string().max(2000).optional() }),
    output: z.object({ accepted: z.boolean() }),
  },
  /** Replays a run's stored events from `afterSeq` (exclusive), in pages. */
  'runs:events': {
    input: z.strictObject({ runId: RunId, afterSeq: z.number().int().min(-1).default(-1), limit: z.number().int().positive().max(5000).default(1000) }),
    output: z.object({ events: z.array(RunEvent), nextSeq: z.number().int(), done: z.boolean() }),
  },
  /**
   * Opens an interactive shell (its own PTY and bash) in a live run's sandbox; its I/O goes through
   * the terminals contracts. At most `MAX_SHELLS_PER_RUN` are open per run (`CONFLICT` past that).
   */
  'runs:openShell': {
    input: z.strictObject({ runId: RunId, cols: z.number().int().min(2).max(1000).default(80), rows: z.number().int().min(2).max(1000).default(24) }),
    output: z.object({ terminalId: z.string() }),
  },
  /**
   * Publishes a port a process in a live run's sandbox listens on, on a random `127.0.0.1` port of
   * the host (never another interface). Published ports close when the run ends.
   */
  'runs:publishPort': {
    input: z.strictObject({ runId: RunId, port: z.number().int().min(1, 'a port is 1–65535').max(65535, 'a port is 1–65535') }),
    output: PreviewPort,
  },
  /** The ports a live run has published (however they were published); empty once it has ended. Terminal links open only these. */
  'runs:previewPorts': { input: RunRef, output: z.array(PreviewPort) },
  /**
   * Lets a host the egress proxy denied through, while the run goes on (allow-list policy only):
   * `once` for the next connection, `run` for the rest of this run, `project` for later runs too.
   */
  'runs:allowNetwork': {
    input: z.strictObject({
      runId: RunId,
      host: z.string().trim().min(1, 'enter a host name').max(253),
      port: z.number().int().min(1).max(65535).optional(),
      scope: NetworkAllowScope.default('run'),
    }),
    output: z.object({ allowed: z.boolean() }),
  },
  /**
   * Answers a `network_approval` event while its request waits: `once` lets that request through,
   * `run`/`project` put the host's rule in force (and `project` remembers it in the user's data for
   * the project's later runs), `deny` refuses. `answered` is false when the question is no longer open.
   */
  'runs:answerNetwork': {
    input: z.strictObject({ runId: RunId, id: z.string().min(1).max(64), answer: NetworkAnswer }),
    output: z.object({ answered: z.boolean() }),
  },
  /**
   * Answers an `mcp_approval` event while its call waits (docs/architecture.md §20): `once` lets that
   * call through, `run` the tool's calls for the rest of the run, `deny` refuses it (a tool error for
   * the agent). `answered` is false when the question is no longer open.
   */
  'runs:answerMcp': {
    input: z.strictObject({ runId: RunId, id: z.string().min(1).max(64), answer: McpAnswer }),
    output: z.object({ answered: z.boolean() }),
  },
} as const;

export const runsEvents = {
  /** A run changed status, phase, usage, changed-file count or pending approval. */
  'runs:onDidChangeStatus': RunSummary,
  /**
   * A new event of a live run. Command output reaches viewers through `terminals:onDidData`
   * (batched and bounded); transports do not forward `command_output` events here.
   */
  'runs:onDidEvent': RunEvent,
} as const;
