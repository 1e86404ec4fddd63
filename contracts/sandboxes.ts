import { z } from 'zod';

/**
 * First run / doctor: is the machine ready to run sandboxes, and the sandbox image build.
 */

export const CheckStatus = z.enum(['ok', 'warn', 'fail', 'skipped']);
export type CheckStatus = z.infer<typeof CheckStatus>;

/** One readiness check (engine, permissions, keychain, image, disk…). */
export const DoctorCheck = z.object({
  /** Stable id, e.g. `docker.engine`, `keychain`, `image`. */
  id: z.string(),
  label: z.string(),
  status: CheckStatus,
  /** What was found. */
  detail: z.string(),
  /** What the user should do when the status is not ok. */
  fix: z.string().optional(),
  /** Whether Airlock can fix it itself (e.g. build the image with `sandboxes:buildImage`). */
  fixAction: z.enum(['build-image', 'add-key', 'replace-key', 'open-keys']).optional(),
  /** The isolation check only: whether virtual-machine isolation can be chosen here, and why not. */
  vm: z.object({ available: z.boolean(), reason: z.string() }).optional(),
});
export type DoctorCheck = z.infer<typeof DoctorCheck>;

export const DoctorReport = z.object({
  /** True when a run can start (no `fail`). */
  ready: z.boolean(),
  checks: z.array(DoctorCheck),
  checkedAt: z.string(),
});
export type DoctorReport = z.infer<typeof DoctorReport>;

/** Image build progress, pushed while `sandboxes:buildImage` runs. */
export const ImageBuildProgress = z.object({
  buildId: z.string(),
  phase: z.enum(['check', 'context', 'build', 'done', 'failed']),
  message: z.string(),
  /** 0..1 where known. */
  fraction: z.number().min(0).max(1).optional(),
});
export type ImageBuildProgress = z.infer<typeof ImageBuildProgress>;

export const BuildImageInput = z.strictObject({
  /** `agents` also installs Claude Code and Codex CLI. */
  variant: z.enum(['base', 'agents']).default('base'),
  /** Rebuild even when an up-to-date image exists. */
  force: z.boolean().default(false),
});

/** An error Airlock handled by itself (a best-effort step that failed); see core/common/debug-log.ts. */
export const DebugNote = z.object({ at: z.string(), where: z.string(), message: z.string() });
export type DebugNote = z.infer<typeof DebugNote>;

export const sandboxesContracts = {
  /** Runs every readiness check. */
  'sandboxes:doctor': { input: z.strictObject({}).default({}), output: DoctorReport },
  /** Builds the sandbox image; resolves when done, progress arrives as `sandboxes:onDidBuildProgress`. */
  'sandboxes:buildImage': {
    input: BuildImageInput,
    output: z.object({ buildId: z.string(), image: z.string(), durationMs: z.number() }),
  },
  /** The last errors Airlock handled by itself, oldest first (`airlock --debug` prints them live). */
  'sandboxes:debugLog': { input: z.strictObject({}).default({}), output: z.object({ notes: z.array(DebugNote) }) },
} as const;

export const sandboxesEvents = {
  'sandboxes:onDidBuildProgress': ImageBuildProgress,
} as const;
