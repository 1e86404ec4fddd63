import { z } from 'zod';
import { ApplyInput, ApplyResult } from './diffs';
import { AttemptGroupId, ProviderId, RunId } from './ids';
import { AgentKind, RunStatus, StartRunInput } from './runs';

/**
 * Attempt groups (docs/architecture.md §18): one task, several runs at once — agents × models — each
 * in its own sandbox, from the same project state and environment, with an optional check the host
 * runs in each sandbox once its agent is gone. `attempts:compare` puts them side by side.
 */

/** One attempt: an agent and (optionally) its provider and model; the rest comes from the group's run settings. */
export const AttemptSpec = z.strictObject({
  agent: AgentKind,
  provider: ProviderId.optional(),
  model: z.string().trim().min(1).max(200).optional(),
  customCommand: z.string().trim().min(1).max(4000).optional(),
});
export type AttemptSpec = z.infer<typeof AttemptSpec>;

/** At most this many changed files listed per attempt in a comparison. */
export const MAX_LISTED_FILES = 200;

/** At most this many attempts in one group. */
export const MAX_ATTEMPTS = 8;

export const StartAttemptsInput = z.strictObject({
  /** The run every attempt makes (task, project, policies, check); each attempt overrides agent, provider and model. */
  run: StartRunInput,
  attempts: z.array(AttemptSpec).min(1, 'name at least one attempt').max(MAX_ATTEMPTS, `at most ${MAX_ATTEMPTS} attempts in one group`),
});
export type StartAttemptsInput = z.input<typeof StartAttemptsInput>;

/** The group as stored (`<home>/attempt-groups/<groupId>.json`) and listed. */
export const AttemptGroup = z.object({
  id: AttemptGroupId,
  createdAt: z.string(),
  projectDir: z.string(),
  task: z.string(),
  check: z.string().optional(),
  /** How many attempts ran at once; the others waited as `queued`. */
  concurrency: z.number().int().min(1),
  attempts: z.array(z.object({ index: z.number().int().nonnegative(), runId: RunId, agent: AgentKind, provider: ProviderId, model: z.string() })),
  /** The attempt the user applied, and what was verified of the others' sandboxes then. */
  chosen: z
    .object({
      runId: RunId,
      at: z.string(),
      others: z.array(z.object({ runId: RunId, verified: z.boolean(), leftovers: z.array(z.string()) })),
    })
    .optional(),
});
export type AttemptGroup = z.infer<typeof AttemptGroup>;

/** The check as compare shows it (host-measured; null when the group has none or it did not run yet). */
export const AttemptCheck = z.object({ exitCode: z.number().int().nullable(), passed: z.boolean(), durationMs: z.number().nonnegative(), timedOut: z.boolean(), notRun: z.string().optional() });
export type AttemptCheck = z.infer<typeof AttemptCheck>;

/** One attempt, side by side with the others. */
export const AttemptComparison = z.object({
  index: z.number().int().nonnegative(),
  runId: RunId,
  agent: AgentKind,
  provider: ProviderId,
  model: z.string(),
  status: RunStatus,
  check: AttemptCheck.nullable(),
  filesChanged: z.number().int().nonnegative(),
  linesAdded: z.number().int().nonnegative(),
  linesRemoved: z.number().int().nonnegative(),
  tokens: z.object({ input: z.number().int().nonnegative(), output: z.number().int().nonnegative(), cacheRead: z.number().int().nonnegative(), cacheWrite: z.number().int().nonnegative(), total: z.number().int().nonnegative() }),
  costUsd: z.number().nonnegative().nullable(),
  /** From the run's creation (queued time included) to its end; null while it runs. */
  wallMs: z.number().nonnegative().nullable(),
  /** Model requests the proxy forwarded (each is one turn of the agent's loop). */
  turns: z.number().int().nonnegative(),
  riskyFiles: z.array(z.object({ path: z.string(), reason: z.string() })),
  /** The changed files (host-derived), at most `MAX_LISTED_FILES`; `filesChanged` counts them all. */
  files: z.array(z.object({ path: z.string(), status: z.string(), additions: z.number().int().nonnegative(), deletions: z.number().int().nonnegative() })),
  /**
   * Changed files the check itself may read (its script, a test, the runner's configuration): a pass
   * after such a change is unproven (core/runs/check-files.ts).
   */
  checkFiles: z.array(z.object({ path: z.string(), reason: z.string() })),
  /** The sandbox's wipe was verified (nothing labelled with the run left). */
  wipeVerified: z.boolean(),
  error: z.string().optional(),
  applied: z.boolean(),
});
export type AttemptComparison = z.infer<typeof AttemptComparison>;

/** A check that passed while the attempt changed the check's own files proves nothing. */
export function checkUnproven(a: Pick<AttemptComparison, 'check' | 'checkFiles'>): boolean {
  return a.check?.passed === true && a.checkFiles.length > 0;
}

export const Comparison = z.object({
  groupId: AttemptGroupId,
  task: z.string(),
  projectDir: z.string(),
  createdAt: z.string(),
  check: z.string().nullable(),
  attempts: z.array(AttemptComparison),
  chosen: AttemptGroup.shape.chosen,
});
export type Comparison = z.infer<typeof Comparison>;

const GroupRef = z.strictObject({ groupId: AttemptGroupId });

export const attemptsContracts = {
  /** Queues every attempt of a new group (the concurrency setting decides how many run at once). */
  'attempts:start': { input: StartAttemptsInput, output: AttemptGroup },
  /** Groups, newest first. */
  'attempts:list': { input: z.strictObject({ limit: z.number().int().positive().max(1000).optional() }).default({}), output: z.array(AttemptGroup) },
  /** The attempts side by side, from their run records and host-derived results. */
  'attempts:compare': { input: GroupRef, output: Comparison },
  /** The comparison as a Markdown or JSON report for the team. */
  'attempts:export': { input: z.strictObject({ groupId: AttemptGroupId, format: z.enum(['markdown', 'json']) }), output: z.object({ filename: z.string(), mimeType: z.string(), text: z.string() }) },
  /**
   * Applies one attempt through the review/apply flow (`diffs:apply`: exactly the reviewed bytes),
   * then wipes the other attempts' sandboxes again and verifies by label that nothing is left.
   */
  'attempts:apply': {
    input: z.strictObject({ groupId: AttemptGroupId, apply: ApplyInput }),
    output: z.object({ result: ApplyResult, others: z.array(z.object({ runId: RunId, verified: z.boolean(), leftovers: z.array(z.string()) })) }),
  },
} as const;

export const attemptsEvents = {
  /** An attempt of the group changed status (refetch the comparison). */
  'attempts:onDidChange': z.object({ groupId: AttemptGroupId }),
} as const;
