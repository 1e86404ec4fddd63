import { spawn } from 'node:child_process';
import { COMMAND_HELP } from '../command-help';
import path from 'node:path';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { Readable, Writable } from 'node:stream';
import { createAirlockCore, type AirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import { ApplyApprovals } from '../../mcp/apply-approvals';
import { ClientGrants } from '../../runs/client-grants';
import { createMcpConnection, type McpDeps } from '../../mcp/mcp-server';
import { parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { untilSignal } from './serve';
import type { Socket } from 'node:net';
import { airlockHome } from '../../common/paths';
import { debugLog } from '../../common/debug-log';
import { KeptSandboxes, sweepKeptRecords } from '../../mcp/kept-sandboxes';
import { DEFAULT_MCP_LIMITS } from '../../mcp/mcp-limits';
import { buildId, joinWorker, openWorkerDoor, workerSocketPath, type WorkerDoor } from '../../mcp/mcp-worker';

/**
 * Clients stop their MCP servers hard (Claude Code sends SIGINT, SIGTERM and SIGKILL within a
 * fraction of a second), too fast to collect a session's result and wipe its sandbox. So `airlock
 * mcp` relays stdio to a worker in a session of its own: when the client goes, however it goes,
 * the worker sees its input end, keeps each result and wipes each sandbox of that connection. A
 * running worker of this build is joined over its socket (`mcp-worker.ts`) rather than a new one
 * started: that is how a later connection reaches a kept sandbox (§17, "Kept sandboxes").
 */
async function relayToWorker(io: CliIo, flags: string[], join: { projects: string[]; allowApply: boolean }): Promise<number> {
  const joined = await joinWorker(airlockHome(io.env), join).catch(() => undefined);
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

/** Largest JSON-RPC message read from stdin: a capped file write in base64, with room. */
const STDIO_MESSAGE_BYTES = 32 * 1024 * 1024;

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
    const worker = values.worker === true;
    if (worker) {
      // The relay may be gone (its client killed it): writes then fail, and the sandboxes are still wiped.
      io.stdout.on('error', () => undefined);
      io.stderr.on('error', () => undefined);
    }
    const stop = untilSignal(io.stderr);
    const keepIdleMs = keptIdleMs(io.env);
    let door: WorkerDoor | undefined;
    // The client's initialize is answered while the core starts (crash recovery included); tools wait for it.
    const starting: Promise<McpDeps> = createAirlockCore({ env: io.env }).then(async (core) => {
      // A client that starts Airlock is about to ask for a sandbox: like the app, the server keeps
      // one started (hardened, empty, no network) for the next sandbox_create (§17, mcp.sandbox.ready).
      if (!cold) void core.warm();
      const deps: McpDeps = {
        core,
        services: servicesFor(core, undefined, { asksForMcp: false }),
        approvals: new ApplyApprovals(core.home),
        grants: new ClientGrants({ home: core.home, settings: core.settings }),
        projects,
        allowApply,
        approveHint: 'Open the Airlock app (or run `airlock serve`): the request is shown there with the exact change to approve',
      };
      // Later `airlock mcp` processes join a worker over its socket; only then can a sandbox be kept (§17, "Kept sandboxes").
      door = worker ? await openDoor(core, starting, io) : undefined;
      if (door) deps.kept = new KeptSandboxes({ home: core.home, end: (id, why) => core.runs.endSession(id, why), cap: DEFAULT_MCP_LIMITS.sandboxesPerClient, idleMs: keepIdleMs });
      return deps;
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
      if (worker) {
        // This client is done: its relay may go. The worker stays while it serves a joined
        // connection or holds a kept sandbox, and goes when it has neither (or is stopped).
        await transport.close().catch(() => undefined);
        if (process.send) process.send({ released: true }, () => process.disconnect?.());
        await untilUnused(door, (await starting.catch(() => undefined))?.kept, stop.stopped);
      }
      return ExitCode.ok;
    } finally {
      try {
        await door?.close('airlock mcp stopped');
        await connection.close('airlock mcp stopped');
        await transport.close().catch(() => undefined);
        const deps = await starting.catch(() => undefined);
        await deps?.kept?.dispose('airlock mcp stopped');
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

/** How long a kept sandbox may stay unused (`AIRLOCK_MCP_KEEP_IDLE_SEC`, default 30 minutes). */
function keptIdleMs(env: NodeJS.ProcessEnv): number {
  const sec = Number(env.AIRLOCK_MCP_KEEP_IDLE_SEC);
  return Number.isFinite(sec) && sec >= 1 && sec <= 24 * 3600 ? sec * 1000 : DEFAULT_MCP_LIMITS.idleMs;
}

/** The worker's socket for joining relays, once the core has started; none where no socket can be made. */
async function openDoor(core: AirlockCore, deps: Promise<McpDeps>, io: CliIo): Promise<WorkerDoor | undefined> {
  const socketPath = workerSocketPath(core.home);
  if (!socketPath) return undefined;
  // Any `airlock mcp` start recovers what crashed processes left; a join is such a start. Only
  // others' leftovers: this process may be making a sandbox right now.
  const recover = () => void core.sandboxes('container').then((m) => core.runs.recover([m], { othersOnly: true })).then(() => sweepKeptRecords(core.home)).catch(debugLog.swallow('mcp.worker.recover'));
  return openWorkerDoor({ home: core.home, socketPath, build: await buildId(), deps, maxMessageBytes: STDIO_MESSAGE_BYTES, onJoin: recover }).catch((err: unknown) => {
    io.stderr.write(`airlock mcp: later connections cannot join this server (${(err as Error).message}); each starts its own, and keep is refused\n`);
    return undefined;
  });
}

/** Resolves once nothing holds the worker: no joined connection and no kept sandbox — or it is stopped. */
async function untilUnused(door: WorkerDoor | undefined, kept: KeptSandboxes | undefined, stopped: Promise<void>): Promise<void> {
  const unused = () => (door?.active ?? 0) === 0 && (kept?.size ?? 0) === 0;
  if (unused()) return;
  await new Promise<void>((resolve) => {
    const check = () => {
      if (!unused()) return;
      subs.forEach((d) => d.dispose());
      resolve();
    };
    const subs = [door?.onDidChange(check), kept?.onDidChange(check)].filter((d): d is NonNullable<typeof d> => !!d);
    void stopped.then(() => {
      subs.forEach((d) => d.dispose());
      resolve();
    });
  });
}
