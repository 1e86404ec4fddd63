import { z } from 'zod';
import { EnvironmentChoiceText } from './environments';
import { ProviderId } from './ids';
import { AgentKind, ApprovalMode, GitHistory, Isolation, NetworkPolicy } from './runs';
import { McpProjectGrant } from './mcp';
import { DoctorCheck } from './sandboxes';

/** A model's price in USD per million tokens; cache rates default to the input rate when absent. */
export const ModelPrice = z.strictObject({
  input: z.number().nonnegative(),
  output: z.number().nonnegative(),
  /** Input read from the provider's prompt cache. */
  cacheRead: z.number().nonnegative().optional(),
  /** Input written to the provider's prompt cache. */
  cacheWrite: z.number().nonnegative().optional(),
});
export type ModelPrice = z.infer<typeof ModelPrice>;

/** The app's colours: light, dark, or the system's. */
export const ThemeSetting = z.enum(['system', 'light', 'dark']);
export type ThemeSetting = z.infer<typeof ThemeSetting>;
/** The `vmAccel` setting: `auto`, or one QEMU accelerator. */
export const VmAccelSetting = z.enum(['auto', 'kvm', 'hvf', 'tcg']);
export type VmAccelSetting = z.infer<typeof VmAccelSetting>;
/** The `engine` setting: `auto`, or only Docker or only Podman. */
export const EngineSetting = z.enum(['auto', 'docker', 'podman']);
export type EngineSetting = z.infer<typeof EngineSetting>;

/** User preferences and defaults for the new-run form. */
export const Settings = z.object({
  theme: ThemeSetting,
  notifications: z.boolean(),
  /** Keep prompts and model answers in the run's log (off by default). */
  transcripts: z.boolean(),
  defaultAgent: AgentKind,
  defaultProvider: ProviderId.optional(),
  defaultModel: z.string().optional(),
  defaultApproval: ApprovalMode,
  defaultIsolation: Isolation,
  defaultNetwork: NetworkPolicy,
  defaultTimeoutSec: z.number().int().min(10),
  defaultAllowlist: z.array(z.string()),
  /** How much git history the sandbox's repository holds (default 50 commits; `none`, N or `all`). */
  gitHistory: GitHistory.optional(),
  /** The project environment a run uses when it names none (docs/architecture.md §16); absent: `auto`. */
  defaultEnvironment: EnvironmentChoiceText.optional(),
  /**
   * Prices that add a model to the built-in price table or correct one, keyed by model-id prefix
   * (docs/architecture.md §9). They drive the cost shown and `--budget-usd`.
   */
  prices: z.record(z.string().min(1).max(200), ModelPrice).optional(),
  /**
   * How QEMU runs VM sandboxes: `auto` (default) boots a test guest under KVM once per QEMU/kernel
   * version and falls back to software emulation (`tcg`) when it fails. `AIRLOCK_VM_ACCEL` wins.
   */
  vmAccel: VmAccelSetting.optional(),
  /**
   * Which container engine to use: `auto` (default) takes DOCKER_HOST, CONTAINER_HOST, then the first
   * Docker or Podman socket found; `docker`/`podman` look only for that engine. `AIRLOCK_ENGINE` wins.
   */
  engine: EngineSetting.optional(),
  /**
   * The container engine to use, over `DOCKER_HOST` and the Docker context: an address
   * (`ssh://me@build-box`, `tcp://build-box:2376` with DOCKER_TLS_VERIFY, `unix:///…`) or a Docker
   * context's name. `--engine-host` wins for one command. A saved change applies from the next sandbox; runs in
   * progress keep theirs (docs/architecture.md §13, "Changing engines").
   */
  engineHost: z.string().max(500).optional(),
  /** Allow a remote engine over plain tcp:// or TLS without certificate checks (off: refused, with why). */
  engineAllowInsecure: z.boolean().optional(),
  /**
   * Serve the MCP door over Streamable HTTP on 127.0.0.1 from the app (off by default): a bearer
   * token, and the UI host's Host and Origin checks (docs/architecture.md §17).
   */
  mcpHttp: z.boolean().optional(),
  /**
   * Project folders MCP clients may use, and what they may do there (docs/architecture.md §17). Any
   * other folder is asked for in the app, or refused when no app is open.
   */
  mcpProjects: z.array(McpProjectGrant).max(200).optional(),
  /**
   * How many attempts of one attempt group run at once (docs/architecture.md §18); the rest wait as
   * `queued`. Absent: from the machine's cores and memory (`defaultAttemptConcurrency`).
   */
  attemptsConcurrency: z.number().int().min(1).max(32).optional(),
  /** Project folders of the latest runs, newest first (at most 8): the New run form offers them. */
  recentProjects: z.array(z.string()).max(8).optional(),
});
export type Settings = z.infer<typeof Settings>;

/** About the running app (shown in doctor and the window title). */
export const AppInfo = z.object({
  version: z.string(),
  platform: z.string(),
  dataDir: z.string(),
  /**
   * Environment variables of this process that win over settings (`AIRLOCK_ENGINE_HOST` from
   * `--engine-host`, `AIRLOCK_ENGINE`, `AIRLOCK_ENGINE_ALLOW_INSECURE`, `AIRLOCK_VM_ACCEL`): the
   * Settings screen says the saved value waits for a start without them.
   */
  overrides: z.array(z.string()).optional(),
});
export type AppInfo = z.infer<typeof AppInfo>;

/** The engine fields of the Settings screen as entered, not saved yet. */
export const EngineCheckInput = z.strictObject({
  engine: Settings.shape.engine,
  engineHost: Settings.shape.engineHost,
  engineAllowInsecure: Settings.shape.engineAllowInsecure,
});
export type EngineCheckInput = z.infer<typeof EngineCheckInput>;

/** What Check connection found: the setup check's engine result, and the engine when it answered. */
export const EngineCheckResult = z.object({
  /** The same check as `airlock doctor`'s `docker.engine`: status, what was found, what to do. */
  check: DoctorCheck,
  engine: z
    .object({
      kind: z.enum(['docker', 'podman']),
      version: z.string(),
      apiVersion: z.string(),
      /** `unix:///var/run/docker.sock`, `ssh://me@box`, `tcp://box:2376`. */
      address: z.string(),
      transport: z.enum(['unix', 'npipe', 'tcp', 'tls', 'ssh']),
      /** Reached over the network (tcp, tls, ssh): the project copy and the run token go there. */
      remote: z.boolean(),
      /** What chose it: the address entered, DOCKER_HOST, a Docker context, a local socket. */
      source: z.string(),
      /** "Docker 28.2 over SSH at build-box". */
      summary: z.string(),
    })
    .optional(),
});
export type EngineCheckResult = z.infer<typeof EngineCheckResult>;

export const settingsContracts = {
  'settings:get': { input: z.strictObject({}).default({}), output: Settings },
  /** Merges the given fields and returns the result. */
  'settings:update': { input: Settings.partial().strict(), output: Settings },
  'settings:appInfo': { input: z.strictObject({}).default({}), output: AppInfo },
  /**
   * Check connection: validates the entered engine address (INVALID_INPUT, field `engineHost`) and
   * runs the setup check's engine check against it. Nothing is saved; overrides from the
   * environment are left out, so the values entered are what is checked.
   */
  'settings:checkEngine': { input: EngineCheckInput, output: EngineCheckResult },
} as const;

export const settingsEvents = {
  'settings:onDidChange': Settings,
} as const;
