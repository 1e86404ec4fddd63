import { z } from 'zod';
import { ErrorInfo } from '../../contracts/errors';
import { RunId } from '../../contracts/ids';

/** Lifecycle states (DESIGN.md §1). */
export const RunStatus = z.enum(['queued', 'preparing', 'running', 'collecting', 'wiping', 'done', 'failed', 'cancelled', 'interrupted']);
export type RunStatus = z.infer<typeof RunStatus>;

/** States a run never leaves. */
export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set(['done', 'failed', 'cancelled', 'interrupted']);

export const AgentId = z.enum(['builtin', 'claude-code', 'codex', 'custom']);
export type AgentId = z.infer<typeof AgentId>;

export const ChangedFile = z.object({
  path: z.string(),
  kind: z.enum(['added', 'modified', 'deleted', 'renamed']),
  oldPath: z.string().optional(),
  binary: z.boolean().optional(),
  /** Lines added / removed (text files). */
  additions: z.number().int().nonnegative().optional(),
  deletions: z.number().int().nonnegative().optional(),
});
export type ChangedFile = z.infer<typeof ChangedFile>;

export const ExcludedFile = z.object({ path: z.string(), reason: z.string() });
export type ExcludedFile = z.infer<typeof ExcludedFile>;

export const RunUsage = z.object({
  inputTokens: z.number().int().nonnegative(),
  outputTokens: z.number().int().nonnegative(),
  costUsd: z.number().nonnegative().optional(),
  modelCalls: z.number().int().nonnegative(),
});
export type RunUsage = z.infer<typeof RunUsage>;

export const RunIsolation = z.object({
  kind: z.enum(['docker', 'qemu', 'lima', 'wsl']),
  image: z.string().optional(),
  network: z.enum(['none', 'allowlist', 'open']),
  /** The engine's id of the sandbox while it exists (for the reaper after a crash). */
  sandboxId: z.string().optional(),
  /** VMs: how the guest ran (`tcg` = software emulation) and why, including a retry under TCG after KVM failed. */
  accel: z.enum(['kvm', 'hvf', 'tcg']).optional(),
  accelNote: z.string().optional(),
  /** VMs: restored from the image's snapshot, or a cold kernel boot. */
  vmStartedFrom: z.enum(['snapshot', 'boot']).optional(),
});
export type RunIsolation = z.infer<typeof RunIsolation>;

export const RunWipe = z.object({
  removed: z.array(z.string()),
  leftovers: z.array(z.string()),
  durationMs: z.number().nonnegative(),
  verifiedAt: z.string(),
});
export type RunWipe = z.infer<typeof RunWipe>;

/**
 * The run record (`run.json`): everything the history, `airlock show` and the UI need about one
 * run. Unknown fields are kept (loose object), so a newer Airlock's records still load.
 */
export const RunRecord = z.looseObject({
  id: RunId,
  task: z.string(),
  projectDir: z.string(),
  agent: AgentId,
  /** The command line of a `custom` agent. */
  customCommand: z.string().optional(),
  provider: z.string(),
  model: z.string(),
  status: RunStatus,
  approval: z.enum(['auto', 'ask']).default('auto'),
  createdAt: z.string(),
  updatedAt: z.string(),
  startedAt: z.string().optional(),
  endedAt: z.string().optional(),
  isolation: RunIsolation,
  limits: z
    .object({
      timeoutSec: z.number().positive().optional(),
      budgetTokens: z.number().int().positive().optional(),
      budgetUsd: z.number().positive().optional(),
      maxSteps: z.number().int().positive().optional(),
    })
    .default({}),
  usage: RunUsage.default({ inputTokens: 0, outputTokens: 0, modelCalls: 0 }),
  changedFiles: z.array(ChangedFile).default([]),
  excluded: z.array(ExcludedFile).default([]),
  /** The agent's own summary of its work. */
  summary: z.string().optional(),
  error: ErrorInfo.optional(),
  wipe: RunWipe.optional(),
  /** The project's state when the run started, for a three-way apply (git HEAD, tree digest…). */
  baseline: z.record(z.string(), z.unknown()).optional(),
  /** Anchor of the audit log (count + last hash), to catch a log cut at a record boundary. */
  audit: z.object({ count: z.number().int().nonnegative(), head: z.string() }).optional(),
  /** Set when the result was applied. */
  applied: z.object({ at: z.string(), target: z.string(), branch: z.string().optional(), files: z.array(z.string()) }).optional(),
  /** Anchor of the apply log (count + last hash), like `audit`. */
  applyLog: z.object({ count: z.number().int().nonnegative(), head: z.string() }).optional(),
});
export type RunRecord = z.infer<typeof RunRecord>;
/** What `RunStore.create` takes: defaults are filled in. */
export type RunRecordInput = z.input<typeof RunRecord>;

/** A new run id: `r-<base36 ms>-<8 hex>` (sortable by creation time). */
export function newRunId(now: number = Date.now()): string {
  const rand = Array.from(crypto.getRandomValues(new Uint8Array(4)), (b) => b.toString(16).padStart(2, '0')).join('');
  return `r-${now.toString(36)}-${rand}`;
}
