import type { z } from 'zod';
import type { AttemptGroup, Comparison, StartAttemptsInput } from '../../contracts/attempts';
import type { ApplyInput, ApplyResult, ChangedFile } from '../../contracts/diffs';
import { AirlockError } from '../../contracts/errors';
import { newAttemptGroupId } from '../../contracts/ids';
import { StartRunInput, isFinalStatus, type StartRunArgs } from '../../contracts/runs';
import { DisposableStore, Emitter, type Disposable, type Event } from '../common/disposable';
import type { AttemptGroupStore } from './attempt-group-store';
import { compareAttempt, comparisonOf } from './attempt-report';
import { Slots } from './attempt-slots';
import type { StoredRun } from './run-record';
import type { RunService } from './run-service';
import { debugLog } from '../common/debug-log';

type StartAttemptsArgs = z.output<typeof StartAttemptsInput>;
type ApplyArgs = z.output<typeof ApplyInput>;
type ChosenOthers = NonNullable<AttemptGroup['chosen']>['others'];

export interface AttemptGroupsDeps {
  runs: Pick<RunService, 'start' | 'cancel' | 'onDidChangeStatus'>;
  getRun(runId: string): Promise<StoredRun>;
  groups: AttemptGroupStore;
  /** How many attempts of a group run at once (the setting, else from the machine). */
  concurrency(): Promise<number>;
  /** The run's changed files as `diffs:list` serves them (host-derived, risky ones marked). */
  changedFiles(runId: string): Promise<ChangedFile[]>;
  /** The review/apply flow (`diffs:apply`). */
  apply(input: ApplyArgs): Promise<ApplyResult>;
  /** Wipes whatever is labelled with the run and checks that nothing remains. */
  wipeAgain(run: StoredRun): Promise<{ leftovers: string[] }>;
}

/**
 * Attempt groups (docs/architecture.md §18): one task, N runs — one per agent × model — each in its
 * own sandbox with the group's settings, check included, recorded under one group id. The runs are
 * ordinary runs (record, audit, wipe); a group holds at most `concurrency` of them past `queued`.
 */
export class AttemptGroups implements Disposable {
  private readonly changeEmitter = new Emitter<{ groupId: string }>();
  private readonly subscriptions = new DisposableStore();
  /** An attempt changed status: refetch the group's comparison. */
  readonly onDidChange: Event<{ groupId: string }> = this.changeEmitter.event;

  constructor(private readonly deps: AttemptGroupsDeps) {
    this.subscriptions.add(
      deps.runs.onDidChangeStatus((run) => {
        if (run.attempt) this.changeEmitter.fire({ groupId: run.attempt.groupId });
      }),
    );
  }

  /**
   * Validates every attempt's run first (bad input starts nothing), then queues them all. A run that
   * cannot start (a missing key, an agent that does not speak the provider's format) cancels the
   * ones already queued: a group starts whole or not at all.
   */
  async start(input: StartAttemptsArgs): Promise<AttemptGroup> {
    const inputs: StartRunArgs[] = input.attempts.map((a, index) => {
      const parsed = StartRunInput.safeParse({ ...input.run, agent: a.agent, provider: a.provider ?? input.run.provider, model: a.model ?? input.run.model, ...(a.customCommand ? { customCommand: a.customCommand } : {}) });
      if (!parsed.success) throw new AirlockError('INVALID_INPUT', `attempt ${index + 1} (${a.agent}${a.model ? `:${a.model}` : ''}): ${parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')}`);
      return parsed.data;
    });
    const id = newAttemptGroupId();
    const concurrency = Math.max(1, await this.deps.concurrency());
    const slots = new Slots(concurrency);
    const started: StoredRun[] = [];
    try {
      for (const [index, run] of inputs.entries()) {
        started.push(await this.deps.runs.start(run, undefined, { attempt: { groupId: id, index }, slot: () => slots.acquire() }));
      }
    } catch (err) {
      await Promise.all(started.map((r) => this.deps.runs.cancel(r.id).catch(debugLog.swallow('attempts.start.cancel'))));
      throw err;
    }
    return this.deps.groups.create({
      id,
      createdAt: new Date().toISOString(),
      projectDir: started[0]?.projectDir ?? input.run.projectDir,
      task: input.run.task,
      ...(input.run.check ? { check: input.run.check.command } : {}),
      concurrency,
      attempts: started.map((r, index) => ({ index, runId: r.id, agent: inputs[index]?.agent ?? 'builtin', provider: r.provider, model: r.model })),
    });
  }

  list(limit?: number): Promise<AttemptGroup[]> {
    return this.deps.groups.list(limit);
  }

  /** The attempts side by side (docs/architecture.md §18). */
  async compare(groupId: string): Promise<Comparison> {
    const group = await this.deps.groups.get(groupId);
    const attempts = await Promise.all(
      group.attempts.map(async (slot) => {
        const run = await this.deps.getRun(slot.runId);
        return compareAttempt(slot, run, await this.deps.changedFiles(run.id), group.chosen?.runId, group.check);
      }),
    );
    return comparisonOf(group, attempts);
  }

  /**
   * Applies one attempt (exactly its reviewed bytes, through the apply flow), then wipes the others'
   * sandboxes once more and verifies by label that nothing of them is left. Every attempt must
   * have ended: one still running could not be wiped under the user's feet.
   */
  async apply(groupId: string, apply: ApplyArgs): Promise<{ result: ApplyResult; others: ChosenOthers }> {
    const group = await this.deps.groups.get(groupId);
    if (!group.attempts.some((a) => a.runId === apply.runId)) throw new AirlockError('INVALID_INPUT', `Run ${apply.runId} is not an attempt of group ${groupId}; 'airlock compare ${groupId}' lists its attempts.`);
    const runs = await Promise.all(group.attempts.map((a) => this.deps.getRun(a.runId)));
    const unfinished = runs.filter((r) => !isFinalStatus(r.status));
    if (unfinished.length) throw new AirlockError('CONFLICT', `Attempts still running: ${unfinished.map((r) => r.id).join(', ')}. Wait until every attempt has ended (or cancel it), then apply one.`);
    const result = await this.deps.apply(apply);
    const others = await Promise.all(
      runs
        .filter((r) => r.id !== apply.runId)
        .map(async (r) => {
          const { leftovers } = await this.deps.wipeAgain(r).catch((err: unknown) => ({ leftovers: [`unverified: ${(err as Error).message}`] }));
          return { runId: r.id, verified: leftovers.length === 0, leftovers };
        }),
    );
    await this.deps.groups.update(groupId, (g) => ({ ...g, chosen: { runId: apply.runId, at: new Date().toISOString(), others } }));
    this.changeEmitter.fire({ groupId });
    return { result, others };
  }

  dispose(): void {
    this.subscriptions.dispose();
    this.changeEmitter.dispose();
  }
}
