import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { AgentEvent } from '../../contracts/agent-events';
import type { AgentOutputParser } from './agent-adapter';
import { createClaudeCodeParser } from './claude-code-adapter';
import { createCodexParser } from './codex-adapter';
import { AGENT_IDS, getAgentAdapter } from './index';

const ctx = {
  task: '-fix the bug',
  model: 'm-1',
  providerFormat: 'anthropic' as const,
  proxyBaseUrl: 'http://127.0.0.1:41000/',
  token: 'tok-secret-123456',
  approval: 'auto' as const,
  maxSteps: 7,
};

/** Feeds lines split at awkward places (mid-line, mid UTF-8 character) and collects events. */
function feed(parser: AgentOutputParser, lines: string[]): AgentEvent[] {
  const bytes = Buffer.from(lines.join('\n') + '\n', 'utf8');
  const out: AgentEvent[] = [];
  for (let i = 0; i < bytes.length; i += 7) out.push(...parser.push(bytes.subarray(i, i + 7)));
  out.push(...parser.end());
  for (const e of out) AgentEvent.parse(e);
  return out;
}

// Shapes as printed by `claude -p --output-format stream-json --verbose` (Claude Code 2.x).
const claudeLines = [
  '{"type":"system","subtype":"init","cwd":"/workspace","session_id":"4f1c","tools":["Bash","Edit","Read","Write"],"mcp_servers":[],"model":"claude-sonnet-4-5","permissionMode":"bypassPermissions","apiKeySource":"ANTHROPIC_API_KEY"}',
  '{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"I will look at the files — ✓."}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":5}},"parent_tool_use_id":null,"session_id":"4f1c"}',
  '{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_01","name":"Bash","input":{"command":"ls -la","description":"List files"}}],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":20}},"parent_tool_use_id":null,"session_id":"4f1c"}',
  '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_01","type":"tool_result","content":"hello.txt\\nREADME.md","is_error":false}]},"parent_tool_use_id":null,"session_id":"4f1c","tool_use_result":{"stdout":"hello.txt\\nREADME.md","stderr":"","interrupted":false,"isImage":false}}',
  'not json: a stray line from a wrapper',
  '{"type":"assistant","message":{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_02","name":"Edit","input":{"file_path":"/workspace/hello.txt","old_string":"world","new_string":"airlock"}}]},"parent_tool_use_id":null,"session_id":"4f1c"}',
  '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_02","type":"tool_result","content":[{"type":"text","text":"The file /workspace/hello.txt has been updated."}]}]},"parent_tool_use_id":null,"session_id":"4f1c"}',
  '{"type":"assistant","message":{"id":"msg_3","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_03","name":"Bash","input":{"command":"false"}}]},"session_id":"4f1c"}',
  '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_03","type":"tool_result","content":"Error: exit code 1","is_error":true}]},"session_id":"4f1c"}',
  '{"type":"result","subtype":"success","is_error":false,"duration_ms":5120,"duration_api_ms":4800,"num_turns":4,"result":"Changed the greeting.","session_id":"4f1c","total_cost_usd":0.0123,"usage":{"input_tokens":100,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":40}}',
];

describe('claude-code parser', () => {
  it('maps text, tool calls, Bash commands, edits, usage and the result', () => {
    const events = feed(createClaudeCodeParser(), claudeLines);
    expect(events.map((e) => e.type)).toEqual([
      'assistant_text',
      'tool_call', 'command_started', 'tool_result', 'command_output', 'command_exited',
      'tool_call', 'tool_result', 'file_changed',
      'tool_call', 'command_started', 'tool_result', 'command_output', 'command_exited',
      'usage', 'finished',
    ]);
    expect(events[0]).toEqual({ type: 'assistant_text', delta: 'I will look at the files — ✓.' });
    expect(events[1]).toEqual({ type: 'tool_call', id: 'toolu_01', name: 'Bash', input: { command: 'ls -la', description: 'List files' } });
    expect(events[2]).toEqual({ type: 'command_started', id: 'toolu_01', command: 'ls -la', cwd: '/workspace' });
    expect(events[4]).toEqual({ type: 'command_output', id: 'toolu_01', stream: 'stdout', data: 'hello.txt\nREADME.md' });
    expect(events[5]).toMatchObject({ type: 'command_exited', id: 'toolu_01', exitCode: 0, timedOut: false });
    expect(events[7]).toEqual({ type: 'tool_result', id: 'toolu_02', ok: true, output: 'The file /workspace/hello.txt has been updated.' });
    expect(events[8]).toEqual({ type: 'file_changed', paths: ['hello.txt'] });
    expect(events[11]).toMatchObject({ type: 'tool_result', id: 'toolu_03', ok: false });
    expect(events[13]).toMatchObject({ type: 'command_exited', id: 'toolu_03', exitCode: 1 });
    expect(events[14]).toEqual({ type: 'usage', inputTokens: 150, outputTokens: 40, costUsd: 0.0123 });
    expect(events[15]).toEqual({ type: 'finished', summary: 'Changed the greeting.', reason: 'end_turn' });
  });

  it('uses partial-message deltas instead of whole text blocks when present', () => {
    const events = feed(createClaudeCodeParser(), [
      '{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}},"session_id":"s"}',
      '{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}},"session_id":"s"}',
      '{"type":"assistant","message":{"content":[{"type":"text","text":"Hello"}]},"session_id":"s"}',
    ]);
    expect(events).toEqual([
      { type: 'assistant_text', delta: 'Hel' },
      { type: 'assistant_text', delta: 'lo' },
    ]);
  });

  it('reports an error result and the turn limit', () => {
    const events = feed(createClaudeCodeParser(), [
      '{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":7,"session_id":"s","usage":{"input_tokens":1,"output_tokens":2}}',
    ]);
    expect(events[1]).toMatchObject({ type: 'agent_error', message: expect.stringContaining('error_max_turns') });
    expect(events[2]).toMatchObject({ type: 'finished', reason: 'max_steps' });
    const auth = feed(createClaudeCodeParser(), [
      '{"type":"result","subtype":"success","is_error":true,"result":"Invalid API key · Please run /login","session_id":"s"}',
    ]);
    expect(auth[0]).toMatchObject({ type: 'agent_error', message: expect.stringContaining('Invalid API key') });
  });
});

// Shapes as printed by `codex exec --json` (Codex CLI 0.4x and later).
const codexLines = [
  '{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}',
  '{"type":"turn.started"}',
  '{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Looking at the files**"}}',
  '{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}',
  '{"type":"item.updated","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"hello.txt\\n","exit_code":null,"status":"in_progress"}}',
  '{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"hello.txt\\nREADME.md\\n","exit_code":0,"status":"completed"}}',
  '{"type":"item.completed","item":{"id":"item_2","type":"file_change","changes":[{"path":"/workspace/hello.txt","kind":"update"},{"path":"src/new.ts","kind":"add"}],"status":"completed"}}',
  '{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"bash -lc \'exit 2\'","aggregated_output":"","exit_code":2,"status":"failed"}}',
  '{"type":"item.completed","item":{"id":"item_4","type":"agent_message","text":"Updated the greeting."}}',
  '{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":200,"output_tokens":345}}',
];

describe('codex parser', () => {
  it('maps commands (incremental output), file changes, messages, usage and the end of the turn', () => {
    const events = feed(createCodexParser(), codexLines);
    expect(events.map((e) => e.type)).toEqual([
      'tool_call', 'command_started', 'command_output', 'command_output', 'command_exited', 'tool_result',
      'file_changed',
      'tool_call', 'command_started', 'command_exited', 'tool_result',
      'assistant_text', 'usage', 'finished',
    ]);
    expect(events[1]).toEqual({ type: 'command_started', id: 'item_1', command: 'bash -lc ls', cwd: '/workspace' });
    expect(events[2]).toEqual({ type: 'command_output', id: 'item_1', stream: 'stdout', data: 'hello.txt\n' });
    expect(events[3]).toEqual({ type: 'command_output', id: 'item_1', stream: 'stdout', data: 'README.md\n' });
    expect(events[4]).toMatchObject({ type: 'command_exited', id: 'item_1', exitCode: 0, timedOut: false });
    expect(events[5]).toEqual({ type: 'tool_result', id: 'item_1', ok: true, output: 'hello.txt\nREADME.md\n' });
    expect(events[6]).toEqual({ type: 'file_changed', paths: ['hello.txt', 'src/new.ts'] });
    expect(events[9]).toMatchObject({ type: 'command_exited', id: 'item_3', exitCode: 2 });
    expect(events[10]).toMatchObject({ type: 'tool_result', id: 'item_3', ok: false });
    expect(events[12]).toEqual({ type: 'usage', inputTokens: 1200, outputTokens: 345 });
    expect(events[13]).toEqual({ type: 'finished', summary: 'Updated the greeting.', reason: 'end_turn' });
  });

  it('maps errors and a failed turn', () => {
    const events = feed(createCodexParser(), [
      '{"type":"error","message":"unexpected status 401 Unauthorized"}',
      '{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized"}}',
    ]);
    expect(events).toEqual([
      { type: 'agent_error', message: 'Codex: unexpected status 401 Unauthorized' },
      { type: 'agent_error', message: 'Codex turn failed: unexpected status 401 Unauthorized' },
      { type: 'finished', summary: '', reason: 'error' },
    ]);
  });
});

describe('builtin parser', () => {
  it('passes valid events through and drops anything else', () => {
    const events = feed(getAgentAdapter('builtin').createParser(), [
      '{"type":"assistant_text","delta":"hi"}',
      '{"type":"bogus"}',
      '{"type":"usage","inputTokens":1,"outputTokens":2}',
    ]);
    expect(events).toEqual([{ type: 'assistant_text', delta: 'hi' }, { type: 'usage', inputTokens: 1, outputTokens: 2 }]);
  });

  it('parses a last line without a newline at end()', () => {
    const p = getAgentAdapter('builtin').createParser();
    expect(p.push(Buffer.from('{"type":"finished","summary":"x"}'))).toEqual([]);
    expect(p.end()).toEqual([{ type: 'finished', summary: 'x' }]);
  });

  it('reads JSON lines split at every byte, and takes nothing else from the agent as command output', () => {
    // Command output is read by the host first-hand (host-run commands): a line shaped like the old
    // raw output records is not an event, whatever bytes follow it.
    const bytes = Buffer.from(
      '{"type":"command_started","id":"toolu_1","command":"x","cwd":"/workspace"}\n' +
        '\x1eO toolu_1 stdout 5\nfake!\n' +
        '{"type":"command_exited","id":"toolu_1","exitCode":0,"durationMs":5,"timedOut":false}\n' +
        '{"type":"finished","summary":"d€ne"}\n',
    );
    for (const step of [1, 2, 5, 64, bytes.length]) {
      const p = getAgentAdapter('builtin').createParser();
      const events: AgentEvent[] = [];
      for (let i = 0; i < bytes.length; i += step) events.push(...p.push(bytes.subarray(i, i + step)));
      events.push(...p.end());
      expect(events).toEqual([
        { type: 'command_started', id: 'toolu_1', command: 'x', cwd: '/workspace' },
        { type: 'command_exited', id: 'toolu_1', exitCode: 0, durationMs: 5, timedOut: false },
        { type: 'finished', summary: 'd€ne' },
      ]);
    }
  });

  it('drops a line that never ends instead of buffering it forever', () => {
    const p = getAgentAdapter('builtin').createParser();
    const junk = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i < 9; i++) expect(p.push(junk)).toEqual([]);
    expect(p.push(Buffer.from('tail of the junk\n{"type":"finished","summary":"ok"}\n'))).toEqual([{ type: 'finished', summary: 'ok' }]);
  });
});

describe('adapter commands', () => {
  it('builtin: node on the bundle with the provider settings and the token as key', () => {
    const cmd = getAgentAdapter('builtin').command(ctx);
    // Airlock's own Node first: a derived image may have none (docs/architecture.md §16).
    expect(cmd.argv).toEqual(['/bin/sh', '-c', 'if [ -x /opt/airlock/node/node ]; then exec /opt/airlock/node/node "$0"; fi; exec node "$0"', '/opt/airlock/agent/agent.js']);
    expect(cmd.env).toMatchObject({
      AIRLOCK_TASK: '-fix the bug', AIRLOCK_MODEL: 'm-1', AIRLOCK_PROVIDER_FORMAT: 'anthropic', AIRLOCK_MAX_STEPS: '7', AIRLOCK_APPROVAL: 'auto',
      ANTHROPIC_BASE_URL: 'http://127.0.0.1:41000', OPENAI_BASE_URL: 'http://127.0.0.1:41000/v1', ANTHROPIC_API_KEY: ctx.token, OPENAI_API_KEY: ctx.token,
    });
    // The token travels in env only, never in argv.
    expect(cmd.argv.join(' ')).not.toContain(ctx.token);
  });

  it('claude-code: print mode, stream-json, the task after --', () => {
    const cmd = getAgentAdapter('claude-code').command(ctx);
    const i = cmd.argv.indexOf('claude');
    expect(cmd.argv.slice(i)).toEqual(['claude', '-p', '--output-format', 'stream-json', '--verbose', '--include-partial-messages', '--dangerously-skip-permissions', '--model', 'm-1', '--max-turns', '7', '--', '-fix the bug']);
    expect(cmd.env).toMatchObject({ ANTHROPIC_BASE_URL: 'http://127.0.0.1:41000', ANTHROPIC_API_KEY: ctx.token });
    expect(cmd.argv.join(' ')).not.toContain(ctx.token);
  });

  it('claude-code with the run MCP gateway: its only MCP server, the config (and its token) from env, never argv', () => {
    const mcp = { url: 'http://127.0.0.1:42000/mcp', token: 'airlock-run-mcp-token-xyz' };
    const cmd = getAgentAdapter('claude-code').command({ ...ctx, mcp });
    expect(cmd.argv[2]).toContain('exec "$c" --mcp-config "$AIRLOCK_MCP_CONFIG" --strict-mcp-config "$@"');
    expect(JSON.parse(cmd.env.AIRLOCK_MCP_CONFIG as string)).toEqual({ mcpServers: { airlock: { type: 'http', url: mcp.url, headers: { Authorization: `Bearer ${mcp.token}` } } } });
    expect(cmd.argv.join(' ')).not.toContain(mcp.token);
    // Without a gateway, no MCP configuration at all.
    expect(getAgentAdapter('claude-code').command(ctx).env.AIRLOCK_MCP_CONFIG).toBeUndefined();
    expect(getAgentAdapter('custom').supportsMcp).toBeFalsy();
  });

  it('codex with the run MCP gateway: [mcp_servers.airlock] for this run, the token from env, never argv', () => {
    const mcp = { url: 'http://127.0.0.1:42000/mcp', token: 'airlock-run-mcp-token-xyz' };
    const cmd = getAgentAdapter('codex').command({ ...ctx, providerFormat: 'openai', mcp });
    expect(getAgentAdapter('codex').supportsMcp).toBe(true);
    expect(cmd.argv).toContain('mcp_servers.airlock.url="http://127.0.0.1:42000/mcp"');
    expect(cmd.argv).toContain('mcp_servers.airlock.bearer_token_env_var="AIRLOCK_MCP_TOKEN"');
    expect(cmd.argv).toContain('mcp_servers.airlock.required=true');
    expect(cmd.env.AIRLOCK_MCP_TOKEN).toBe(mcp.token);
    expect(cmd.argv.join(' ')).not.toContain(mcp.token);
    // The overrides come before the task (after `--` everything is the prompt).
    expect(cmd.argv.indexOf('mcp_servers.airlock.url="http://127.0.0.1:42000/mcp"')).toBeLessThan(cmd.argv.indexOf('--'));
    const plain = getAgentAdapter('codex').command({ ...ctx, providerFormat: 'openai' });
    expect(plain.argv.join(' ')).not.toContain('mcp_servers');
    expect(plain.env.AIRLOCK_MCP_TOKEN).toBeUndefined();
  });

  it('builtin with the run MCP gateway: its endpoint and token in the environment only', () => {
    const mcp = { url: 'http://127.0.0.1:42000/mcp', token: 'airlock-run-mcp-token-xyz' };
    const cmd = getAgentAdapter('builtin').command({ ...ctx, mcp });
    expect(getAgentAdapter('builtin').supportsMcp).toBe(true);
    expect(cmd.env).toMatchObject({ AIRLOCK_MCP_URL: mcp.url, AIRLOCK_MCP_TOKEN: mcp.token });
    expect(cmd.argv.join(' ')).not.toContain(mcp.token);
    expect(getAgentAdapter('builtin').command(ctx).env.AIRLOCK_MCP_URL).toBeUndefined();
  });

  it('codex: exec --json with the airlock provider pointed at the proxy', () => {
    const cmd = getAgentAdapter('codex').command({ ...ctx, providerFormat: 'openai' });
    expect(cmd.argv).toContain('model_providers.airlock.base_url="http://127.0.0.1:41000/v1"');
    expect(cmd.argv).toContain('model_providers.airlock.wire_api="responses"');
    expect(cmd.argv).toContain('model_providers.airlock.env_key="OPENAI_API_KEY"');
    expect(cmd.argv.slice(-2)).toEqual(['--', '-fix the bug']);
    expect(cmd.env).toMatchObject({ OPENAI_API_KEY: ctx.token, CODEX_HOME: expect.any(String) });
    expect(cmd.argv.join(' ')).not.toContain(ctx.token);
  });

  it('claude-code with a Claude subscription: the run token in CLAUDE_CODE_OAUTH_TOKEN, no API key variable', () => {
    const cmd = getAgentAdapter('claude-code').command({ ...ctx, credential: { kind: 'claude-subscription' } });
    expect(cmd.env).toMatchObject({ ANTHROPIC_BASE_URL: 'http://127.0.0.1:41000', CLAUDE_CODE_OAUTH_TOKEN: ctx.token });
    expect(cmd.env.ANTHROPIC_API_KEY).toBeUndefined();
    // The common provider settings would set ANTHROPIC_API_KEY, which wins over the OAuth token.
    expect(cmd.unsetEnv).toEqual(expect.arrayContaining(['ANTHROPIC_API_KEY']));
    expect(cmd.argv.join(' ')).not.toContain(ctx.token);
  });

  it('codex with a ChatGPT sign-in: a placeholder auth.json, OpenAI auth required, refresh and ChatGPT URLs at the proxy', () => {
    const credential = { kind: 'chatgpt-signin' as const, refreshToken: 'airlock-refresh-xyz', idToken: 'h.p.airlock-unsigned', accountId: 'acct-1' };
    const cmd = getAgentAdapter('codex').command({ ...ctx, providerFormat: 'openai', credential });
    expect(cmd.argv).toContain('model_providers.airlock.requires_openai_auth=true');
    expect(cmd.argv).not.toContain('model_providers.airlock.env_key="OPENAI_API_KEY"');
    expect(cmd.argv).toContain('chatgpt_base_url="http://127.0.0.1:41000/backend-api/"');
    expect(cmd.env.CODEX_REFRESH_TOKEN_URL_OVERRIDE).toBe('http://127.0.0.1:41000/oauth/token');
    expect(cmd.env.OPENAI_API_KEY).toBeUndefined();
    expect(cmd.unsetEnv).toEqual(['OPENAI_API_KEY']);
    const auth = JSON.parse(cmd.env.AIRLOCK_CODEX_AUTH!) as { tokens: Record<string, string>; last_refresh: string };
    expect(auth.tokens).toEqual({ id_token: 'h.p.airlock-unsigned', access_token: ctx.token, refresh_token: 'airlock-refresh-xyz', account_id: 'acct-1' });
    expect(Date.parse(auth.last_refresh)).toBeGreaterThan(0);
    // The wrapper writes it (mode 600) and drops the variable before the CLI starts.
    expect(cmd.argv[2]).toContain('umask 077');
    expect(cmd.argv[2]).toContain('unset AIRLOCK_CODEX_AUTH');
    expect(cmd.argv.join(' ')).not.toContain(ctx.token);
  });

  it('custom: needs a command line and maps nothing', () => {
    expect(() => getAgentAdapter('custom').command(ctx)).toThrow(/needs a command line/);
    const cmd = getAgentAdapter('custom').command({ ...ctx, customCommand: 'aider --yes' });
    expect(cmd.argv).toEqual(['bash', '-lc', 'aider --yes']);
    expect(getAgentAdapter('custom').createParser().push(Buffer.from('{"type":"assistant_text","delta":"x"}\n'))).toEqual([]);
  });

  it('knows its agents', () => {
    expect(AGENT_IDS).toEqual(['builtin', 'claude-code', 'codex', 'custom']);
    expect(() => getAgentAdapter('gpt-engineer')).toThrow(/Unknown agent/);
  });
});

describe('recorded output of the real CLIs (agents image, fake upstream)', () => {
  const fixture = (name: string) => readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8').split('\n').filter(Boolean);

  it('Claude Code 2.1 stream-json: a Bash call, its output and the result', () => {
    const events = feed(createClaudeCodeParser(), fixture('claude-code-stream.jsonl'));
    expect(events.map((e) => e.type)).toEqual(['tool_call', 'command_started', 'tool_result', 'command_output', 'command_exited', 'assistant_text', 'usage', 'finished']);
    expect(events[1]).toMatchObject({ type: 'command_started', command: 'echo hello-from-claude > out.txt && cat out.txt' });
    expect(events[3]).toMatchObject({ type: 'command_output', data: 'hello-from-claude' });
    expect(events[6]).toMatchObject({ type: 'usage', inputTokens: 43640, outputTokens: 12 });
    expect(events[7]).toEqual({ type: 'finished', summary: 'All done here.', reason: 'end_turn' });
  });

  it('Claude Code 2.1 with --include-partial-messages: text as deltas, no repeat of the whole block', () => {
    const events = feed(createClaudeCodeParser(), fixture('claude-code-stream-partial.jsonl'));
    expect(events.map((e) => e.type)).toEqual([
      'tool_call', 'command_started', 'tool_result', 'command_output', 'command_exited',
      'assistant_text', 'assistant_text', 'assistant_text', 'usage', 'finished',
    ]);
    expect(events.filter((e) => e.type === 'assistant_text').map((e) => (e as { delta: string }).delta).join('')).toBe('All done here.');
  });

  it('Codex CLI 0.171 exec --json: a command, a message and the turn', () => {
    const events = feed(createCodexParser(), fixture('codex-exec.jsonl'));
    expect(events.map((e) => e.type)).toEqual(['tool_call', 'command_started', 'command_output', 'command_exited', 'tool_result', 'assistant_text', 'usage', 'finished']);
    expect(events[2]).toMatchObject({ type: 'command_output', data: 'hello-from-codex\n' });
    expect(events[3]).toMatchObject({ type: 'command_exited', exitCode: 0 });
    expect(events[6]).toEqual({ type: 'usage', inputTokens: 20224, outputTokens: 12 });
    expect(events[7]).toEqual({ type: 'finished', summary: 'All done here.', reason: 'end_turn' });
  });
});

describe('what the run terminal shows', () => {
  it('structured agents send their JSON to the transcript; a custom command is shown as it printed', () => {
    expect(getAgentAdapter('claude-code').terminal).toBe('commands');
    expect(getAgentAdapter('codex').terminal).toBe('commands');
    expect(getAgentAdapter('builtin').terminal).toBe('commands');
    expect(getAgentAdapter('custom').terminal).toBe('raw');
  });
});
