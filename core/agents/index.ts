import { AirlockError } from '../../contracts/errors';
import type { AgentKind as AgentId } from '../../contracts/runs';
import type { AgentAdapter } from './agent-adapter';
import { builtinAdapter } from './builtin-adapter';
import { claudeCodeAdapter } from './claude-code-adapter';
import { codexAdapter } from './codex-adapter';
import { customAdapter } from './custom-adapter';

export type { AgentAdapter, AgentCommand, AgentCommandContext, AgentOutputParser, AgentSessionFiles } from './agent-adapter';
export { commandOutputBytes, commandOutputEvent } from './agent-adapter';
export { AGENT_DIR_IN_IMAGE, AGENT_SCRIPT_IN_IMAGE, AGENT_SCRATCH_DIR } from './agent-image-paths';

const adapters: Record<AgentId, AgentAdapter> = {
  builtin: builtinAdapter,
  'claude-code': claudeCodeAdapter,
  codex: codexAdapter,
  custom: customAdapter,
};

/** The adapter for an agent id; INVALID_INPUT for an unknown one. */
export function getAgentAdapter(id: string): AgentAdapter {
  const adapter = (adapters as Record<string, AgentAdapter | undefined>)[id];
  if (!adapter) throw new AirlockError('INVALID_INPUT', `Unknown agent '${id}'. Choose one of: ${Object.keys(adapters).join(', ')}.`);
  return adapter;
}

export const AGENT_IDS = Object.keys(adapters) as AgentId[];
