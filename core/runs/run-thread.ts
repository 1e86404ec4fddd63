import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { AirlockError } from '../../contracts/errors';
import { isFinalStatus, StartRunInput, type ContinueRunArgs, type RunThread, type StartRunArgs } from '../../contracts/runs';
import type { AgentAdapter } from '../agents';
import type { PreviousResult } from '../workspace/thread-result';
import { loadRunResult } from './run-apply';
import type { StoredRun } from './run-record';
import { checkpointEntry, loadCheckpointSession } from './checkpoints';
import { loadSession, type CarriedSession } from './run-session';
import type { RunStore } from './run-store';

/**
 * Follow-up turns (docs/architecture.md §15): a new run whose sandbox starts from the project plus
 * the parent's result, with the agent's conversation carried when the agent and wire format stay.
 * What crosses from the parent: its result (from its host store) and its agent's session files
 * (stored at collect, token removed). Nothing else; the parent's sandbox is gone, verified.
 */

/** What a follow-up turn takes from the run it continues. */
export interface Continuation {
  thread: RunThread;
  /** When the parent's sandbox was verified gone. */
  parentWipedAt: string;
  /** The thread's total up to the parent (its own result for a first turn), from its host store. */
  previous: PreviousResult;
  /** The parent agent's session files, when the conversation is carried. */
  session?: CarriedSession;
}

/** Where a run keeps its agent's session files between turns. */
export function sessionFile(store: RunStore, runId: string): string {
  return path.join(store.paths(runId).artifacts, 'session.json');
}

/**
 * The run a follow-up turn will be, and what it carries: the parent's project, agent, provider,
 * model and policies unless overridden. The parent must have ended, been wiped (verified) and have
 * a collected result.
 */
export async function resolveContinuation(
  store: RunStore,
  args: ContinueRunArgs,
  deps: { agent(kind: StartRunArgs['agent']): AgentAdapter; providerFormat(provider: string): Promise<'anthropic' | 'openai'> },
): Promise<{ input: StartRunArgs; continuation: Continuation; sessionId: string }> {
  const parent = await store.get(args.runId);
  if (!isFinalStatus(parent.status)) throw new AirlockError('CONFLICT', `Run ${parent.id} is still ${parent.status}; continue it once it has ended.`);
  if (!parent.wipe?.verified) {
    throw new AirlockError('CONFLICT', `Run ${parent.id}'s sandbox was not verified gone, so it cannot be continued; run 'airlock doctor' to reap leftovers, then start a new run.`);
  }
  // From a checkpoint (docs/architecture.md §19): its tree, and the built-in agent's conversation as of that turn.
  const from = args.checkpoint !== undefined ? await checkpointEntry(store, parent.id, args.checkpoint) : undefined;
  if (from && !from.final && parent.thread) {
    throw new AirlockError('INVALID_INPUT', `Run ${parent.id} is itself a follow-up turn; continue from its result, or from a checkpoint of the thread's first run.`, { field: 'checkpoint' });
  }
  const previous = await (from && !from.final ? loadRunResult(store, parent.id, 'turn', args.checkpoint) : loadRunResult(store, parent.id, 'thread')).catch((err: unknown) => {
    if (err instanceof AirlockError && err.kind === 'NOT_FOUND') throw new AirlockError('CONFLICT', `Run ${parent.id} has no collected result to continue from; start a new run instead.`);
    throw err;
  });
  if (!args.agent && parent.agent === 'mcp') throw new AirlockError('INVALID_INPUT', `Run ${parent.id} was an MCP session, driven by a client outside Airlock; name the agent that should continue from its result.`, { field: 'agent' });
  const agent = args.agent ?? (parent.agent as StartRunArgs['agent']);
  const provider = args.provider ?? parent.provider;
  const model = args.model ?? (provider === parent.provider ? parent.model : undefined);
  if (!model) throw new AirlockError('INVALID_INPUT', `Name the model for provider ${provider} (the parent run used ${parent.provider}).`, { field: 'model' });
  const customCommand = args.customCommand ?? (agent === parent.agent ? parent.customCommand : undefined);
  const input = StartRunInput.parse({
    projectDir: parent.projectDir,
    task: args.task,
    agent,
    ...(customCommand ? { customCommand } : {}),
    provider,
    model,
    approval: args.approval ?? parent.approval,
    isolation: parent.isolation,
    network: parent.network,
    ...(parent.allowlist ? { allowlist: parent.allowlist } : {}),
    ...(parent.egressRules ? { egressRules: parent.egressRules } : {}),
    ...(parent.secrets ? { secrets: parent.secrets } : {}),
    // The same agent keeps the parent's MCP servers (§20); another agent starts without them.
    ...(parent.mcpServers?.length && agent === parent.agent ? { mcpServers: parent.mcpServers } : {}),
    ...(parent.internalHosts ? { internalHosts: parent.internalHosts } : {}),
    ...((args.networkApprovals ?? parent.networkApprovals) ? { networkApprovals: args.networkApprovals ?? parent.networkApprovals } : {}),
    ...(parent.gitHistory !== undefined ? { gitHistory: parent.gitHistory } : {}),
    limits: args.limits ?? parent.limits,
  });
  const sameConversation = agent === parent.agent && (await deps.providerFormat(provider)) === (await deps.providerFormat(parent.provider));
  const fromCheckpoint = from && !from.final && args.checkpoint !== undefined ? args.checkpoint : undefined;
  const session = !sameConversation || !deps.agent(agent).session ? undefined : fromCheckpoint !== undefined ? await loadCheckpointSession(store, parent.id, fromCheckpoint) : await loadSession(sessionFile(store, parent.id));
  const thread: RunThread = {
    rootRunId: parent.thread?.rootRunId ?? parent.id,
    parentRunId: parent.id,
    turn: (parent.thread?.turn ?? 1) + 1,
    conversation: session ? 'carried' : 'fresh',
    ...(args.checkpoint !== undefined ? { checkpoint: args.checkpoint } : {}),
  };
  return {
    input,
    continuation: { thread, parentWipedAt: parent.wipe.at, previous: { result: previous.result, repo: previous.repo }, ...(session ? { session } : {}) },
    sessionId: session?.id ?? randomUUID(),
  };
}

/** Why a follow-up starts a fresh conversation, in words (CLI and run log). */
export function freshConversationReason(parent: Pick<StoredRun, 'agent' | 'provider'>, input: Pick<StoredRun, 'agent' | 'provider'> & { thread?: { checkpoint?: number } }): string {
  if (parent.agent !== input.agent) return `a different agent (${input.agent}) than the parent's (${parent.agent}) starts a fresh conversation`;
  if (parent.provider !== input.provider) return `another provider's wire format starts a fresh conversation`;
  if (input.thread?.checkpoint !== undefined) return `the conversation up to checkpoint ${input.thread.checkpoint} is kept only for the built-in agent; this turn starts a fresh one from that checkpoint's files`;
  return `the parent run kept no conversation to continue`;
}
