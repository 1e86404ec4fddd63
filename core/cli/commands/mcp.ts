import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Readable, Writable } from 'node:stream';
import { createAirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import { ApplyApprovals } from '../../mcp/apply-approvals';
import { createMcpConnection } from '../../mcp/mcp-server';
import { parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { untilSignal } from './serve';

/** Largest JSON-RPC message read from stdin: a capped file write in base64, with room. */
const STDIO_MESSAGE_BYTES = 32 * 1024 * 1024;

/**
 * `airlock mcp [--allow-apply]`: the MCP server over stdio (docs/architecture.md §16), for a client
 * that starts it (`claude mcp add airlock -- airlock mcp`). stdout is the protocol; notes go to
 * stderr. When the client goes (stdin ends) or a signal comes, every sandbox it made is wiped.
 */
export const mcpCommand: CliCommand = {
  name: 'mcp',
  summary: 'Serve Airlock sandboxes and runs to an MCP client (Claude Code, Codex, Cursor, VS Code) over stdio.',
  usage: 'airlock mcp [--allow-apply]   (--allow-apply: run_apply writes without asking the user; recorded in the audit log)',
  async run(args: string[], io: CliIo): Promise<number> {
    const { values, positionals } = parseCliArgs(args, { 'allow-apply': { type: 'boolean' } });
    positionalsExactly(positionals);
    const allowApply = values['allow-apply'] === true;
    const stop = untilSignal(io.stderr);
    const core = await createAirlockCore({ env: io.env });
    const services = servicesFor(core);
    const connection = createMcpConnection({
      core,
      services,
      approvals: new ApplyApprovals(core.home),
      allowApply,
      approveHint: 'Open the Airlock app (or run `airlock serve`): the request is shown there with the exact change to approve',
    });
    const transport = new StdioServerTransport(io.stdin as Readable, io.stdout as Writable, { maxBufferSize: STDIO_MESSAGE_BYTES });
    const gone = new Promise<string>((resolve) => {
      transport.onclose = () => resolve('the client disconnected');
      io.stdin.once('end', () => resolve('the client disconnected'));
      io.stdin.once('close', () => resolve('the client disconnected'));
      void stop.stopped.then(() => resolve('airlock mcp was stopped'));
    });
    try {
      io.stderr.write(`airlock mcp: serving over stdio${allowApply ? ' (--allow-apply: run_apply writes without asking; recorded)' : ''}\n`);
      await connection.server.connect(transport);
      const reason = await gone;
      await connection.close(reason);
      return ExitCode.ok;
    } finally {
      try {
        await connection.close('airlock mcp stopped');
        await transport.close().catch(() => undefined);
        await services.dispose();
      } finally {
        stop.done();
      }
    }
  },
};
