import { z } from 'zod';
import type { StartRunArgs } from '../../contracts/runs';
import type { AgentAdapter } from '../agents';
import type { Continuation } from './run-thread';

/**
 * What a run is (docs/architecture.md §1): one of two kinds, and each pipeline (run-steps.ts) reads
 * only its own. An agent run has an agent, a provider, a run token; an MCP session (§17) has none of
 * them: the client on the host drives the sandbox. What both share is the sandbox's own settings.
 */

/** The kinds of run, as the run record stores them (`kind`; records written before it are migrated in run-record.ts). */
export const RunKind = z.enum(['agent', 'session']);
export type RunKind = z.infer<typeof RunKind>;

/** The fields of a run's input that only an agent run has. */
type AgentOnlyField = 'task' | 'agent' | 'customCommand' | 'provider' | 'model' | 'approval' | 'mcpServers' | 'check';

/** What every run's sandbox is made from: the project, isolation, network policy, limits, environment. */
export type SandboxArgs = Omit<StartRunArgs, AgentOnlyField>;

/** An agent run: its whole input, the agent's adapter, the agent's conversation and, for a follow-up turn, what it continues. */
export interface AgentRunSpec {
  kind: 'agent';
  args: StartRunArgs;
  agent: AgentAdapter;
  /** The id of the agent's conversation: the parent's when it is carried, else a new one (run-thread.ts). */
  sessionId: string;
  /** A follow-up turn: what it takes from the run it continues (docs/architecture.md §15). */
  continuation?: Continuation;
}

/** An MCP session: no agent, no provider, no run token; the client drives the sandbox through `control`. */
export interface SessionRunSpec {
  kind: 'session';
  control: SessionControl;
}

export type RunSpec = AgentRunSpec | SessionRunSpec;

/**
 * An MCP session's control (docs/architecture.md §17): the run's middle is the client's use of the
 * sandbox, from `ready` until `end()` (destroy, disconnect, idle timeout, time limit).
 */
export interface SessionControl {
  /** What the client called itself (a claim; display only). */
  client: string;
  /** The sandbox accepts commands (false once the session is ending). */
  open: boolean;
  /** Settles when the sandbox is running and hydrated. */
  ready: Promise<void>;
  markReady(): void;
  /** Settles when the session was ended. */
  ended: Promise<void>;
  end(reason: string): void;
  endReason?: string;
  /** What of the project is copied besides the defaults (`airlock sandbox exec --include/--exclude`). */
  snapshot?: { include?: string[]; exclude?: string[] };
}

/** Makes a session's control: open until `end(reason)`, ready once the pipeline says so. */
export function sessionControl(client: string, snapshot?: SessionControl['snapshot']): SessionControl {
  let markReady = () => {};
  let end = () => {};
  const control: SessionControl = {
    client,
    open: true,
    ready: new Promise<void>((resolve) => (markReady = resolve)),
    markReady: () => markReady(),
    ended: new Promise<void>((resolve) => (end = resolve)),
    ...(snapshot ? { snapshot } : {}),
    end(reason) {
      if (!control.open) return;
      control.open = false;
      control.endReason = reason;
      end();
    },
  };
  return control;
}

/** The image variant a run's sandbox needs: an agent's own, else the base (a session runs no agent). */
export function imageVariantOf(spec: RunSpec): 'base' | 'agents' {
  return spec.kind === 'agent' ? spec.agent.imageVariant : 'base';
}
