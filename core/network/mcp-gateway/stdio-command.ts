import { AirlockError } from '../../../contracts/errors';
import { MCP_ENV_NAME, McpStdioSchema, type McpStdio } from './mcp-server-registry';

/**
 * Turns the command a user gives for a stdio server (as in `.mcp.json` or `claude mcp add`) into a
 * registry entry (docs/architecture.md §20). `npx [-y] PKG[@VER] ARGS…` becomes a package fetched on
 * the host with its scripts off and the package's program run in the sidecar: npx itself never runs,
 * on the host or in the sidecar (it would fetch through a network the sidecar does not have).
 */
export function parseStdioCommand(command: readonly string[], o: { image?: string; env?: readonly string[] } = {}): McpStdio {
  if (command.length === 0) throw new AirlockError('INVALID_INPUT', 'give the server command after --, e.g. -- npx -y @modelcontextprotocol/server-everything@2026.8.31', { field: 'stdio' });
  const env: Record<string, string> = {};
  for (const kv of o.env ?? []) {
    const eq = kv.indexOf('=');
    const k = eq < 0 ? kv : kv.slice(0, eq);
    if (eq < 0 || !MCP_ENV_NAME.test(k)) throw new AirlockError('INVALID_INPUT', `--env ${kv.slice(0, 60)}: write NAME=value (a secret goes with --secret-env NAME, its value on stdin)`, { field: 'env' });
    env[k] = kv.slice(eq + 1);
  }
  let out: Partial<McpStdio> = { command: [...command] };
  if (command[0] === 'npx' && !o.image) {
    const rest = command.slice(1);
    while (rest[0] === '-y' || rest[0] === '--yes') rest.shift();
    const [spec, ...args] = rest;
    if (!spec || spec.startsWith('-')) throw new AirlockError('INVALID_INPUT', 'after npx name the package: npx -y PACKAGE@VERSION ARGS…', { field: 'stdio' });
    // The package's own program (its bin) runs; the arguments follow it.
    out = { package: spec, command: args.length ? args : [] };
  }
  const parsed = McpStdioSchema.safeParse({ ...out, ...(o.image ? { image: o.image } : {}), ...(Object.keys(env).length ? { env } : {}) });
  if (!parsed.success) throw new AirlockError('INVALID_INPUT', `the stdio server is not valid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ').slice(0, 400)}`, { field: 'stdio' });
  return parsed.data;
}
