import { AirlockError } from '../../contracts/errors';
import { AGENT_SCRATCH_DIR } from './agent-image-paths';
import { DEFAULT_WORKSPACE, providerEnv, type AgentAdapter } from './agent-adapter';

/**
 * Any command line (aider, opencode, a script…), run with `bash -lc` in the workspace with the
 * provider settings of docs/architecture.md §4 plus AIRLOCK_TASK / AIRLOCK_MODEL. Raw terminal output only:
 * the parser maps nothing.
 */
export const customAdapter: AgentAdapter = {
  id: 'custom',
  // The base image (shell, git, node, python, curl, ripgrep): no 2.7 GB agents build for a script.
  imageVariant: 'base',
  supportsApproval: false,
  providerFormats: ['anthropic', 'openai'],
  command(ctx) {
    const line = ctx.customCommand?.trim();
    if (!line) throw new AirlockError('INVALID_INPUT', "The custom agent needs a command line (e.g. --agent custom --command 'aider --yes -m \"$AIRLOCK_TASK\"').");
    return {
      argv: ['bash', '-lc', line],
      env: {
        ...providerEnv(ctx),
        AIRLOCK_TASK: ctx.task,
        AIRLOCK_MODEL: ctx.model,
        AIRLOCK_PROVIDER_FORMAT: ctx.providerFormat,
        AIRLOCK_SCRATCH: AGENT_SCRATCH_DIR,
      },
      cwd: ctx.workspace ?? DEFAULT_WORKSPACE,
    };
  },
  createParser() {
    return { push: () => [], end: () => [] };
  },
};
