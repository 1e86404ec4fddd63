import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';

/**
 * A project's own `.mcp.json` (Claude Code's project MCP file), read as a request (docs/architecture.md
 * §20): the servers it names are listed as proposed by the project, never enabled by being there — a
 * run's gateway serves only servers the user added (`airlock mcp-servers add`), like a project's
 * network file proposes and never widens (§2.8). The file is the project's (attacker-writable): its
 * header and environment values may hold tokens and are never shown, only their names.
 */

/** Largest `.mcp.json` read (a bigger one is refused as not a configuration). */
const MAX_FILE_BYTES = 256 * 1024;
const MAX_SERVERS = 100;

/** One server the project proposes: what it is and where, without a value of its headers or environment. */
export interface ProposedMcpServer {
  name: string;
  /** `http` (Streamable HTTP), `sse`, or `stdio` (a command; not served by the gateway yet). */
  transport: 'http' | 'sse' | 'stdio';
  /** Origin and path only: a query or user-info is never shown (it may carry a token). */
  url?: string;
  /** For stdio: the command and its arguments, bounded. */
  command?: string;
  /** Names of the headers (http/sse) or environment variables (stdio) it sets, never their values. */
  secretNames: string[];
}

/** A URL as shown: origin and path only (a query or user-info may carry a token). */
function shownUrl(text: string): string | undefined {
  try {
    const u = new URL(text);
    return `${u.origin}${u.pathname}${u.search || u.username ? ' (query/credential hidden)' : ''}`;
  } catch {
    return '(not a URL)';
  }
}

function str(v: unknown, max: number): string | undefined {
  return typeof v === 'string' ? v.slice(0, max) : undefined;
}

/** Reads `<dir>/.mcp.json`; no file: an empty list. A file that is not a configuration is an error naming it. */
export async function readProjectMcpConfig(dir: string): Promise<{ file: string; servers: ProposedMcpServer[] }> {
  const file = path.join(path.resolve(dir), '.mcp.json');
  let text: string;
  try {
    const buf = await readFile(file);
    if (buf.byteLength > MAX_FILE_BYTES) throw new AirlockError('INVALID_INPUT', `${file} is over ${MAX_FILE_BYTES} bytes; it is not read as an MCP configuration`);
    text = buf.toString('utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { file, servers: [] };
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AirlockError('INVALID_INPUT', `${file} is not valid JSON; fix it or remove it (nothing of it is used by a run)`);
  }
  const map = (parsed as { mcpServers?: unknown } | null)?.mcpServers;
  if (typeof map !== 'object' || map === null || Array.isArray(map)) throw new AirlockError('INVALID_INPUT', `${file} has no "mcpServers" object; it is not an MCP configuration`);
  const servers = proposedServers(map);
  return { file, servers };
}

/**
 * The servers of one MCP client configuration's server map (`mcpServers` of Claude Code, Cursor and
 * `.mcp.json`; `servers` of VS Code; Codex's `mcp_servers` tables): what each is and where, and the
 * names — never the values — of the headers or environment variables it sets.
 */
export function proposedServers(map: object): ProposedMcpServer[] {
  const servers: ProposedMcpServer[] = [];
  for (const [name, raw] of Object.entries(map as Record<string, unknown>).slice(0, MAX_SERVERS)) {
    if (typeof raw !== 'object' || raw === null) continue;
    const s = raw as Record<string, unknown>;
    const url = str(s.url, 2000) ?? str(s.serverUrl, 2000);
    const command = str(s.command, 500);
    const type = str(s.type, 20);
    const transport = type === 'sse' ? 'sse' : type === 'stdio' || (!url && command) ? 'stdio' : 'http';
    const names = (o: unknown) => (typeof o === 'object' && o !== null && !Array.isArray(o) ? Object.keys(o).map((k) => k.slice(0, 100)) : []);
    const args = Array.isArray(s.args) ? s.args.filter((a): a is string => typeof a === 'string').map((a) => a.slice(0, 200)) : [];
    servers.push({
      name: name.slice(0, 100),
      transport,
      ...(transport !== 'stdio' && url ? { url: shownUrl(url) } : {}),
      ...(transport === 'stdio' && command ? { command: [command, ...args].join(' ').slice(0, 500) } : {}),
      secretNames: transport === 'stdio' ? names(s.env) : [...names(s.headers), ...names(s.http_headers), ...(typeof s.bearer_token_env_var === 'string' ? [s.bearer_token_env_var.slice(0, 100)] : [])],
    });
  }
  return servers;
}
