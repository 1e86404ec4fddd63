/**
 * Airlock's built-in coding agent. Runs inside the sandbox as `node /opt/airlock/agent/agent.js`
 * (bundled for Node 18, no dependencies). Talks to the model only through the proxy given in
 * ANTHROPIC_BASE_URL / OPENAI_BASE_URL, with the run token as its key, and writes its events as
 * JSON lines on stdout (contracts/agent-events.ts). It never runs a shell command itself: it asks the
 * host (`command_request`) and reads the `command_result` from stdin, where in approval mode `ask`
 * `{"type":"approval_response","id":…,"approved":…}` lines arrive too.
 *
 * Exit codes: 0 finished (finish tool or the model stopped), 2 step limit reached, 1 error.
 */
import { AnthropicClient } from './anthropic-client';
import { ApprovalReader } from './approvals';
import { ConfigError, readConfig, type AgentConfig } from './config';
import { emit, redact, setRedaction } from './events';
import { McpGatewayClient } from './mcp-client';
import { UpstreamError, type ModelClient, type ToolResultMessage, type ToolSpec } from './model';
import { OpenAiClient } from './openai-client';
import { runTool, TOOLS, type ToolOutcome } from './tools';
import { loadTranscript, saveTranscript } from './transcript';

function systemPrompt(config: AgentConfig, mcpTools: number): string {
  return [
    'You are a coding agent working on a copy of a software project inside an isolated, disposable sandbox.',
    `The project is in ${config.workspace} (your working directory). Use the tools to inspect and change it.`,
    'Work step by step: look before you edit, make focused changes, run the relevant build or tests when there are any.',
    'Use edit_file for small changes (old_text must match exactly once) and write_file for new files.',
    'The sandbox has no internet access. Files you change are reviewed by the user before they reach the real project.',
    'When the task is done, call finish with a short summary of what you changed.',
    ...(mcpTools > 0 ? ["Tools named <server>__<tool> are the user's MCP servers, reached through Airlock: use them when the task needs them; a call the user refuses comes back as an error."] : []),
  ].join('\n');
}

function makeClient(config: AgentConfig, previous: Array<Record<string, unknown>>, mcpTools: ToolSpec[]): ModelClient & { addUser(text: string): void } {
  const system = systemPrompt(config, mcpTools.length);
  const tools = [...TOOLS, ...mcpTools];
  if (config.format === 'anthropic') {
    return new AnthropicClient({ baseUrl: config.baseUrl, apiKey: config.apiKey, model: config.model, maxTokens: config.maxTokens, system, tools, retries: config.retries, contextChars: config.contextChars }, config.task, previous);
  }
  return new OpenAiClient({ baseUrl: config.baseUrl, apiKey: config.apiKey, model: config.model, system, tools, retries: config.retries, contextChars: config.contextChars }, config.task, previous);
}

/** The run's MCP gateway and its tools, when the run has one; one that cannot be reached is said and left out. */
async function connectMcp(config: AgentConfig): Promise<{ client?: McpGatewayClient; tools: ToolSpec[] }> {
  if (!config.mcp) return { tools: [] };
  const client = new McpGatewayClient(config.mcp.url, config.mcp.token);
  try {
    const builtin = new Set(TOOLS.map((t) => t.name));
    return { client, tools: (await client.connect()).filter((t) => !builtin.has(t.name)) };
  } catch (err) {
    emit({ type: 'agent_error', message: redact(`The MCP tools are not available: ${(err as Error).message}`) });
    return { tools: [] };
  }
}

/** An earlier turn's conversation (a follow-up turn), or none; one that cannot be read is said and dropped. */
function previousConversation(config: AgentConfig): Array<Record<string, unknown>> {
  if (!config.resume || !config.transcriptFile) return [];
  try {
    return loadTranscript(config.transcriptFile, config.format);
  } catch (err) {
    emit({ type: 'agent_error', message: `The previous turn's conversation could not be continued (${(err as Error).message}); starting a fresh one.` });
    return [];
  }
}

async function run(config: AgentConfig, approvals: ApprovalReader, mcp: McpGatewayClient | undefined, mcpTools: ToolSpec[]): Promise<number> {
  const client = makeClient(config, previousConversation(config), mcpTools);
  let keepFailed = false;
  const keep = () => {
    if (!config.transcriptFile || keepFailed) return;
    try {
      saveTranscript(config.transcriptFile, config.format, client.history());
    } catch (err) {
      // The turn goes on; only a follow-up would miss the conversation.
      keepFailed = true;
      emit({ type: 'agent_error', message: `Could not keep the conversation for a follow-up: ${(err as Error).message}` });
    }
  };
  const approve = async (id: string, command: string): Promise<boolean> => {
    if (config.approval !== 'ask') return true;
    emit({ type: 'approval_request', id, command });
    // The host records and emits the approval_response itself; echoing it would duplicate it.
    return approvals.wait(id);
  };
  const runCommand = (req: { id: string; command: string; cwd: string; timeoutSec: number; capBytes: number }) => {
    emit({ type: 'command_request', ...req });
    return approvals.command(req.id);
  };
  let nudged = false;
  for (let step = 1; step <= config.maxSteps; step++) {
    const turn = await client.turn((delta) => emit({ type: 'assistant_text', delta }));
    keep();
    emit({ type: 'usage', inputTokens: turn.usage.inputTokens, outputTokens: turn.usage.outputTokens });
    if (turn.calls.length === 0) {
      if (turn.stopReason === 'max_tokens' || turn.stopReason === 'length') {
        if (!nudged) {
          nudged = true;
          client.addUser('Your answer was cut off (output limit). Continue, using the tools, in smaller steps.');
          continue;
        }
      }
      emit({ type: 'finished', summary: turn.text.trim(), reason: 'end_turn' });
      return 0;
    }
    const results: ToolResultMessage[] = [];
    let finished: string | undefined;
    for (const call of turn.calls) {
      emit({ type: 'tool_call', id: call.id, name: call.name, input: call.input });
      const outcome: ToolOutcome = call.inputError
        ? { ok: false, output: `error: ${call.inputError}; send the arguments as a JSON object` }
        : mcp?.has(call.name)
          ? await mcp.call(call.name, call.input)
          : await runTool(call.id, call.name, call.input, { config, approve, runCommand });
      const output = redact(outcome.output);
      emit({ type: 'tool_result', id: call.id, ok: outcome.ok, output, ...('truncated' in outcome && outcome.truncated ? { truncated: true } : {}) });
      results.push({ id: call.id, output, isError: !outcome.ok });
      if ('finished' in outcome && outcome.finished !== undefined) finished = outcome.finished;
    }
    client.addToolResults(results);
    keep();
    if (finished !== undefined) {
      emit({ type: 'finished', summary: finished, reason: 'finish' });
      return 0;
    }
  }
  emit({ type: 'finished', summary: `Stopped: reached the step limit (${config.maxSteps} model calls) before the task was finished.`, reason: 'max_steps' });
  return 2;
}

async function main(): Promise<number> {
  let config: AgentConfig;
  try {
    config = readConfig();
  } catch (err) {
    emit({ type: 'agent_error', message: err instanceof ConfigError ? `Agent configuration: ${err.message}` : `Agent configuration: ${(err as Error).message}` });
    return 1;
  }
  setRedaction(config.apiKey, config.mcp?.token ?? '');
  const approvals = new ApprovalReader();
  approvals.start();
  const mcp = await connectMcp(config);
  try {
    return await run(config, approvals, mcp.client, mcp.tools);
  } catch (err) {
    if (err instanceof UpstreamError) {
      emit({ type: 'agent_error', message: err.message, ...(err.status !== undefined ? { status: err.status } : {}) });
    } else {
      emit({ type: 'agent_error', message: redact(`Agent crashed: ${(err as Error).stack ?? String(err)}`) });
    }
    emit({ type: 'finished', summary: '', reason: 'error' });
    return 1;
  } finally {
    approvals.close();
    await mcp.client?.close();
  }
}

// Commands run on the host's side, which ends them with the agent: nothing to clean up here.
process.on('SIGTERM', () => process.exit(143));
process.on('SIGINT', () => process.exit(130));

void main().then((code) => {
  // Exit once stdout has drained (a pipe to the host may lag behind).
  process.stdout.write('', () => process.exit(code));
});
