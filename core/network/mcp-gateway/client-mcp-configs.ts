import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { proposedServers, type ProposedMcpServer } from './project-mcp-config';

/**
 * What the user's other MCP clients already configure (docs/architecture.md §20): Claude Code
 * (`~/.claude.json`, its user servers and the project's local ones), Cursor (`~/.cursor/mcp.json`,
 * `<project>/.cursor/mcp.json`), VS Code (its user `mcp.json`, `<project>/.vscode/mcp.json`) and Codex
 * (`config.toml`'s `[mcp_servers.NAME]`). Listed as proposals the user may import, never enabled by
 * being there; header and environment values (tokens) are never read out, only their names.
 */

const MAX_FILE_BYTES = 4 * 1024 * 1024;

/** One configuration file found and what it proposes. */
export interface ClientMcpConfig {
  /** `Claude Code`, `Cursor`, `VS Code` or `Codex`, with the file. */
  source: string;
  servers: ProposedMcpServer[];
}

async function readSmall(file: string): Promise<string | undefined> {
  try {
    const buf = await readFile(file);
    return buf.byteLength > MAX_FILE_BYTES ? undefined : buf.toString('utf8');
  } catch {
    // Missing or unreadable: that client has nothing to propose here.
    return undefined;
  }
}

async function readJson(file: string): Promise<Record<string, unknown> | undefined> {
  const text = await readSmall(file);
  if (text === undefined) return undefined;
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function mapOf(v: unknown): object | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? v : undefined;
}

/** Codex's `[mcp_servers.NAME]` tables, read for what a listing needs (strings, string arrays, sub-table key names). */
export function codexServers(toml: string): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  let current: Record<string, unknown> | undefined;
  for (const raw of toml.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const table = /^\[\s*mcp_servers\.("?)([A-Za-z0-9_-]{1,100})\1(?:\.(env|http_headers))?\s*\]$/.exec(line);
    if (table) {
      const server = (out[table[2]!] ??= {});
      current = table[3] ? ((server[table[3]] ??= {}) as Record<string, unknown>) : server;
      continue;
    }
    if (line.startsWith('[')) {
      current = undefined;
      continue;
    }
    const kv = /^([A-Za-z0-9_-]+)\s*=\s*(.*)$/.exec(line);
    if (!current || !kv) continue;
    const [, key, value] = kv as unknown as [string, string, string];
    const quoted = /^"((?:[^"\\]|\\.)*)"$/.exec(value) ?? /^'([^']*)'$/.exec(value);
    if (quoted) current[key] = quoted[1];
    else if (value.startsWith('[')) current[key] = [...value.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]);
    else if (value.startsWith('{')) current[key] = Object.fromEntries([...value.matchAll(/([A-Za-z0-9_-]+)\s*=/g)].map((m) => [m[1], '']));
  }
  return out;
}

/**
 * Every client configuration found for this user (`userHome`) and, with `projectDir`, that project's
 * client files. `env` names where Codex and VS Code keep theirs (`CODEX_HOME`, `APPDATA`).
 */
export async function readClientMcpConfigs(opts: { userHome: string; projectDir?: string; env?: Readonly<Record<string, string | undefined>> }): Promise<ClientMcpConfig[]> {
  const { userHome, env = {} } = opts;
  const project = opts.projectDir ? path.resolve(opts.projectDir) : undefined;
  const found: ClientMcpConfig[] = [];
  const add = (source: string, map: object | undefined) => {
    if (map) {
      const servers = proposedServers(map);
      if (servers.length) found.push({ source, servers });
    }
  };

  const claudeFile = path.join(userHome, '.claude.json');
  const claude = await readJson(claudeFile);
  add(`Claude Code (${claudeFile})`, mapOf(claude?.mcpServers));
  if (project) add(`Claude Code, this project (${claudeFile})`, mapOf(mapOf(mapOf(claude?.projects)?.[project as keyof object])?.['mcpServers' as keyof object]));

  const cursorFile = path.join(userHome, '.cursor', 'mcp.json');
  add(`Cursor (${cursorFile})`, mapOf((await readJson(cursorFile))?.mcpServers));
  if (project) {
    const f = path.join(project, '.cursor', 'mcp.json');
    add(`Cursor, the project (${f})`, mapOf((await readJson(f))?.mcpServers));
  }

  const vscodeUser = [
    path.join(userHome, '.config', 'Code', 'User', 'mcp.json'),
    path.join(userHome, 'Library', 'Application Support', 'Code', 'User', 'mcp.json'),
    ...(env.APPDATA ? [path.join(env.APPDATA, 'Code', 'User', 'mcp.json')] : []),
  ];
  for (const f of vscodeUser) add(`VS Code (${f})`, mapOf((await readJson(f))?.servers));
  if (project) {
    const f = path.join(project, '.vscode', 'mcp.json');
    add(`VS Code, the project (${f})`, mapOf((await readJson(f))?.servers));
  }

  const codexFile = path.join(env.CODEX_HOME || path.join(userHome, '.codex'), 'config.toml');
  const codex = await readSmall(codexFile);
  if (codex !== undefined) add(`Codex (${codexFile})`, codexServers(codex));
  return found;
}
