import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { airlockHome } from '../../common/paths';
import { joinWorker } from '../../mcp/mcp-worker';
import { parseCliArgs, positionalsExactly } from '../args';
import { COMMAND_HELP } from '../command-help';
import { ExitCode, type CliCommand, type CliIo } from '../command';

/**
 * Clients stop their MCP servers hard (Claude Code sends SIGINT, SIGTERM and SIGKILL within a
 * fraction of a second), too fast to collect a session's result and wipe its sandbox. So `airlock
 * mcp` relays stdio to a worker in a session of its own: when the client goes, however it goes,
 * the worker sees its input end, keeps each result and wipes each sandbox of that connection. A
 * running worker of this build is joined over its socket (`mcp-worker.ts`) rather than a new one
 * started: that is how a later connection reaches a kept sandbox (§17, "Kept sandboxes").
 */
async function relayToWorker(io: CliIo, flags: string[], join: { projects: string[]; allowApply: boolean }): Promise<number> {
  const joined = await joinWorker(airlockHome(io.env), join).catch(() => undefined); // no worker to join: start one
  if (joined) return relayOverSocket(io, joined);
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1] as string, 'mcp', '--worker', ...flags], { detached: true, stdio: ['pipe', 'pipe', 'pipe', 'ipc'], env: io.env });
  const { stdin, stdout, stderr } = child;
  if (!stdin || !stdout || !stderr) return ExitCode.failure; // never: all three are pipes
  io.stdin.pipe(stdin);
  stdout.pipe(io.stdout);
  stderr.pipe(io.stderr);
  stdin.on('error', () => undefined);
  const stop = () => stdin.end();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const sig of signals) process.on(sig, stop);
  try {
    return await new Promise<number>((resolve) => {
      child.once('error', () => resolve(ExitCode.failure));
      child.once('exit', (code) => resolve(code ?? ExitCode.failure));
      // The worker is done with this connection but stays for others (kept sandboxes, joined relays).
      child.on('message', (m: unknown) => {
        if ((m as { released?: unknown } | null)?.released !== true) return;
        stdout.unpipe(io.stdout);
        stderr.unpipe(io.stderr);
        stdout.destroy();
        stderr.destroy();
        child.disconnect();
        child.unref();
        resolve(ExitCode.ok);
      });
    });
  } finally {
    for (const sig of signals) process.off(sig, stop);
    io.stdin.unpipe(stdin);
    (io.stdin as Readable).destroy?.();
  }
}

/** One client's stdio over a joined worker's socket; the worker closes it once the connection's sandboxes are wiped. */
async function relayOverSocket(io: CliIo, socket: Socket): Promise<number> {
  io.stderr.write('airlock mcp: serving over stdio\n');
  io.stdin.pipe(socket);
  socket.pipe(io.stdout);
  const stop = () => socket.end();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  for (const sig of signals) process.on(sig, stop);
  try {
    return await new Promise<number>((resolve) => {
      socket.once('error', () => resolve(ExitCode.failure));
      socket.once('close', () => resolve(ExitCode.ok));
    });
  } finally {
    for (const sig of signals) process.off(sig, stop);
    io.stdin.unpipe(socket);
    (io.stdin as Readable).destroy?.();
  }
}

/**
 * `airlock mcp [--allow-apply]`: the MCP server over stdio (docs/architecture.md §17), for a client
 * that starts it (`claude mcp add airlock -- airlock mcp`). stdout is the protocol; notes go to
 * stderr. When the client goes (stdin ends) or a signal comes, every sandbox it made is wiped.
 */
export const mcpCommand: CliCommand = {
  name: 'mcp',
  summary: COMMAND_HELP.mcp.summary,
  usage: COMMAND_HELP.mcp.usage,
  async run(args: string[], io: CliIo): Promise<number> {
    const { values, positionals } = parseCliArgs(args, { project: { type: 'string', multiple: true }, 'allow-apply': { type: 'boolean' }, cold: { type: 'boolean' }, foreground: { type: 'boolean' }, worker: { type: 'boolean' } });
    positionalsExactly(positionals);
    const allowApply = values['allow-apply'] === true;
    const cold = values.cold === true;
    // Granted folders are absolute and resolved now: the worker may run elsewhere.
    const projects = (values.project ?? []).map((p) => path.resolve(p));
    if (!values.foreground && !values.worker && process.argv[1]) return relayToWorker(io, [...projects.flatMap((p) => ['--project', p]), ...(allowApply ? ['--allow-apply'] : []), ...(cold ? ['--cold'] : [])], { projects, allowApply });
    const { serveMcp } = await import('./mcp-serve');
    return serveMcp(io, { projects, allowApply, cold, worker: values.worker === true });
  },
};
