import path from 'node:path';
import { z } from 'zod';
import { McpServerName } from '../../../contracts/mcp-servers';
import { StoredFile } from '../../common/stored-file';
import { parseStoredJson } from '../../common/stored-json';
import { projectDataDir } from '../project-network-store';

const DefaultsFile = z
  .object({
    version: z.literal(1),
    /** The project path, for humans reading the file; the folder's hash is what identifies it. */
    project: z.string().optional(),
    /** The user's servers this project's runs get when none are named (`--mcp`). */
    servers: z.array(McpServerName).max(50),
  })
  .strict();
type DefaultsFile = z.infer<typeof DefaultsFile>;

/**
 * The MCP servers the user enabled for a project (docs/architecture.md §20 "Enabled per project"):
 * `<home>/projects/<hash>/mcp-servers.json`, names only (the servers and their credentials are the
 * user's registry). Written only by the user's own action (the MCP servers screen, the CLI); a
 * project's `.mcp.json` never writes here.
 */
export class ProjectMcpDefaults {
  readonly file: string;
  private readonly stored: StoredFile<DefaultsFile>;

  constructor(
    readonly projectPath: string,
    home: string,
  ) {
    this.file = path.join(projectDataDir(projectPath, home), 'mcp-servers.json');
    this.stored = new StoredFile<DefaultsFile>(this.file, {
      parse: (file, text) => parseStoredJson(DefaultsFile, file, text, "fix or delete it to reset the project's MCP servers."),
      empty: () => ({ version: 1, servers: [] }),
    });
  }

  /** The enabled names, in the order the user gave them; none when never set. */
  async load(): Promise<string[]> {
    return (await this.stored.read()).servers;
  }

  /** Replaces the enabled names (no duplicates). */
  async save(names: readonly string[]): Promise<string[]> {
    const servers = [...new Set(names.map((n) => McpServerName.parse(n)))];
    await this.stored.update(() => ({ version: 1, project: path.resolve(this.projectPath), servers }));
    return servers;
  }
}
