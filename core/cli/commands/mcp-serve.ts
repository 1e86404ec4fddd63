import type { Readable, Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { AirlockCore } from '../../app';
import { debugLog } from '../../common/debug-log';
import { ApplyApprovals } from '../../mcp/apply-approvals';
import { KeptSandboxes, sweepKeptRecords } from '../../mcp/kept-sandboxes';
import { DEFAULT_MCP_LIMITS } from '../../mcp/mcp-limits';
import { createMcpConnection, type McpDeps } from '../../mcp/mcp-server';
import { buildId, workerSocketPath } from '../../mcp/mcp-worker';
import { openWorkerDoor, type WorkerDoor } from '../../mcp/mcp-worker-door';
import { ClientGrants } from '../../runs/client-grants';
import { ExitCode, type CliIo } from '../command';
import { untilSignal } from './serve';

/** Largest JSON-RPC message read from stdin: a capped file write in base64, with room. */
const STDIO_MESSAGE_BYTES = 32 * 1024 * 1024;

/**
 * The MCP server of `airlock mcp` (docs/architecture.md §17): in the worker the relay started (and
 * later relays join), or in the first process with `--foreground`. Loaded only there: the relay
 * itself stays light.
 */
export async function serveMcp(io: CliIo, opts: { projects: string[]; allowApply: boolean; cold: boolean; worker: boolean }): Promise<number> {
  const { projects, allowApply, cold, worker } = opts;
  if (worker) {
    // The relay may be gone (its client killed it): writes then fail, and the sandboxes are still wiped.
    io.stdout.on('error', () => undefined);
    io.stderr.on('error', () => undefined);
  }
  const stop = untilSignal(io.stderr);
  const keepIdleMs = keptIdleMs(io.env);
  let door: WorkerDoor | undefined;
  // The client's initialize is answered while the core loads and starts (crash recovery included); tools wait for it.
  const starting: Promise<McpDeps> = Promise.all([import('../../app'), import('../../app-services')]).then(async ([{ createAirlockCore }, { servicesFor }]) => {
    const core = await createAirlockCore({ env: io.env, ...(io.app ? { app: io.app } : {}) });
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
      await transport.close().catch(debugLog.swallow('mcp.transport.close'));
      if (process.send) process.send({ released: true }, () => process.disconnect?.());
      await untilUnused(door, (await starting.catch(() => undefined))?.kept, stop.stopped); // a core that failed to start keeps nothing
    }
    return ExitCode.ok;
  } finally {
    try {
      await door?.close('airlock mcp stopped');
      await connection.close('airlock mcp stopped');
      await transport.close().catch(debugLog.swallow('mcp.transport.close'));
      const deps = await starting.catch(() => undefined); // a core that failed to start has nothing to stop
      await deps?.kept?.dispose('airlock mcp stopped');
      // The warm sandbox is wiped before the process goes (dispose alone does not wait for it).
      await deps?.core.sandboxes('container').then((m) => m.shutdown(), () => undefined).catch(debugLog.swallow('mcp.sandboxes.shutdown'));
      await deps?.grants.dispose();
      await deps?.services.dispose();
    } finally {
      stop.done();
    }
  }
}

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
  const recover = async (): Promise<void> => {
    try {
      await core.runs.recover([await core.sandboxes('container')], { othersOnly: true });
      await sweepKeptRecords(core.home);
    } catch (err) {
      debugLog.swallow('mcp.worker.recover')(err);
    }
  };
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
