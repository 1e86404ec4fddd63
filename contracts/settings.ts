import { z } from 'zod';
import { ProviderId } from './ids';
import { AgentKind, ApprovalMode, GitHistory, Isolation, NetworkPolicy } from './runs';

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

/** User preferences and defaults for the new-run form. */
export const Settings = z.object({
  theme: z.enum(['system', 'light', 'dark']),
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
  /**
   * Prices that add a model to the built-in price table or correct one, keyed by model-id prefix
   * (docs/architecture.md §9). They drive the cost shown and `--budget-usd`.
   */
  prices: z.record(z.string().min(1).max(200), ModelPrice).optional(),
  /**
   * How QEMU runs VM sandboxes: `auto` (default) boots a test guest under KVM once per QEMU/kernel
   * version and falls back to software emulation (`tcg`) when it fails. `AIRLOCK_VM_ACCEL` wins.
   */
  vmAccel: z.enum(['auto', 'kvm', 'hvf', 'tcg']).optional(),
  /**
   * Which container engine to use: `auto` (default) takes DOCKER_HOST, CONTAINER_HOST, then the first
   * Docker or Podman socket found; `docker`/`podman` look only for that engine. `AIRLOCK_ENGINE` wins.
   */
  engine: z.enum(['auto', 'docker', 'podman']).optional(),
  /**
   * The container engine to use, over `DOCKER_HOST` and the Docker context: an address
   * (`ssh://me@build-box`, `tcp://build-box:2376` with DOCKER_TLS_VERIFY, `unix:///…`) or a Docker
   * context's name. `--engine-host` wins for one command. Read at start.
   */
  engineHost: z.string().max(500).optional(),
  /** Allow a remote engine over plain tcp:// or TLS without certificate checks (off: refused, with why). */
  engineAllowInsecure: z.boolean().optional(),
  /** Project folders of the latest runs, newest first (at most 8): the New run form offers them. */
  recentProjects: z.array(z.string()).max(8).optional(),
});
export type Settings = z.infer<typeof Settings>;

/** About the running app (shown in doctor and the window title). */
export const AppInfo = z.object({
  version: z.string(),
  platform: z.string(),
  dataDir: z.string(),
});
export type AppInfo = z.infer<typeof AppInfo>;

export const settingsContracts = {
  'settings:get': { input: z.strictObject({}).default({}), output: Settings },
  /** Merges the given fields and returns the result. */
  'settings:update': { input: Settings.partial().strict(), output: Settings },
  'settings:appInfo': { input: z.strictObject({}).default({}), output: AppInfo },
} as const;

export const settingsEvents = {
  'settings:onDidChange': Settings,
} as const;
