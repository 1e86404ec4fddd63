import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { AirlockCommand } from './airlock-command';
import { debugLog } from '../common/debug-log';

/** What starting the setup lines' command as a client would found. */
export interface SetupCheck {
  ok: boolean;
  /** Tools the server listed. */
  tools: number;
  ms: number;
  error?: string;
}

/**
 * Starts `airlock mcp` exactly as the setup lines do (same command, arguments and environment as this
 * process) and lists its tools through the official SDK's stdio client: Settings → MCP's "Test".
 */
export async function checkStdioSetup(cmd: Pick<AirlockCommand, 'command' | 'args'>, env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<SetupCheck> {
  const started = performance.now();
  const transport = new StdioClientTransport({ command: cmd.command, args: [...cmd.args, 'mcp'], env: Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined)), stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (b: Buffer) => { stderr = (stderr + b.toString('utf8')).slice(-2000); });
  const client = new Client({ name: 'airlock-settings-test', version: '1' });
  try {
    await client.connect(transport, { timeout: timeoutMs });
    const { tools } = await client.listTools(undefined, { timeout: timeoutMs });
    return { ok: true, tools: tools.length, ms: Math.round(performance.now() - started) };
  } catch (err) {
    const why = (err as Error).message;
    const tail = stderr.trim().split('\n').slice(-3).join(' ').slice(0, 400);
    return { ok: false, tools: 0, ms: Math.round(performance.now() - started), error: `${cmd.command} ${[...cmd.args, 'mcp'].join(' ')} did not answer as an MCP server: ${why}${tail ? ` (it printed: ${tail})` : ''}` };
  } finally {
    await client.close().catch(debugLog.swallow('setupCheck.mcp.close'));
  }
}
