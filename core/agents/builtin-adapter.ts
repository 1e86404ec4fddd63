import { AgentEvent } from '../../contracts/agent-events';
import { AGENT_SCRATCH_DIR, AGENT_SCRIPT_IN_IMAGE, AIRLOCK_NODE_IN_IMAGE } from './agent-image-paths';
import { DEFAULT_WORKSPACE, jsonLinesParser, providerEnv, type AgentAdapter } from './agent-adapter';

/**
 * Airlock's own agent (resources/sandbox/agent), shipped in the base image; speaks our events
 * natively. Its shell commands are run by the host (`command_request` → `command_result`), so their
 * output never passes through the agent.
 */
const SESSION_DIR = `${AGENT_SCRATCH_DIR}/builtin`;

export const builtinAdapter: AgentAdapter = {
  id: 'builtin',
  imageVariant: 'base',
  supportsApproval: true,
  supportsMcp: true,
  terminal: 'commands',
  providerFormats: ['anthropic', 'openai'],
  // Its transcript, in the provider's wire format (resources/sandbox/agent/transcript.ts).
  session: { dir: SESSION_DIR, matches: (rel) => rel === 'transcript.json' },
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
    // The run's MCP gateway (docs/architecture.md §20 "Agents"): the agent lists its tools to the model and calls them there.
    if (ctx.mcp) {
      env.AIRLOCK_MCP_URL = ctx.mcp.url;
      env.AIRLOCK_MCP_TOKEN = ctx.mcp.token;
    }
    if (ctx.session) {
      env.AIRLOCK_TRANSCRIPT = `${SESSION_DIR}/transcript.json`;
      if (ctx.session.resume) env.AIRLOCK_RESUME = '1';
    }
    // Airlock's own Node where the image has it (every derived image does: the user's image may have none).
    return { argv: ['/bin/sh', '-c', `if [ -x ${AIRLOCK_NODE_IN_IMAGE} ]; then exec ${AIRLOCK_NODE_IN_IMAGE} "$0"; fi; exec node "$0"`, AGENT_SCRIPT_IN_IMAGE], env };
  },
  createParser() {
    return jsonLinesParser((o) => {
      const parsed = AgentEvent.safeParse(o);
      return parsed.success ? [parsed.data] : [];
    });
  },
};
