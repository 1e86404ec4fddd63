import { readFileSync } from 'node:fs';

/** How the built-in agent is configured: environment variables only (set by the host's adapter). */
export interface AgentConfig {
  task: string;
  format: 'anthropic' | 'openai';
  model: string;
  /** Base URL as the provider's SDK expects it: Anthropic without `/v1`, OpenAI with it. */
  baseUrl: string;
  /** The run token (never printed). */
  apiKey: string;
  maxSteps: number;
  approval: 'auto' | 'ask';
  workspace: string;
  commandTimeoutSec: number;
  /** Characters of tool output returned to the model (the full output still streams as events). */
  outputCapChars: number;
  maxTokens: number;
  /** Retries of a 429/5xx answer before giving up. */
  retries: number;
  /** History size (characters) above which older tool outputs are elided. */
  contextChars: number;
  /** Where the conversation is kept (docs/architecture.md §15); none: not kept. */
  transcriptFile?: string;
  /** Continue the conversation in `transcriptFile` (a follow-up turn). */
  resume: boolean;
  /** The run's MCP gateway (docs/architecture.md §20): its endpoint and token (never printed); none: no MCP tools. */
  mcp?: { url: string; token: string };
}

export class ConfigError extends Error {}

function int(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new ConfigError(`${name} must be an integer >= ${min} (got '${raw}')`);
  return n;
}

// Bundled to CommonJS for Node 18, so no top-level await: reading the task file stays synchronous.
export function readConfig(env: NodeJS.ProcessEnv = process.env): AgentConfig {
  let task = env.AIRLOCK_TASK ?? '';
  if (!task && env.AIRLOCK_TASK_FILE) task = readFileSync(env.AIRLOCK_TASK_FILE, 'utf8');
  if (!task.trim()) throw new ConfigError('no task: set AIRLOCK_TASK or AIRLOCK_TASK_FILE');
  const format = env.AIRLOCK_PROVIDER_FORMAT ?? 'anthropic';
  if (format !== 'anthropic' && format !== 'openai') throw new ConfigError(`AIRLOCK_PROVIDER_FORMAT must be 'anthropic' or 'openai' (got '${format}')`);
  const approval = env.AIRLOCK_APPROVAL ?? 'auto';
  if (approval !== 'auto' && approval !== 'ask') throw new ConfigError(`AIRLOCK_APPROVAL must be 'auto' or 'ask' (got '${approval}')`);
  const model = env.AIRLOCK_MODEL ?? '';
  if (!model) throw new ConfigError('no model: set AIRLOCK_MODEL');
  const baseUrl = (format === 'anthropic' ? env.ANTHROPIC_BASE_URL ?? 'https://api.anthropic.com' : env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1').replace(/\/+$/, '');
  const apiKey = (format === 'anthropic' ? env.ANTHROPIC_API_KEY : env.OPENAI_API_KEY) ?? '';
  return {
    task,
    format,
    model,
    baseUrl,
    apiKey,
    maxSteps: int(env, 'AIRLOCK_MAX_STEPS', 50, 1),
    approval,
    workspace: env.AIRLOCK_WORKSPACE ?? '/workspace',
    commandTimeoutSec: int(env, 'AIRLOCK_COMMAND_TIMEOUT_SEC', 300, 1),
    outputCapChars: int(env, 'AIRLOCK_OUTPUT_CAP', 30_000, 1000),
    maxTokens: int(env, 'AIRLOCK_MAX_TOKENS', 8192, 1),
    retries: int(env, 'AIRLOCK_RETRIES', 2, 0),
    contextChars: int(env, 'AIRLOCK_CONTEXT_CHARS', 400_000, 1000),
    ...(env.AIRLOCK_TRANSCRIPT ? { transcriptFile: env.AIRLOCK_TRANSCRIPT } : {}),
    resume: env.AIRLOCK_RESUME === '1' && !!env.AIRLOCK_TRANSCRIPT,
    ...(env.AIRLOCK_MCP_URL && env.AIRLOCK_MCP_TOKEN ? { mcp: { url: env.AIRLOCK_MCP_URL, token: env.AIRLOCK_MCP_TOKEN } } : {}),
  };
}
