import { z } from 'zod';

/**
 * Checkpoints inside a run (docs/architecture.md §19): after each agent turn that changed files,
 * the host collects the workspace exactly as at the end of the run. Each one can be reviewed and
 * applied on its own ("up to here") and continued from; the last is the run's result.
 */
export const Checkpoint = z.object({
  /** 1-based, in the order they were taken. */
  n: z.number().int().positive(),
  /** When the host took it (ISO time). */
  at: z.string(),
  /** The model request of the run that ended the turn (the host's turn boundary); absent for the final one. */
  request: z.number().int().positive().optional(),
  /** Changed files against the run's baseline, and lines added / removed. */
  files: z.number().int().nonnegative(),
  additions: z.number().int().nonnegative(),
  deletions: z.number().int().nonnegative(),
  /** SHA-256 of this checkpoint's patch: what a review of it shows and apply checks. */
  patchSha256: z.string().regex(/^[0-9a-f]{64}$/),
  patchBytes: z.number().int().nonnegative(),
  /** The run's result (its last checkpoint). */
  final: z.boolean().optional(),
  /** The agent's conversation up to here was kept (built-in agent): Continue from here carries it. */
  conversation: z.boolean().optional(),
});
export type Checkpoint = z.infer<typeof Checkpoint>;

/** A run's checkpoints, oldest first, and whether a bound stopped further ones. */
export const CheckpointList = z.object({
  checkpoints: z.array(Checkpoint),
  /** Set once a bound (count or bytes) left later turns without a checkpoint; the result is always the last. */
  limited: z.object({ reason: z.enum(['count', 'bytes']), atRequest: z.number().int().nonnegative() }).optional(),
});
export type CheckpointList = z.infer<typeof CheckpointList>;

/** A checkpoint number as calls take it. */
export const CheckpointNumber = z.number().int().positive().max(100_000);
