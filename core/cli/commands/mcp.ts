import { spawn } from 'node:child_process';
import path from 'node:path';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Readable, Writable } from 'node:stream';
import { createAirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import { ApplyApprovals } from '../../mcp/apply-approvals';
import { ClientGrants } from '../../runs/client-grants';
import { createMcpConnection } from '../../mcp/mcp-server';
import { parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { untilSignal } from './serve';

/**
 * Clients stop their MCP servers hard (Claude Code sends SIGINT, SIGTERM and SIGKILL within a
 * fraction of a second), too fast to collect a session's result and wipe its sandbox. So `airlock
 * mcp` relays stdio to a worker in a session of its own: when the client goes, however it goes,
 * the worker sees its input end, keeps each result, wipes each sandbox, and exits.
 */
async function relayToWorker(io: CliIo, flags: string[]): Promise<number> {
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1] as string, 'mcp', '--worker', ...flags], { detached: true, stdio: ['pipe', 'pipe', 'pipe'], env: io.env });
  io.stdin.pipe(child.stdin);
  child.stdout.pipe(io.stdout);
  child.stderr.pipe(io.stderr);
  child.stdin.on('error', () => undefined);
  const stop = () => child.stdin.end();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const sig of signals) process.on(sig, stop);
  try {
    return await new Promise<number>((resolve) => {
      child.once('error', () => resolve(ExitCode.failure));
      child.once('exit', (code) => resolve(code ?? ExitCode.failure));
    });
  } finally {
    for (const sig of signals) process.off(sig, stop);
  }
}

/** Largest JSON-RPC message read from stdin: a capped file write in base64, with room. */
const STDIO_MESSAGE_BYTES = 32 * 1024 * 1024;

/**
 * `airlock mcp [--allow-apply]`: the MCP server over stdio (docs/architecture.md §17), for a client
 * that starts it (`claude mcp add airlock -- airlock mcp`). stdout is the protocol; notes go to
 * stderr. When the client goes (stdin ends) or a signal comes, every sandbox it made is wiped.
 */
export const mcpCommand: CliCommand = {
  name: 'mcp',
  summary: 'Serve Airlock sandboxes and runs to an MCP client (Claude Code, Codex, Cursor, VS Code) over stdio.',
  usage: 'airlock mcp [--project DIR]… [--allow-apply] [--cold] [--foreground]   (--project: a folder clients may use besides those granted in Settings → MCP, repeatable; --allow-apply: run_apply writes unflagged changes into granted folders without asking the user, recorded in the audit log; --cold: keep no started sandbox ready for the next sandbox_create; --foreground: serve in this process, see docs/architecture.md §17)',
  async run(args: string[], io: CliIo): Promise<number> {
    const { values, positionals } = parseCliArgs(args, { project: { type: 'string', multiple: true }, 'allow-apply': { type: 'boolean' }, cold: { type: 'boolean' }, foreground: { type: 'boolean' }, worker: { type: 'boolean' } });
    positionalsExactly(positionals);
    const allowApply = values['allow-apply'] === true;
    const cold = values.cold === true;
    // Granted folders are absolute and resolved now: the worker may run elsewhere.
    const projects = (values.project ?? []).map((p) => path.resolve(p));
    if (!values.foreground && !values.worker && process.argv[1]) return relayToWorker(io, [...projects.flatMap((p) => ['--project', p]), ...(allowApply ? ['--allow-apply'] : []), ...(cold ? ['--cold'] : [])]);
    if (values.worker) {
      // The relay may be gone (its client killed it): writes then fail, and the sandboxes are still wiped.
      io.stdout.on('error', () => undefined);
      io.stderr.on('error', () => undefined);
    }
    const stop = untilSignal(io.stderr);
    // The client's initialize is answered while the core starts (crash recovery included); tools wait for it.
    const starting = createAirlockCore({ env: io.env }).then((core) => {
      // A client that starts Airlock is about to ask for a sandbox: like the app, the server keeps
      // one started (hardened, empty, no network) for the next sandbox_create (§17, mcp.sandbox.ready).
      if (!cold) void core.warm();
      return {
        core,
        services: servicesFor(core),
        approvals: new ApplyApprovals(core.home),
        grants: new ClientGrants({ home: core.home, settings: core.settings }),
        projects,
        allowApply,
        approveHint: 'Open the Airlock app (or run `airlock serve`): the request is shown there with the exact change to approve',
      };
    });
    starting.catch((err: unknown) => io.stderr.write(`airlock mcp: Airlock could not start: ${(err as Error).message}\n`));
    const connection = createMcpConnection(starting);
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
        const deps = await starting.catch(() => undefined);
        // The warm sandbox is wiped before the process goes (dispose alone does not wait for it).
        await deps?.core.sandboxes('container').then((m) => m.shutdown(), () => undefined).catch(() => undefined);
        await deps?.grants.dispose();
        await deps?.services.dispose();
      } finally {
        stop.done();
      }
    }
  },
};
