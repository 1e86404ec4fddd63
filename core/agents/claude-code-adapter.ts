import type { AgentEvent } from '../../contracts/agent-events';
import { AGENT_SCRATCH_DIR } from './agent-image-paths';
import { capOutput, DEFAULT_WORKSPACE, jsonLinesParser, num, obj, providerEnv, str, workspaceRelative, type AgentAdapter } from './agent-adapter';

/** Claude Code's file-writing tools and the input field naming the file. */
const FILE_TOOLS: Record<string, string> = { Write: 'file_path', Edit: 'file_path', MultiEdit: 'file_path', NotebookEdit: 'notebook_path' };

/**
 * Claude Code (`@anthropic-ai/claude-code`), unchanged, in its non-interactive streaming mode:
 * `claude -p --output-format stream-json --verbose --include-partial-messages --dangerously-skip-permissions`. It honours
 * ANTHROPIC_BASE_URL + ANTHROPIC_API_KEY (or, with a Claude subscription, CLAUDE_CODE_OAUTH_TOKEN), so it
 * reaches the model only through the proxy.
 * Approval mode `ask` is not available (print mode has no interactive prompt); the sandbox is the boundary.
 */
export const claudeCodeAdapter: AgentAdapter = {
  id: 'claude-code',
  imageVariant: 'agents',
  supportsApproval: false,
  supportsMcp: true,
  terminal: 'commands',
  providerFormats: ['anthropic'],
  // Its conversation: one JSON-lines file per session id, under the project's folder name ("/workspace").
  session: { dir: `${AGENT_SCRATCH_DIR}/claude/projects`, matches: (rel, id) => rel === `-workspace/${id}.jsonl` },
  command(ctx) {
    // --include-partial-messages streams text as deltas (a live view), not whole blocks at the end.
    const argv = ['claude', '-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', '--dangerously-skip-permissions', '--model', ctx.model];
    // The run's MCP gateway (§20), and only it: the configuration (with the run's token) comes from the
    // environment, so the token is never in the host's record of the command line.
    const mcp: Record<string, string> = ctx.mcp ? { AIRLOCK_MCP_CONFIG: mcpConfig(ctx.mcp) } : {};
    if (ctx.maxSteps !== undefined) argv.push('--max-turns', String(ctx.maxSteps));
    // The host names the conversation, so a follow-up resumes it by that id (docs/architecture.md §15).
    if (ctx.session) argv.push(ctx.session.resume ? '--resume' : '--session-id', ctx.session.id);
    // `--` keeps a task that starts with '-' from being read as an option.
    argv.push('--', ctx.task);
    const { ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY } = providerEnv(ctx);
    // With a Claude subscription the run token stands where the setup token would (§6); an API key
    // variable would take precedence over it, so none is set.
    const subscription = ctx.credential?.kind === 'claude-subscription';
    const auth: Record<string, string> = subscription ? { CLAUDE_CODE_OAUTH_TOKEN: ctx.token } : { ANTHROPIC_API_KEY: ANTHROPIC_API_KEY! };
    return {
      // The root filesystem is read-only: give the CLI a writable config folder first.
      // stdin from /dev/null: with a piped stdin the CLI waits to read more prompt from it.
      argv: ['sh', '-c', ctx.mcp ? 'mkdir -p "$CLAUDE_CONFIG_DIR" && c="$1" && shift && exec "$c" --mcp-config "$AIRLOCK_MCP_CONFIG" --strict-mcp-config "$@" </dev/null' : 'mkdir -p "$CLAUDE_CONFIG_DIR" && exec "$@" </dev/null', 'sh', ...argv],
      env: {
        ANTHROPIC_BASE_URL: ANTHROPIC_BASE_URL!,
        ...auth,
        ...mcp,
        CLAUDE_CONFIG_DIR: `${AGENT_SCRATCH_DIR}/claude`,
        // No traffic but model calls: there is no network anyway, this just avoids retries and noise.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
        DISABLE_AUTOUPDATER: '1',
        IS_SANDBOX: '1',
      },
      cwd: ctx.workspace ?? DEFAULT_WORKSPACE,
      ...(subscription ? { unsetEnv: ['ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN'] } : {}),
    };
  },
  createParser() {
    return createClaudeCodeParser();
  },
};

/** The gateway as Claude Code's MCP configuration: one HTTP server named `airlock`. */
export function mcpConfig(mcp: { url: string; token: string }): string {
  return JSON.stringify({ mcpServers: { airlock: { type: 'http', url: mcp.url, headers: { Authorization: `Bearer ${mcp.token}` } } } });
}

/** Maps `--output-format stream-json` lines (system / assistant / user / result / stream_event) to events. */
export function createClaudeCodeParser(workspace = DEFAULT_WORKSPACE) {
  const tools = new Map<string, { name: string; input: Record<string, unknown>; startedAt: number }>();
  // With --include-partial-messages, text arrives as deltas first; then the whole blocks must not repeat it.
  let partialText = false;
  return jsonLinesParser((o) => {
    const out: AgentEvent[] = [];
    switch (o.type) {
      case 'stream_event': {
        const ev = obj(o.event);
        const delta = obj(ev?.delta);
        // Text of sub-agents (parent_tool_use_id set) is theirs, not the conversation's.
        if (ev?.type === 'content_block_delta' && delta?.type === 'text_delta' && str(delta.text) && !o.parent_tool_use_id) {
          partialText = true;
          out.push({ type: 'assistant_text', delta: str(delta.text)! });
        }
        break;
      }
      case 'assistant': {
        const content = obj(o.message)?.content;
        for (const block of Array.isArray(content) ? content : []) {
          const b = obj(block);
          if (!b) continue;
          if (b.type === 'text' && str(b.text) && !partialText) out.push({ type: 'assistant_text', delta: str(b.text)! });
          if (b.type === 'tool_use') {
            const id = str(b.id) ?? `tool-${tools.size}`;
            const name = str(b.name) ?? 'unknown';
            const input = obj(b.input) ?? {};
            tools.set(id, { name, input, startedAt: Date.now() });
            out.push({ type: 'tool_call', id, name, input });
            if (name === 'Bash' && str(input.command)) out.push({ type: 'command_started', id, command: str(input.command)!, cwd: workspace });
          }
        }
        break;
      }
      case 'user': {
        const content = obj(o.message)?.content;
        const rich = obj(o.tool_use_result);
        for (const block of Array.isArray(content) ? content : []) {
          const b = obj(block);
          if (!b || b.type !== 'tool_result') continue;
          const id = str(b.tool_use_id) ?? '';
          const ok = b.is_error !== true;
          const text = toolResultText(b.content);
          const tool = tools.get(id);
          out.push({ type: 'tool_result', id, ok, ...capOutput(text) });
          if (tool?.name === 'Bash') {
            const stdout = str(rich?.stdout);
            const stderr = str(rich?.stderr);
            if (stdout !== undefined || stderr !== undefined) {
              if (stdout) out.push({ type: 'command_output', id, stream: 'stdout', data: stdout });
              if (stderr) out.push({ type: 'command_output', id, stream: 'stderr', data: stderr });
            } else if (text) {
              out.push({ type: 'command_output', id, stream: 'stdout', data: text });
            }
            // stream-json carries no exit code: 0 for success, 1 for a failed command.
            out.push({ type: 'command_exited', id, exitCode: ok ? 0 : 1, durationMs: Date.now() - tool.startedAt, timedOut: rich?.interrupted === true });
          }
          const fileKey = tool ? FILE_TOOLS[tool.name] : undefined;
          if (ok && fileKey && str(tool!.input[fileKey])) out.push({ type: 'file_changed', paths: [workspaceRelative(str(tool!.input[fileKey])!, workspace)] });
          tools.delete(id);
        }
        break;
      }
      case 'result': {
        const usage = obj(o.usage);
        if (usage) {
          const input = (num(usage.input_tokens) ?? 0) + (num(usage.cache_creation_input_tokens) ?? 0) + (num(usage.cache_read_input_tokens) ?? 0);
          const cost = num(o.total_cost_usd);
          out.push({ type: 'usage', inputTokens: input, outputTokens: num(usage.output_tokens) ?? 0, ...(cost !== undefined ? { costUsd: cost } : {}) });
        }
        const failed = o.is_error === true || (str(o.subtype) ?? 'success') !== 'success';
        if (failed) {
          out.push({ type: 'agent_error', message: `Claude Code ended with ${str(o.subtype) ?? 'an error'}${str(o.result) ? `: ${str(o.result)}` : ''}` });
          out.push({ type: 'finished', summary: str(o.result) ?? '', reason: str(o.subtype) === 'error_max_turns' ? 'max_steps' : 'error' });
        } else {
          out.push({ type: 'finished', summary: str(o.result) ?? '', reason: 'end_turn' });
        }
        break;
      }
    }
    return out;
  });
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((c) => obj(c))
      .filter((c) => c?.type === 'text')
      .map((c) => str(c!.text) ?? '')
      .join('\n');
  }
  return '';
}
