import { shellWord } from '../../contracts/cli-command';
import type { McpInfo } from '../../contracts/mcp';
import type { AirlockCommand } from './airlock-command';

/**
 * How each client is pointed at Airlock (README "Use Airlock from Claude Code, Codex, Cursor or VS
 * Code"; Settings shows these with copy buttons). stdio starts `airlock mcp` (by its full path when
 * `airlock` is not on the PATH: airlock-command.ts); over HTTP, the app's loopback door with its bearer token.
 */
export function mcpSetupLines(http?: { url: string; token: string }, cmd: Pick<AirlockCommand, 'command' | 'args'> = { command: 'airlock', args: [] }): McpInfo['setup'] {
  const args = [...cmd.args, 'mcp'];
  // TOML and JSON strings share the escapes a path can need (`\`, `"`).
  const toml = (s: string) => JSON.stringify(s);
  const lines: McpInfo['setup'] = [
    { client: 'claude-code', label: 'Claude Code', text: `claude mcp add airlock -- ${[cmd.command, ...args].map(shellWord).join(' ')}` },
    // `required`: Codex leaves out an optional server that takes over 1 s to start; `approve`: `codex
    // exec` never asks, so tools needing approval would fail (run_apply still waits for the user in Airlock).
    { client: 'codex', label: 'Codex (~/.codex/config.toml)', text: `[mcp_servers.airlock]\ncommand = ${toml(cmd.command)}\nargs = [${args.map(toml).join(', ')}]\nrequired = true\nstartup_timeout_sec = 60\ntool_timeout_sec = 600\ndefault_tools_approval_mode = "approve"` },
    { client: 'cursor', label: 'Cursor (.cursor/mcp.json)', text: JSON.stringify({ mcpServers: { airlock: { command: cmd.command, args } } }, null, 2) },
    { client: 'vscode', label: 'VS Code (.vscode/mcp.json)', text: JSON.stringify({ servers: { airlock: { type: 'stdio', command: cmd.command, args } } }, null, 2) },
  ];
  if (http) {
    const auth = `Bearer ${http.token}`;
    lines.push(
      { client: 'claude-code-http', label: 'Claude Code, over HTTP (while the app runs)', text: `claude mcp add --transport http airlock-app ${http.url} --header "Authorization: ${auth}"` },
      { client: 'codex-http', label: 'Codex, over HTTP', text: `[mcp_servers.airlock-app]\nurl = "${http.url}"\nhttp_headers = { Authorization = "${auth}" }` },
      { client: 'vscode-http', label: 'VS Code / Cursor, over HTTP', text: JSON.stringify({ servers: { 'airlock-app': { type: 'http', url: http.url, headers: { Authorization: auth } } } }, null, 2) },
    );
  }
  return lines;
}
