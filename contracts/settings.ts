import { z } from 'zod';
import { ProviderId } from './ids';
import { AgentKind, ApprovalMode, Isolation, NetworkPolicy } from './runs';

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
  /**
   * How QEMU runs VM sandboxes: `auto` (default) boots a test guest under KVM once per QEMU/kernel
   * version and falls back to software emulation (`tcg`) when it fails. `AIRLOCK_VM_ACCEL` wins.
   */
  vmAccel: z.enum(['auto', 'kvm', 'hvf', 'tcg']).optional(),
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
