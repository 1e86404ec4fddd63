import { AgentEvent } from '../../contracts/agent-events';
import { AGENT_SCRIPT_IN_IMAGE } from './agent-image-paths';
import { DEFAULT_WORKSPACE, jsonLinesParser, providerEnv, type AgentAdapter } from './agent-adapter';

/**
 * Airlock's own agent (resources/sandbox/agent), shipped in the base image; speaks our events
 * natively. Its shell commands are run by the host (`command_request` → `command_result`), so their
 * output never passes through the agent.
 */
export const builtinAdapter: AgentAdapter = {
  id: 'builtin',
  imageVariant: 'base',
  supportsApproval: true,
  providerFormats: ['anthropic', 'openai'],
  command(ctx) {
    const env: Record<string, string> = {
      ...providerEnv(ctx),
      AIRLOCK_TASK: ctx.task,
      AIRLOCK_PROVIDER_FORMAT: ctx.providerFormat,
      AIRLOCK_MODEL: ctx.model,
      AIRLOCK_APPROVAL: ctx.approval,
      AIRLOCK_WORKSPACE: ctx.workspace ?? DEFAULT_WORKSPACE,
    };
    if (ctx.maxSteps !== undefined) env.AIRLOCK_MAX_STEPS = String(ctx.maxSteps);
    return { argv: ['node', AGENT_SCRIPT_IN_IMAGE], env };
  },
  createParser() {
    return jsonLinesParser((o) => {
      const parsed = AgentEvent.safeParse(o);
      return parsed.success ? [parsed.data] : [];
    });
  },
};
