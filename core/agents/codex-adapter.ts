import type { AgentEvent } from '../../contracts/agent-events';
import { AGENT_SCRATCH_DIR } from './agent-image-paths';
import { capOutput, DEFAULT_WORKSPACE, jsonLinesParser, num, obj, providerEnv, str, workspaceRelative, type AgentAdapter } from './agent-adapter';

/** TOML string literal for a `-c key=value` override. */
function toml(value: string): string {
  return JSON.stringify(value);
}

/**
 * Codex CLI (`@openai/codex`), unchanged, in `codex exec --json` mode. Its built-in OpenAI provider
 * ignores OPENAI_BASE_URL, so a custom provider `airlock` points it at the proxy (docs/architecture.md §4);
 * Codex's own sandbox is bypassed because Airlock's sandbox is the boundary (Landlock/seccomp
 * inside a hardened container would only break its commands). No approval mode in exec.
 */
export const codexAdapter: AgentAdapter = {
  id: 'codex',
  imageVariant: 'agents',
  supportsApproval: false,
  terminal: 'commands',
  providerFormats: ['openai'],
  supportsMcp: true,
  // Its conversation: rollout files by date; the sandbox holds only this run's (and a carried one).
  session: { dir: `${AGENT_SCRATCH_DIR}/codex/sessions`, matches: (rel) => /^\d{4}\/\d{2}\/\d{2}\/rollout-[0-9A-Za-z_:.-]{1,200}\.jsonl$/.test(rel) && !rel.includes('..') },
  command(ctx) {
    const { OPENAI_BASE_URL, OPENAI_API_KEY } = providerEnv(ctx);
    const workspace = ctx.workspace ?? DEFAULT_WORKSPACE;
    const signin = ctx.credential?.kind === 'chatgpt-signin' ? ctx.credential : undefined;
    const base = OPENAI_BASE_URL!.replace(/\/v1$/, '');
    // API key: the run token in OPENAI_API_KEY. ChatGPT sign-in: Codex's own auth.json, holding only
    // placeholders (docs/architecture.md §6), and its sign-in traffic pointed at the proxy too.
    const auth = signin
      ? ['-c', 'model_providers.airlock.requires_openai_auth=true', '-c', 'cli_auth_credentials_store="file"', '-c', `chatgpt_base_url=${toml(`${base}/backend-api/`)}`]
      : ['-c', 'model_providers.airlock.env_key="OPENAI_API_KEY"'];
    const argv = [
      'codex', 'exec', '--json', '--skip-git-repo-check', '--dangerously-bypass-approvals-and-sandbox',
      '--cd', workspace,
      '--model', ctx.model,
      '-c', 'model_provider="airlock"',
      '-c', `model_providers.airlock.name=${toml('Airlock proxy')}`,
      '-c', `model_providers.airlock.base_url=${toml(OPENAI_BASE_URL!)}`,
      ...auth,
      '-c', 'model_providers.airlock.wire_api="responses"',
      ...(ctx.mcp ? codexMcpConfig(ctx.mcp.url) : []),
      // A follow-up continues the one carried session, the newest (and only) one in the sandbox.
      ...(ctx.session?.resume ? ['resume', '--last'] : []),
      '--', ctx.task,
    ];
    // CODEX_HOME must exist; the root filesystem is read-only, so it lives in scratch space.
    // stdin from /dev/null: with a piped stdin the CLI waits to read more prompt from it.
    const prepare = signin
      ? 'mkdir -p "$CODEX_HOME" && (umask 077 && printf \'%s\' "$AIRLOCK_CODEX_AUTH" > "$CODEX_HOME/auth.json") && unset AIRLOCK_CODEX_AUTH && exec "$@" </dev/null'
      : 'mkdir -p "$CODEX_HOME" && exec "$@" </dev/null';
    const env: Record<string, string> = { OPENAI_BASE_URL: OPENAI_BASE_URL!, CODEX_HOME: `${AGENT_SCRATCH_DIR}/codex` };
    if (signin) {
      env.AIRLOCK_CODEX_AUTH = codexAuthJson(ctx.token, signin);
      env.CODEX_REFRESH_TOKEN_URL_OVERRIDE = `${base}/oauth/token`;
    } else {
      env.OPENAI_API_KEY = OPENAI_API_KEY!;
    }
    if (ctx.mcp) env[CODEX_MCP_TOKEN_ENV] = ctx.mcp.token;
    return { argv: ['sh', '-c', prepare, 'sh', ...argv], env, cwd: workspace, ...(signin ? { unsetEnv: ['OPENAI_API_KEY'] } : {}) };
  },
  createParser() {
    return createCodexParser();
  },
};

/** The variable Codex reads the gateway's token from (`bearer_token_env_var`): never on the command line. */
export const CODEX_MCP_TOKEN_ENV = 'AIRLOCK_MCP_TOKEN';

/**
 * The run's MCP gateway as Codex's only MCP server `airlock` (docs/architecture.md §20 "Agents"), as
 * `-c` overrides of `[mcp_servers.airlock]` for this run: Streamable HTTP with the token from the
 * environment; `required`, so Codex waits for it at start rather than silently leaving its tools out;
 * tool calls approved up front (Airlock's policy decides at the gateway, and an `ask` may wait 120 s).
 */
export function codexMcpConfig(url: string): string[] {
  return [
    '-c', `mcp_servers.airlock.url=${toml(url)}`,
    '-c', `mcp_servers.airlock.bearer_token_env_var=${toml(CODEX_MCP_TOKEN_ENV)}`,
    '-c', 'mcp_servers.airlock.required=true',
    '-c', 'mcp_servers.airlock.startup_timeout_sec=60',
    '-c', 'mcp_servers.airlock.tool_timeout_sec=300',
    '-c', 'mcp_servers.airlock.default_tools_approval_mode="approve"',
  ];
}

/**
 * Codex's auth.json for a ChatGPT sign-in with placeholders only: the access token is the run token,
 * the refresh token a run-scoped placeholder the proxy answers, the id token unsigned with the
 * account's non-secret claims (plan, account id) that Codex reads.
 */
export function codexAuthJson(runToken: string, signin: { refreshToken: string; idToken: string; accountId: string }): string {
  return JSON.stringify({
    OPENAI_API_KEY: null,
    tokens: { id_token: signin.idToken, access_token: runToken, refresh_token: signin.refreshToken, account_id: signin.accountId },
    last_refresh: new Date().toISOString(),
  });
}

/** Maps `codex exec --json` lines (thread.* / turn.* / item.* / error) to events. */
export function createCodexParser(workspace = DEFAULT_WORKSPACE) {
  const commands = new Map<string, { startedAt: number; emitted: number }>();
  let lastMessage = '';
  const startCommand = (id: string, item: Record<string, unknown>, out: AgentEvent[]) => {
    if (commands.has(id)) return commands.get(id)!;
    const command = str(item.command) ?? '';
    const state = { startedAt: Date.now(), emitted: 0 };
    commands.set(id, state);
    out.push({ type: 'tool_call', id, name: 'shell', input: { command } });
    out.push({ type: 'command_started', id, command, cwd: workspace });
    return state;
  };
  return jsonLinesParser(
    (o) => {
      const out: AgentEvent[] = [];
      const type = str(o.type);
      if (type === 'item.started' || type === 'item.updated' || type === 'item.completed') {
        const item = obj(o.item);
        if (!item) return out;
        const id = str(item.id) ?? '';
        const done = type === 'item.completed';
        switch (item.type) {
          case 'command_execution': {
            const state = startCommand(id, item, out);
            // aggregated_output grows; emit only what is new.
            const output = str(item.aggregated_output) ?? '';
            if (output.length > state.emitted) {
              out.push({ type: 'command_output', id, stream: 'stdout', data: output.slice(state.emitted) });
              state.emitted = output.length;
            }
            if (done) {
              const exitCode = num(item.exit_code) ?? null;
              out.push({ type: 'command_exited', id, exitCode, durationMs: Date.now() - state.startedAt, timedOut: false });
              out.push({ type: 'tool_result', id, ok: exitCode === 0 && item.status !== 'declined', ...capOutput(output) });
              commands.delete(id);
            }
            break;
          }
          case 'agent_message':
            if (done && str(item.text)) {
              lastMessage = str(item.text)!;
              out.push({ type: 'assistant_text', delta: `${lastMessage}\n` });
            }
            break;
          case 'file_change': {
            const changes = Array.isArray(item.changes) ? item.changes : [];
            const paths = changes.map((c) => str(obj(c)?.path)).filter((p): p is string => !!p).map((p) => workspaceRelative(p, workspace));
            if (done && item.status !== 'failed' && paths.length > 0) out.push({ type: 'file_changed', paths });
            break;
          }
          case 'mcp_tool_call':
          case 'web_search': {
            const name = item.type === 'web_search' ? 'web_search' : `${str(item.server) ?? 'mcp'}.${str(item.tool) ?? 'tool'}`;
            if (type === 'item.started' || (done && !commands.has(id))) {
              out.push({ type: 'tool_call', id, name, input: item.type === 'web_search' ? { query: item.query } : item.arguments ?? null });
            }
            if (done) {
              const error = str(obj(item.error)?.message);
              out.push({ type: 'tool_result', id, ok: !error && item.status !== 'failed', ...capOutput(error ?? JSON.stringify(item.result ?? null)) });
            }
            break;
          }
        }
        return out;
      }
      switch (type) {
        case 'turn.completed': {
          const usage = obj(o.usage);
          if (usage) out.push({ type: 'usage', inputTokens: num(usage.input_tokens) ?? 0, outputTokens: num(usage.output_tokens) ?? 0 });
          out.push({ type: 'finished', summary: lastMessage, reason: 'end_turn' });
          break;
        }
        case 'turn.failed':
          out.push({ type: 'agent_error', message: `Codex turn failed: ${str(obj(o.error)?.message) ?? 'unknown error'}` });
          out.push({ type: 'finished', summary: lastMessage, reason: 'error' });
          break;
        case 'error':
          out.push({ type: 'agent_error', message: `Codex: ${str(o.message) ?? 'unknown error'}` });
          break;
      }
      return out;
    },
  );
}
