import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { EnvironmentChoiceText } from '../../contracts/environments';
import { Isolation, NetworkPolicy } from '../../contracts/runs';
import type { AirlockCore } from '../app';
import { imageId } from '../environment/engine-build';
import { checkRunEnvironment } from '../environment/run-environment';
import type { StoredRun } from '../runs/run-record';
import { KEEP_ALIVE_MS, WORKSPACE } from './mcp-limits';
import { PreviewOut, progressFor, type McpToolContext, type McpToolExtra } from './mcp-tool-context';

const CreateIn = z.strictObject({
  projectDir: z.string().min(1).describe('absolute path of the project folder on this machine (read, never written)'),
  isolation: Isolation.optional(),
  network: NetworkPolicy.optional().describe('none (default), allowlist (with allow), or open'),
  allow: z.array(z.string().min(1).max(253)).max(200).optional().describe('domains reachable under the allowlist policy (preset:npm etc. allowed)'),
  environment: EnvironmentChoiceText.optional().describe(
    "auto, airlock, devcontainer[:PATH] or image:REF (absent: the user's default environment setting, else auto). A devcontainer is used only once the user has accepted it in Airlock; image:REF only when the image is already on the engine",
  ),
  publish: z.array(z.number().int().min(1).max(65535)).max(10).optional().describe('sandbox ports to publish on loopback right away'),
  keep: z.boolean().optional().describe('true: the sandbox outlives this connection (for clients that reconnect per call); a later connection of a client granted the same folder uses it by sandboxId. End it with sandbox_destroy; it is wiped after 30 min unused'),
});

/**
 * `sandbox_create` (docs/architecture.md §17): a sandbox on a copy of a folder granted to the client,
 * capped per connection (or, kept, per process), wiped at once when the call is cancelled meanwhile.
 */
export function registerSandboxCreateTool(ctx: McpToolContext): void {
  const { limits } = ctx;
  ctx.tool(
    'sandbox_create',
    'Create a disposable, hardened sandbox holding a copy of a project folder on this machine (credential-looking files left out). Returns its sandboxId. Network: none by default. It is wiped when this connection ends, unless keep is true.',
    CreateIn,
    z.object({ sandboxId: z.string(), projectDir: z.string(), workspace: z.string(), isolation: z.string(), network: z.string(), environment: z.string(), excludedFiles: z.array(z.object({ path: z.string(), reason: z.string() })), previews: z.array(PreviewOut), kept: z.boolean() }),
    async (args, extra) => {
      if (ctx.sandboxes.closed) throw new AirlockError('CONFLICT', 'This MCP connection is closing.');
      const keptStore = ctx.deps().kept;
      if (args.keep && !keptStore) throw new AirlockError('INVALID_INPUT', 'This MCP server cannot keep sandboxes past the connection (only `airlock mcp` over stdio without --foreground can); omit keep and use the sandbox within this connection.', { field: 'keep' });
      // Caps are taken before any await: a kept sandbox counts against the process's kept cap, any other against this connection's.
      const release = args.keep ? keptStore?.reserve() : ctx.sandboxes.slots.take();
      if (!release) {
        throw new AirlockError('CONFLICT', args.keep ? `${keptStore?.size ?? 0} kept sandboxes exist (the cap is ${keptStore?.cap ?? 0}); sandbox_destroy one first (sandbox_list shows them).` : `This client already holds ${ctx.sandboxes.slots.count} sandboxes (the cap is ${limits.sandboxesPerClient}); sandbox_destroy one first.`);
      }
      let record: StoredRun;
      try {
        record = await startSandbox(ctx, args, extra);
      } catch (err) {
        release();
        throw err;
      }
      ctx.client.runs.add(record.id);
      if (args.keep && keptStore) {
        ctx.sandboxes.attach(record.id);
        await keptStore.keep(record.id, ctx.clientName(), record.projectDir, release);
        await ctx.deps().grants.note('granted', ctx.client, { what: 'keep', sandboxId: record.id, dir: record.projectDir });
      } else {
        ctx.sandboxes.hold(record, release);
      }
      if (ctx.sandboxes.closed || extra.signal.aborted) {
        // A cancelled create leaves nothing: the sandbox made meanwhile is wiped before the call ends.
        await ctx.sandboxes.end(record.id, ctx.sandboxes.closed ? 'the client disconnected' : 'sandbox_create was cancelled');
        throw new AirlockError('CANCELLED', ctx.sandboxes.closed ? 'This MCP connection closed while the sandbox was made; it was wiped.' : 'sandbox_create was cancelled; the sandbox made meanwhile was wiped.');
      }
      const previews = [];
      for (const port of args.publish ?? []) previews.push(await ctx.deps().core.runs.publishPort(record.id, port));
      const excluded = record.excludedFiles.map((e) => ({ path: e.path, reason: e.reason }));
      return {
        value: { sandboxId: record.id, projectDir: record.projectDir, workspace: WORKSPACE, isolation: record.isolation, network: record.network, environment: record.environment?.name ?? 'airlock', excludedFiles: excluded, previews, kept: !!args.keep },
        text: `Sandbox ${record.id} is ready: a copy of ${record.projectDir} at ${WORKSPACE} (${record.isolation}, network ${record.network}, environment ${record.environment?.name ?? 'airlock'}).${excluded.length ? ` Left out: ${excluded.map((e) => e.path).slice(0, 20).join(', ')}.` : ''}${previews.map((p) => ` Port ${p.sandboxPort} → ${p.url}.`).join('')}${args.keep ? ` Kept: it outlives this connection; sandbox_destroy it when done (it is wiped after ${Math.round(limits.idleMs / 60000)} min unused).` : ''}`,
      };
    },
  );
}

/** Checks the client's grants (folder, network) and the environment, then makes the sandbox, with progress while it waits. */
async function startSandbox(ctx: McpToolContext, args: z.output<typeof CreateIn>, extra: McpToolExtra): Promise<StoredRun> {
  const network = args.network ?? 'none';
  if (network === 'allowlist' && !args.allow?.length) throw new AirlockError('INVALID_INPUT', 'List at least one domain in allow for the allowlist policy.', { field: 'allow' });
  const say = progressFor(extra);
  const keepAlive = setInterval(() => say('still creating the sandbox'), KEEP_ALIVE_MS);
  try {
    const { grants, core } = ctx.deps();
    const folder = await grants.folder(ctx.client, args.projectDir, { purpose: 'sandbox', signal: extra.signal });
    await grants.network(ctx.client, folder, network, args.allow ?? []);
    const settings = await core.settings.get();
    const environment = args.environment ?? settings.defaultEnvironment;
    await checkMcpEnvironment(core, folder.dir, environment);
    if (extra.signal.aborted) throw new AirlockError('CANCELLED', 'sandbox_create was cancelled; nothing was made.');
    say('creating the sandbox');
    return await core.runs.startSession({
      projectDir: folder.dir,
      client: ctx.clientName(),
      isolation: args.isolation ?? 'container',
      network,
      ...(args.allow?.length ? { allowlist: args.allow } : {}),
      timeoutSec: ctx.limits.sessionTimeoutSec,
      ...(settings.gitHistory !== undefined ? { gitHistory: settings.gitHistory } : {}),
      ...(environment ? { environment } : {}),
    });
  } finally {
    clearInterval(keepAlive);
  }
}

/**
 * The MCP rule for project environments (docs/architecture.md §17): the same check as a run's, but a
 * client can never accept a devcontainer (building one runs the project's code with network
 * access; only the user accepts it, in Airlock), and `image:REF` names only an image already on the
 * engine (a pull would use the host engine's registry credentials at a client's choice).
 */
async function checkMcpEnvironment(core: AirlockCore, projectDir: string, environment: string | undefined): Promise<void> {
  let checked;
  try {
    checked = await checkRunEnvironment(core, { projectDir, ...(environment ? { environment } : {}), agentVariant: 'base', trustEnvironment: false });
  } catch (err) {
    if (err instanceof AirlockError && err.kind === 'FORBIDDEN') {
      const why = err.message.replace(/ Read it, then accept it .*$/, '');
      throw new AirlockError(
        'FORBIDDEN',
        `${why} An MCP client cannot accept it: the user reads it and accepts it once in Airlock (the New run form, or \`airlock run --environment ${environment ?? 'devcontainer'} --trust-environment\` in ${projectDir}); then call sandbox_create again. Or pass environment "airlock" for Airlock's own image.`,
        { field: 'environment' },
      );
    }
    throw err;
  }
  if (checked.kind === 'image' && !(await imageId((await core.engine()).docker, checked.ref))) {
    throw new AirlockError('NOT_FOUND', `The image ${checked.ref} is not on the engine, and an MCP client cannot make Airlock pull one. Pull it yourself (docker pull ${checked.ref}), or pass environment "airlock".`, { field: 'environment' });
  }
}
