import { createHash } from 'node:crypto';
import { mkdir, open, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type CallToolResult, type ReadResourceResult, type ResourceLink, type ServerNotification, type ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { z } from 'zod';
import { AirlockError, toErrorInfo } from '../../contracts/errors';
import { RunId } from '../../contracts/ids';
import { EnvironmentChoiceText } from '../../contracts/environments';
import { AgentKind, Isolation, NetworkPolicy, StartRunInput } from '../../contracts/runs';
import { newRunDefaults } from '../../contracts/run-defaults';
import type { AirlockServices } from '../api/services';
import type { AirlockCore } from '../app';
import { APP_VERSION } from '../common/app-version';
import { imageId } from '../environment/engine-build';
import { checkRunEnvironment } from '../environment/run-environment';
import { applyRunResult } from '../runs/run-apply';
import { newClientRef, SlotCap, type ClientGrants } from '../runs/client-grants';
import type { StoredRun } from '../runs/run-record';
import { classifyRiskyPaths } from '../workspace/risky-paths';
import type { ApplyApprovals } from './apply-approvals';
import type { KeptSandboxes } from './kept-sandboxes';
import { readCapped } from './sandbox-read';
import { DEFAULT_MCP_LIMITS, headAndTail, KEEP_ALIVE_MS, WORKSPACE, workspacePath, type McpLimits } from './mcp-limits';
import { debugLog } from '../common/debug-log';

/** What the MCP door is built on: the same core and services as the CLI and the UI (§17). */
export interface McpDeps {
  core: AirlockCore;
  services: AirlockServices;
  approvals: ApplyApprovals;
  /** What a client may do: folders, network, secrets, continuations (docs/architecture.md §17). */
  grants: ClientGrants;
  /** `airlock mcp --project DIR…`: folders granted to this server's clients besides Settings. */
  projects?: readonly string[];
  /** `airlock mcp --allow-apply`: run_apply in a granted folder, of no flagged file, goes ahead without asking, recorded as such. */
  allowApply: boolean;
  limits?: Partial<McpLimits>;
  /** Where the user answers apply requests, for the refusal text. */
  approveHint?: string;
  /**
   * Sandboxes that outlive their connection (`sandbox_create {keep: true}`, §17 "Kept sandboxes"):
   * only the stdio worker has them; without it `keep` is refused.
   */
  kept?: KeptSandboxes;
}

/** What one connection was started with, when its process serves several (the stdio worker). */
export interface McpConnectionOptions {
  /** `airlock mcp --project DIR…` of this connection's own command. */
  projects: readonly string[];
  /** `airlock mcp --allow-apply` of this connection's own command. */
  allowApply: boolean;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** One client's connection: its server and the sandboxes it made (wiped when it goes). */
export interface McpConnection {
  readonly server: McpServer;
  /** Sandboxes (MCP session run ids) this client holds. */
  readonly sandboxes: ReadonlySet<string>;
  /** Wipes every sandbox of this client (disconnect); resolves when they are gone. */
  close(reason: string): Promise<void>;
}

/**
 * Titles and behaviour hints of every tool (clients decide from these what to confirm). "Destructive"
 * means to the user's machine: what a tool does inside a disposable sandbox is not (the sandbox is the
 * boundary); destroying a sandbox, cancelling a run and applying a result to the project are.
 */
const TOOL_META = {
  sandbox_create: { title: 'Create a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  sandbox_list: { title: 'List my sandboxes', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_exec: { title: 'Run a command in a sandbox', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
  sandbox_read_file: { title: 'Read a sandbox file', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_write_file: { title: 'Write a sandbox file', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_list_files: { title: 'List a sandbox folder', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_diff: { title: "A sandbox's changes", readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_publish_port: { title: 'Publish a sandbox port on loopback', readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  sandbox_destroy: { title: 'Destroy a sandbox', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  run_start: { title: 'Start an agent run', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  run_status: { title: "A run's status", readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  run_result: { title: "A run's result", readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  run_continue: { title: 'Continue a run', readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  run_cancel: { title: 'Cancel a run', readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  run_apply: { title: 'Apply a result to the project (asks the user)', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
} as const;

/** Terminal escape codes (colours, cursor moves, titles) and carriage-return overdraws, left out of plain text. */
const ESCAPES = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\|\x1b[@-Z\\-_]|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]/g;
export function plainTerminalText(text: string): string {
  return text.replace(ESCAPES, '').replace(/\r+\n/g, '\n').replace(/^.*\r(?!$)/gm, '');
}

/** Commands run per sandbox, in this process: numbers the output resources (a kept sandbox's go on across connections). */
const EXEC_COUNT = new Map<string, number>();

const SandboxId = RunId.describe('the sandboxId sandbox_create returned');
const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex');

const ChangedFileOut = z.object({ path: z.string(), oldPath: z.string().optional(), status: z.string(), binary: z.boolean(), additions: z.number(), deletions: z.number() });
const WipeOut = z.object({ verified: z.boolean(), removed: z.array(z.string()), leftovers: z.array(z.string()), durationMs: z.number().optional(), at: z.string() });
const PreviewOut = z.object({ sandboxPort: z.number(), hostPort: z.number(), url: z.string() });
const RunStatusOut = z.object({
  runId: z.string(),
  status: z.string(),
  phase: z.string().optional(),
  agent: z.string(),
  changedFiles: z.number(),
  usage: z.object({ inputTokens: z.number(), outputTokens: z.number(), requests: z.number(), costUsd: z.number().optional() }),
  error: z.object({ kind: z.string(), message: z.string() }).optional(),
});

/**
 * The MCP server of one client connection (docs/architecture.md §17): the tools and resources
 * over Airlock's own services. Sandboxes are MCP sessions of the run service — recorded, audited,
 * capped and wiped like runs; commands run by the host and recorded first-hand; apply only with the
 * user's yes (or `--allow-apply`). Nothing returned carries a key, a credential or a run token.
 */
export function createMcpConnection(depsOrPromise: McpDeps | Promise<McpDeps>, limitsIn: Partial<McpLimits> = {}, own?: McpConnectionOptions): McpConnection {
  // The core may still be starting (stdio answers the client's initialize at once); tools wait for it.
  const ready = Promise.resolve(depsOrPromise);
  let deps: McpDeps | undefined;
  void ready.then((d) => (deps = d), () => undefined);
  const the = (): McpDeps => {
    if (!deps) throw new AirlockError('INTERNAL', 'Airlock is still starting');
    return deps;
  };
  const limits: McpLimits = { ...DEFAULT_MCP_LIMITS, ...limitsIn, ...(depsOrPromise instanceof Promise ? {} : depsOrPromise.limits) };
  const server = new McpServer({ name: 'airlock', version: APP_VERSION }, { instructions: 'Airlock gives you disposable, isolated sandboxes on a copy of a project on this machine. sandbox_create → sandbox_exec / sandbox_write_file → sandbox_diff → sandbox_destroy; the result is applied to the real project only with run_apply and the user\'s yes in Airlock.' });
  const sandboxes = new Set<string>();
  const lastUsed = new Map<string, number>();
  // Caps are taken synchronously, before any await, so concurrent calls cannot all pass the check.
  const sandboxSlots = new SlotCap(limits.sandboxesPerClient);
  const runSlots = new SlotCap(limits.runsPerClient);
  const slotOf = new Map<string, () => void>();
  const madeAt = new Map<string, { projectDir: string; createdAt: string }>();
  const execCount = EXEC_COUNT;
  let closed = false;

  const clientName = () => {
    const v = server.server.getClientVersion();
    return v ? `${v.name.slice(0, 80)} ${v.version.slice(0, 40)}`.trim() : 'unknown MCP client';
  };
  const client = newClientRef(clientName, () => own?.projects ?? deps?.projects ?? []);
  const allowApply = () => own?.allowApply ?? the().allowApply;
  /** Kept sandboxes this connection made or re-attached to. */
  const attached = new Set<string>();
  /**
   * A sandbox this connection may use: one it made, or a kept one (§17 "Kept sandboxes") — that only
   * when this client is granted the sandbox's folder (the same check as sandbox_create), audited.
   */
  const ownSandbox = async (sandboxId: string): Promise<string> => {
    if (sandboxes.has(sandboxId)) {
      lastUsed.set(sandboxId, Date.now());
      return sandboxId;
    }
    const kept = deps?.kept?.get(sandboxId);
    if (kept && !closed) {
      if (!attached.has(sandboxId)) {
        const folder = await the().grants.folder(client, kept.projectDir, { purpose: 'sandbox' });
        if (folder.dir !== kept.projectDir) throw new AirlockError('FORBIDDEN', `Kept sandbox ${sandboxId} is a copy of ${kept.projectDir}, not of ${folder.dir}.`);
        await the().grants.note('granted', client, { what: 'reattach', sandboxId, dir: kept.projectDir, keptBy: kept.client });
        await the().core.runs.noteOn(sandboxId, `MCP client ${clientName()} re-attached to this kept sandbox`, { client: clientName() });
        attached.add(sandboxId);
      }
      deps?.kept?.touch(sandboxId);
      return sandboxId;
    }
    throw new AirlockError('NOT_FOUND', `No live sandbox ${sandboxId} for this MCP connection (destroyed, wiped after ${Math.round(limits.idleMs / 60000)} min idle, or made by another connection without keep: true); create one with sandbox_create.`);
  };
  const touch = (sandboxId: string) => {
    if (sandboxes.has(sandboxId)) lastUsed.set(sandboxId, Date.now());
    else deps?.kept?.touch(sandboxId);
  };
  const end = async (sandboxId: string, reason: string): Promise<StoredRun> => {
    if (attached.has(sandboxId) || (deps?.kept?.get(sandboxId) && !sandboxes.has(sandboxId))) {
      attached.delete(sandboxId);
      execCount.delete(sandboxId);
      await the().kept?.end(sandboxId, reason);
      return the().core.store.get(sandboxId);
    }
    sandboxes.delete(sandboxId);
    execCount.delete(sandboxId);
    lastUsed.delete(sandboxId);
    try {
      return await the().core.runs.endSession(sandboxId, reason);
    } finally {
      slotOf.get(sandboxId)?.();
      slotOf.delete(sandboxId);
      madeAt.delete(sandboxId);
    }
  };

  const idleTimer = setInterval(() => {
    const now = Date.now();
    for (const [id, at] of lastUsed) if (now - at >= limits.idleMs) void end(id, `idle for ${Math.round((now - at) / 1000)} s`).catch(debugLog.swallow('mcp.idleEnd'));
  }, Math.max(50, Math.min(30_000, limits.idleMs / 4)));
  idleTimer.unref();

  /** Registers a tool whose handler returns the structured value and its readable text. */
  function tool<I extends z.ZodObject, O extends z.ZodObject>(name: keyof typeof TOOL_META, description: string, input: I, output: O, handler: (args: z.output<I>, extra: Extra) => Promise<{ value: z.output<O>; text: string; links?: ResourceLink[] }>): void {
    const { title, ...annotations } = TOOL_META[name];
    server.registerTool(name, { title, description, inputSchema: input, outputSchema: output, annotations: { title, ...annotations } }, (async (args: z.output<I>, extra: Extra): Promise<CallToolResult> => {
      try {
        await ready;
        const { value, text, links = [] } = await handler(args, extra);
        return { content: [{ type: 'text', text }, ...links], structuredContent: value as Record<string, unknown> };
      } catch (err) {
        const info = toErrorInfo(err);
        return { isError: true, content: [{ type: 'text', text: `${info.kind}: ${info.message}` }] };
      }
    }) as never);
  }

  /**
   * Progress notifications for one call. `flushed()` resolves once every one sent so far is written:
   * the SDK sends a notification asynchronously, so a result returned at once could overtake the last
   * output chunk, and the client drops progress that arrives after its result.
   */
  const progress = (extra: Extra) => {
    const token = extra._meta?.progressToken;
    let n = 0;
    let sent: Promise<unknown> = Promise.resolve();
    const say = (message: string) => {
      if (token === undefined) return;
      n += 1;
      const next = extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: n, message } }).catch(debugLog.swallow('mcp.progress'));
      sent = Promise.all([sent, next]);
    };
    return Object.assign(say, { flushed: () => sent });
  };

  tool(
    'sandbox_create',
    'Create a disposable, hardened sandbox holding a copy of a project folder on this machine (credential-looking files left out). Returns its sandboxId. Network: none by default. It is wiped when this connection ends, unless keep is true.',
    z.strictObject({
      projectDir: z.string().min(1).describe('absolute path of the project folder on this machine (read, never written)'),
      isolation: Isolation.optional(),
      network: NetworkPolicy.optional().describe('none (default), allowlist (with allow), or open'),
      allow: z.array(z.string().min(1).max(253)).max(200).optional().describe('domains reachable under the allowlist policy (preset:npm etc. allowed)'),
      environment: EnvironmentChoiceText.optional().describe(
        "auto, airlock, devcontainer[:PATH] or image:REF (absent: the user's default environment setting, else auto). A devcontainer is used only once the user has accepted it in Airlock; image:REF only when the image is already on the engine",
      ),
      publish: z.array(z.number().int().min(1).max(65535)).max(10).optional().describe('sandbox ports to publish on loopback right away'),
      keep: z.boolean().optional().describe('true: the sandbox outlives this connection (for clients that reconnect per call); a later connection of a client granted the same folder uses it by sandboxId. End it with sandbox_destroy; it is wiped after 30 min unused'),
    }),
    z.object({ sandboxId: z.string(), projectDir: z.string(), workspace: z.string(), isolation: z.string(), network: z.string(), environment: z.string(), excludedFiles: z.array(z.object({ path: z.string(), reason: z.string() })), previews: z.array(PreviewOut), kept: z.boolean() }),
    async (args, extra) => {
      if (closed) throw new AirlockError('CONFLICT', 'This MCP connection is closing.');
      const keptStore = the().kept;
      if (args.keep && !keptStore) throw new AirlockError('INVALID_INPUT', 'This MCP server cannot keep sandboxes past the connection (only `airlock mcp` over stdio without --foreground can); omit keep and use the sandbox within this connection.', { field: 'keep' });
      // Caps are taken before any await: a kept sandbox counts against the process's kept cap, any other against this connection's.
      const release = args.keep ? keptStore?.reserve() : sandboxSlots.take();
      if (!release) {
        throw new AirlockError('CONFLICT', args.keep ? `${keptStore?.size ?? 0} kept sandboxes exist (the cap is ${keptStore?.cap ?? 0}); sandbox_destroy one first (sandbox_list shows them).` : `This client already holds ${sandboxSlots.count} sandboxes (the cap is ${limits.sandboxesPerClient}); sandbox_destroy one first.`);
      }
      let record: StoredRun;
      try {
        const network = args.network ?? 'none';
        if (network === 'allowlist' && !args.allow?.length) throw new AirlockError('INVALID_INPUT', 'List at least one domain in allow for the allowlist policy.', { field: 'allow' });
        const say = progress(extra);
        const keepAlive = setInterval(() => say('still creating the sandbox'), KEEP_ALIVE_MS);
        try {
          const folder = await the().grants.folder(client, args.projectDir, { purpose: 'sandbox', signal: extra.signal });
          await the().grants.network(client, folder, network, args.allow ?? []);
          const settings = await the().core.settings.get();
          const environment = args.environment ?? settings.defaultEnvironment;
          await checkMcpEnvironment(the().core, folder.dir, environment);
          if (extra.signal.aborted) throw new AirlockError('CANCELLED', 'sandbox_create was cancelled; nothing was made.');
          say('creating the sandbox');
          record = await the().core.runs.startSession({
            projectDir: folder.dir,
            client: clientName(),
            isolation: args.isolation ?? 'container',
            network,
            ...(args.allow?.length ? { allowlist: args.allow } : {}),
            timeoutSec: limits.sessionTimeoutSec,
            ...(settings.gitHistory !== undefined ? { gitHistory: settings.gitHistory } : {}),
            ...(environment ? { environment } : {}),
          });
        } finally {
          clearInterval(keepAlive);
        }
      } catch (err) {
        release();
        throw err;
      }
      client.runs.add(record.id);
      if (args.keep && keptStore) {
        attached.add(record.id);
        await keptStore.keep(record.id, clientName(), record.projectDir, release);
        await the().grants.note('granted', client, { what: 'keep', sandboxId: record.id, dir: record.projectDir });
      } else {
        sandboxes.add(record.id);
        slotOf.set(record.id, release);
        madeAt.set(record.id, { projectDir: record.projectDir, createdAt: record.createdAt });
        lastUsed.set(record.id, Date.now());
      }
      if (closed || extra.signal.aborted) {
        // A cancelled create leaves nothing: the sandbox made meanwhile is wiped before the call ends.
        await end(record.id, closed ? 'the client disconnected' : 'sandbox_create was cancelled');
        throw new AirlockError('CANCELLED', closed ? 'This MCP connection closed while the sandbox was made; it was wiped.' : 'sandbox_create was cancelled; the sandbox made meanwhile was wiped.');
      }
      const previews = [];
      for (const port of args.publish ?? []) previews.push(await the().core.runs.publishPort(record.id, port));
      const excluded = record.excludedFiles.map((e) => ({ path: e.path, reason: e.reason }));
      return {
        value: { sandboxId: record.id, projectDir: record.projectDir, workspace: WORKSPACE, isolation: record.isolation, network: record.network, environment: record.environment?.name ?? 'airlock', excludedFiles: excluded, previews, kept: !!args.keep },
        text: `Sandbox ${record.id} is ready: a copy of ${record.projectDir} at ${WORKSPACE} (${record.isolation}, network ${record.network}, environment ${record.environment?.name ?? 'airlock'}).${excluded.length ? ` Left out: ${excluded.map((e) => e.path).slice(0, 20).join(', ')}.` : ''}${previews.map((p) => ` Port ${p.sandboxPort} → ${p.url}.`).join('')}${args.keep ? ` Kept: it outlives this connection; sandbox_destroy it when done (it is wiped after ${Math.round(limits.idleMs / 60000)} min unused).` : ''}`,
      };
    },
  );

  tool(
    'sandbox_list',
    "This client's live sandboxes: id, project, when made and last used.",
    z.strictObject({}),
    z.object({ sandboxes: z.array(z.object({ sandboxId: z.string(), projectDir: z.string(), createdAt: z.string(), lastUsedAt: z.string(), kept: z.boolean() })), cap: z.number() }),
    async () => {
      const list = [...sandboxes].map((id) => ({ sandboxId: id, projectDir: madeAt.get(id)?.projectDir ?? '', createdAt: madeAt.get(id)?.createdAt ?? '', lastUsedAt: new Date(lastUsed.get(id) ?? 0).toISOString(), kept: false }));
      // Kept sandboxes: those this connection uses, and those of folders granted to it without asking.
      for (const k of the().kept?.list() ?? []) {
        if (attached.has(k.sandboxId) || (await the().grants.grantedFolder(client, k.projectDir))) list.push({ sandboxId: k.sandboxId, projectDir: k.projectDir, createdAt: k.keptAt, lastUsedAt: k.lastUsedAt, kept: true });
      }
      return { value: { sandboxes: list, cap: limits.sandboxesPerClient }, text: list.length ? list.map((s) => `${s.sandboxId}  ${s.projectDir}  (made ${s.createdAt}${s.kept ? ', kept' : ''})`).join('\n') : `no live sandboxes (cap ${limits.sandboxesPerClient})` };
    },
  );

  tool(
    'sandbox_exec',
    'Run a shell command (bash -c, in /workspace by default) in a sandbox; output streams as progress notifications. Returns exitCode, stdout, stderr (head and tail past a few KiB; then the whole output kept is a resource, linked in the result and named in outputUris).',
    z.strictObject({
      sandboxId: SandboxId,
      command: z.string().min(1).max(100_000),
      cwd: z.string().max(4096).optional().describe(`working directory inside ${WORKSPACE} (default ${WORKSPACE})`),
      timeoutSec: z.number().positive().max(limits.maxExecTimeoutSec).optional().describe('default 600'),
    }),
    z.object({
      exitCode: z.number().nullable(),
      timedOut: z.boolean(),
      durationMs: z.number(),
      stdout: z.string(),
      stderr: z.string(),
      truncated: z.boolean(),
      outputBytes: z.number(),
      outputUris: z.object({ stdout: z.string().optional(), stderr: z.string().optional() }).optional().describe('resources with the output kept (up to the cap, head and tail) when the result carries only part of it'),
    }),
    async (args, extra) => {
      const id = await ownSandbox(args.sandboxId);
      const cwd = workspacePath(args.cwd ?? WORKSPACE, 'cwd');
      const say = progress(extra);
      let streamed = 0;
      const result = await the().core.runs.execInSession(id, { command: args.command, cwd, timeoutSec: args.timeoutSec ?? 600, capBytes: limits.outputBytes, signal: extra.signal }, (_stream, bytes) => {
        touch(id);
        if (streamed >= limits.outputBytes) return;
        streamed += bytes.length;
        say(bytes.subarray(0, 16 * 1024).toString('utf8'));
      });
      touch(id);
      await say.flushed();
      if (result.failure) throw new AirlockError('CONFLICT', `The command could not run: ${result.failure}.`);
      // The result is sized for an agent's context; a longer output is kept in the run's folder and linked.
      const n = (execCount.get(id) ?? 0) + 1;
      execCount.set(id, n);
      const links: ResourceLink[] = [];
      const outputUris: { stdout?: string; stderr?: string } = {};
      const shown = async (stream: 'stdout' | 'stderr', kept: string) => {
        const uri = `airlock://runs/${id}/output/${n}/${stream}`;
        const cut = headAndTail(kept, limits.resultBytes, `the whole ${stream} kept is the resource ${uri}`);
        if (!cut.cut) return kept;
        const file = outputFile(the().core, id, n, stream);
        await mkdir(path.dirname(file), { recursive: true });
        await writeFile(file, kept, { mode: 0o600 });
        outputUris[stream] = uri;
        links.push({ type: 'resource_link', uri, name: `${stream} of command ${n}`, mimeType: 'text/plain', size: Buffer.byteLength(kept) });
        return cut.text;
      };
      const stdout = await shown('stdout', result.stdout.text());
      const stderr = await shown('stderr', result.stderr.text());
      const truncated = result.stdout.truncated || result.stderr.truncated || links.length > 0;
      const value = { exitCode: result.exitCode, timedOut: result.timedOut, durationMs: result.durationMs, stdout, stderr, truncated, outputBytes: result.output.bytes, ...(links.length ? { outputUris } : {}) };
      const status = result.timedOut ? `timed out after ${args.timeoutSec ?? 600} s` : `exit ${result.exitCode ?? 'by signal'}`;
      return { value, links, text: `${status} (${result.durationMs} ms)${truncated ? ', output cut (the whole kept output is linked)' : ''}\n${value.stdout}${value.stderr ? `\n[stderr]\n${value.stderr}` : ''}` };
    },
  );

  tool(
    'sandbox_read_file',
    `Read a file of the sandbox's workspace (paths relative to ${WORKSPACE}).`,
    z.strictObject({ sandboxId: SandboxId, path: z.string().min(1).max(4096) }),
    z.object({ path: z.string(), bytes: z.number(), encoding: z.enum(['utf8', 'base64']), content: z.string(), sha256: z.string() }),
    async (args) => {
      const id = await ownSandbox(args.sandboxId);
      const file = workspacePath(args.path);
      // Over the cap: a LimitError saying so and what to do instead (sandbox-read.ts).
      const data = await readCapped(the().core.runs.sessionSandbox(id).channel, file, limits.fileBytes);
      const utf8 = data.toString('utf8');
      const text = Buffer.from(utf8, 'utf8').equals(data);
      return { value: { path: file, bytes: data.length, encoding: text ? ('utf8' as const) : ('base64' as const), content: text ? utf8 : data.toString('base64'), sha256: createHash('sha256').update(data).digest('hex') }, text: text ? utf8 : `${file}: ${data.length} bytes of binary data (base64 in structuredContent)` };
    },
  );

  tool(
    'sandbox_write_file',
    `Write a file in the sandbox's workspace (paths relative to ${WORKSPACE}); parent folders are made.`,
    z.strictObject({ sandboxId: SandboxId, path: z.string().min(1).max(4096), content: z.string(), encoding: z.enum(['utf8', 'base64']).optional(), executable: z.boolean().optional() }),
    z.object({ path: z.string(), bytes: z.number(), sha256: z.string() }),
    async (args) => {
      const id = await ownSandbox(args.sandboxId);
      const file = workspacePath(args.path);
      if (file === WORKSPACE) throw new AirlockError('INVALID_INPUT', 'Name a file inside the workspace, not the workspace itself.', { field: 'path' });
      const data = Buffer.from(args.content, args.encoding ?? 'utf8');
      if (data.length > limits.fileBytes) throw new AirlockError('INVALID_INPUT', `The file is ${data.length} bytes; sandbox_write_file takes at most ${limits.fileBytes}. Nothing was written.`, { field: 'content' });
      const sandbox = the().core.runs.sessionSandbox(id);
      const mk = await sandbox.channel.run({ argv: ['mkdir', '-p', '--', path.posix.dirname(file)] });
      if (mk.exitCode !== 0) throw new AirlockError('INVALID_INPUT', `Could not make the folder ${path.posix.dirname(file)}: ${mk.stderr.toString('utf8').slice(0, 300)}`);
      await sandbox.channel.writeFile(file, data, { mode: args.executable ? 0o755 : 0o644 });
      const sha256 = createHash('sha256').update(data).digest('hex');
      await the().core.runs.noteOn(id, `MCP client wrote ${file} (${data.length} bytes)`, { path: file, bytes: data.length, sha256 });
      return { value: { path: file, bytes: data.length, sha256 }, text: `wrote ${file} (${data.length} bytes)` };
    },
  );

  tool(
    'sandbox_list_files',
    `List a folder of the sandbox's workspace (default ${WORKSPACE}).`,
    z.strictObject({ sandboxId: SandboxId, path: z.string().max(4096).optional() }),
    z.object({ path: z.string(), entries: z.array(z.object({ name: z.string(), type: z.string(), size: z.number() })), truncated: z.boolean() }),
    async (args) => {
      const id = await ownSandbox(args.sandboxId);
      const dir = workspacePath(args.path ?? WORKSPACE);
      const all = await the().core.runs.sessionSandbox(id).channel.list(dir);
      const entries = all.slice(0, limits.listEntries).map((e) => ({ name: e.name, type: e.type, size: e.size }));
      const truncated = all.length > entries.length;
      return { value: { path: dir, entries, truncated }, text: `${dir}:\n${entries.map((e) => `${e.type === 'dir' ? 'd' : e.type === 'symlink' ? 'l' : '-'} ${e.name}${e.type === 'dir' ? '/' : ''}`).join('\n')}${truncated ? `\n… ${all.length - entries.length} more` : ''}` };
    },
  );

  const DiffOut = z.object({ files: z.array(ChangedFileOut), patch: z.string(), patchBytes: z.number(), patchSha256: z.string(), truncated: z.boolean() });
  const patchView = (patch: Buffer) => {
    const truncated = patch.length > limits.patchBytes;
    return { patch: patch.subarray(0, limits.patchBytes).toString('utf8'), patchBytes: patch.length, patchSha256: createHash('sha256').update(patch).digest('hex'), truncated };
  };
  const changedView = (c: { path: string; oldPath?: string; status: string; binary: boolean; additions: number; deletions: number }) => ({ path: c.path, ...(c.oldPath ? { oldPath: c.oldPath } : {}), status: c.status, binary: c.binary, additions: c.additions, deletions: c.deletions });

  tool(
    'sandbox_diff',
    'The changes in the sandbox against the copy it started from, derived on the host: changed files, the patch and its SHA-256.',
    z.strictObject({ sandboxId: SandboxId }),
    DiffOut,
    async (args) => {
      const id = await ownSandbox(args.sandboxId);
      const { result, patch } = await the().core.runs.collectSession(id);
      const files = result.changes.map(changedView);
      const view = patchView(patch);
      return { value: { files, ...view }, text: files.length ? `${files.length} file(s) changed (patch sha256 ${view.patchSha256}):\n${files.map((f) => `  ${f.status} ${f.path}`).join('\n')}\n\n${view.patch}` : 'no changes' };
    },
  );

  tool(
    'sandbox_publish_port',
    'Publish a port a process in the sandbox listens on, on a random loopback port of this machine; returns its URL.',
    z.strictObject({ sandboxId: SandboxId, port: z.number().int().min(1).max(65535) }),
    PreviewOut,
    async (args) => {
      const p = await the().core.runs.publishPort(await ownSandbox(args.sandboxId), args.port);
      return { value: p, text: `sandbox port ${p.sandboxPort} → ${p.url}` };
    },
  );

  tool(
    'sandbox_destroy',
    'Destroy a sandbox: its changes are kept as a reviewable result (apply with run_apply, sandboxId as runId), the sandbox is wiped and checked gone.',
    z.strictObject({ sandboxId: SandboxId }),
    z.object({ sandboxId: z.string(), status: z.string(), wipe: WipeOut.optional(), changedFiles: z.number(), patchSha256: z.string().optional() }),
    async (args) => {
      const id = await ownSandbox(args.sandboxId);
      const record = await end(id, 'sandbox_destroy');
      const listed = await the().services.diffs.list({ runId: id }).catch(debugLog.swallow('mcp.sandboxDestroy.diff'));
      const wipe = record.wipe ? { verified: record.wipe.verified, removed: record.wipe.removed, leftovers: record.wipe.leftovers, ...(record.wipe.durationMs !== undefined ? { durationMs: record.wipe.durationMs } : {}), at: record.wipe.at } : undefined;
      return {
        value: { sandboxId: id, status: record.status, ...(wipe ? { wipe } : {}), changedFiles: record.changedFiles.length, ...(listed?.patchSha256 ? { patchSha256: listed.patchSha256 } : {}) },
        text: `Sandbox ${id} ${record.status}; ${wipe ? (wipe.verified ? `wiped and verified gone (${wipe.removed.length} resource(s) removed)` : `LEFTOVERS: ${wipe.leftovers.join(', ')}`) : 'no wipe recorded'}. ${record.changedFiles.length} file(s) changed${listed?.patchSha256 ? `; apply with run_apply {runId: "${id}", reviewedSha256: "${listed.patchSha256}"}` : ''}.`,
      };
    },
  );

  const statusView = (r: { id: string; status: string; phase?: string | undefined; agent: string; changedFiles: number | unknown[]; usage: { inputTokens: number; outputTokens: number; requests: number; costUsd?: number | undefined }; error?: { kind: string; message: string } | undefined }) => ({
    runId: r.id,
    status: r.status,
    ...(r.phase ? { phase: r.phase } : {}),
    agent: r.agent,
    changedFiles: Array.isArray(r.changedFiles) ? r.changedFiles.length : r.changedFiles,
    usage: { inputTokens: r.usage.inputTokens, outputTokens: r.usage.outputTokens, requests: r.usage.requests, ...(r.usage.costUsd !== undefined ? { costUsd: r.usage.costUsd } : {}) },
    ...(r.error ? { error: { kind: r.error.kind, message: r.error.message } } : {}),
  });
  const statusText = (v: z.output<typeof RunStatusOut>) => `run ${v.runId}: ${v.status}${v.phase ? ` (${v.phase})` : ''}, ${v.changedFiles} file(s) changed${v.error ? `; ${v.error.kind}: ${v.error.message}` : ''}`;

  /** The run slot is freed when the run ends; the client may continue its own runs. */
  const holdRunSlot = (runId: string, release: () => void) => {
    client.runs.add(runId);
    void the().core.runs.wait(runId).then(release, release);
  };

  tool(
    'run_start',
    'Start an Airlock run: an agent works on a task in its own sandbox on a copy of the project, with provider keys kept outside. Returns the runId at once; follow with run_status / run_result.',
    z.strictObject({
      projectDir: z.string().min(1),
      task: z.string().min(1).max(100_000),
      agent: AgentKind.optional(),
      provider: z.string().max(40).optional().describe('default: the provider chosen in Airlock settings'),
      model: z.string().max(200).optional(),
      isolation: Isolation.optional(),
      network: NetworkPolicy.optional(),
      allow: z.array(z.string().min(1).max(253)).max(200).optional(),
      timeoutSec: z.number().int().min(10).max(7 * 24 * 3600).optional(),
      budgetTokens: z.number().int().positive().optional(),
      budgetUsd: z.number().positive().optional(),
    }),
    RunStatusOut,
    async (args, extra) => {
      const release = runSlots.take();
      if (!release) throw new AirlockError('CONFLICT', `This client already has ${runSlots.count} runs in progress (the cap is ${limits.runsPerClient}); wait for one (run_status) or run_cancel it.`);
      try {
        const folder = await the().grants.folder(client, args.projectDir, { purpose: 'run', signal: extra.signal });
        const network = args.network ?? 'none';
        await the().grants.network(client, folder, network, args.allow ?? []);
        const s = await the().core.settings.get();
        const defaults = newRunDefaults(s);
        const provider = args.provider ?? defaults.provider;
        const model = args.model ?? (provider === s.defaultProvider ? s.defaultModel : undefined);
        if (!provider || !model) throw new AirlockError('INVALID_INPUT', 'Name provider and model (no default is set in Airlock settings).', { field: provider ? 'model' : 'provider' });
        const started = await the().services.runs.start(StartRunInput.parse({
          projectDir: folder.dir,
          task: args.task,
          agent: args.agent ?? defaults.agent,
          provider,
          model,
          isolation: args.isolation ?? defaults.isolation,
          network,
          ...(args.allow?.length ? { allowlist: args.allow } : {}),
          // A client's run is always bounded: the default budget unless it names one.
          limits: { timeoutSec: args.timeoutSec ?? defaults.timeoutSec, budgetTokens: args.budgetTokens ?? limits.runBudgetTokens, ...(args.budgetUsd ? { budgetUsd: args.budgetUsd } : {}) },
        }));
        holdRunSlot(started.id, release);
        const v = statusView(started);
        return { value: v, text: statusText(v) };
      } catch (err) {
        release();
        throw err;
      }
    },
  );

  tool('run_status', 'Status of a run (or of a destroyed sandbox, by its id).', z.strictObject({ runId: RunId }), RunStatusOut, async (args) => {
    const v = statusView(await the().services.runs.get({ runId: args.runId }));
    return { value: v, text: statusText(v) };
  });

  tool(
    'run_result',
    "A finished run's result: summary, changed files, the patch and its SHA-256 (pass it to run_apply as reviewedSha256).",
    z.strictObject({ runId: RunId }),
    z.object({ runId: z.string(), status: z.string(), summary: z.string().optional(), files: z.array(ChangedFileOut), patch: z.string(), patchBytes: z.number(), patchSha256: z.string(), truncated: z.boolean() }),
    async (args) => {
      const run = await the().services.runs.get({ runId: args.runId });
      if (the().core.runs.activeRunIds().includes(args.runId)) throw new AirlockError('CONFLICT', `Run ${args.runId} is still ${run.status}; its result is collected when it ends (run_status).`);
      const listed = await the().services.diffs.list({ runId: args.runId });
      const whole = await the().services.diffs.preview({ runId: args.runId });
      const text = whole.text ?? '';
      const truncated = whole.text === undefined || whole.bytes > limits.patchBytes;
      const value = { runId: run.id, status: run.status, ...(run.summary ? { summary: run.summary } : {}), files: listed.files.map(changedView), patch: text.slice(0, limits.patchBytes), patchBytes: whole.bytes, patchSha256: whole.sha256, truncated };
      return { value, text: `run ${run.id} ${run.status}${run.summary ? `: ${run.summary}` : ''}\n${value.files.length} file(s), patch sha256 ${whole.sha256}\n\n${value.patch}` };
    },
  );

  tool(
    'run_continue',
    'Start a follow-up turn of a finished run: a fresh sandbox from the project plus that run\'s result.',
    z.strictObject({ runId: RunId, task: z.string().min(1).max(100_000), agent: AgentKind.optional(), provider: z.string().max(40).optional(), model: z.string().max(200).optional() }),
    RunStatusOut,
    async (args) => {
      const release = runSlots.take();
      if (!release) throw new AirlockError('CONFLICT', `This client already has ${runSlots.count} runs in progress (the cap is ${limits.runsPerClient}); wait for one (run_status) or run_cancel it.`);
      try {
        await the().grants.continuation(client, await the().core.store.get(args.runId));
      } catch (err) {
        release();
        throw err;
      }
      const started = await the()
        .services.runs.continue({ runId: args.runId, task: args.task, ...(args.agent ? { agent: args.agent } : {}), ...(args.provider ? { provider: args.provider } : {}), ...(args.model ? { model: args.model } : {}) })
        .catch((err: unknown) => {
          release();
          throw err;
        });
      holdRunSlot(started.id, release);
      const v = statusView(started);
      return { value: v, text: statusText(v) };
    },
  );

  tool('run_cancel', 'Cancel a run: the agent stops, its changes so far are kept for review, the sandbox is wiped.', z.strictObject({ runId: RunId }), RunStatusOut, async (args) => {
    await the().services.runs.cancel({ runId: args.runId });
    const v = statusView(await the().core.runs.wait(args.runId));
    return { value: v, text: statusText(v) };
  });

  tool(
    'run_apply',
    "Apply a finished run's (or destroyed sandbox's) reviewed result to the real project. Needs the user's yes in the Airlock app, which shows the exact change; the call waits for the answer.",
    z.strictObject({
      runId: RunId,
      reviewedSha256: Sha256.describe('patchSha256 from run_result or sandbox_destroy: apply writes exactly that patch or nothing'),
      files: z.array(z.string().min(1).max(4096)).max(10_000).optional().describe('apply only these files (reviewedSha256 is then their part of the patch)'),
      branch: z.string().min(1).max(200).optional().describe('commit onto this new branch instead of the working tree'),
      message: z.string().max(20_000).optional(),
      waitSec: z.number().int().min(0).max(600).optional().describe("how long to wait for the user's answer (default 300)"),
    }),
    z.object({ applied: z.array(z.string()), conflicts: z.array(z.object({ path: z.string(), reason: z.string() })), branch: z.string().optional(), commit: z.string().optional(), patchSha256: z.string().optional(), approvedBy: z.enum(['user', 'server-flag']) }),
    async (args, extra) => {
      if (the().core.runs.activeRunIds().includes(args.runId)) throw new AirlockError('CONFLICT', `Run ${args.runId} is still in progress; apply its result once it has ended (sandbox_destroy a sandbox first).`);
      const run = await the().core.store.get(args.runId);
      const reviewed = await the().services.diffs.preview({ runId: args.runId, ...(args.files ? { files: args.files } : {}) });
      if (reviewed.sha256 !== args.reviewedSha256) {
        throw new AirlockError('CONFLICT', `reviewedSha256 does not match the result (its patch${args.files ? ' for these files' : ''} has sha256 ${reviewed.sha256}); read it again with run_result and pass that digest.`, { field: 'reviewedSha256' });
      }
      if (!reviewed.files.length) throw new AirlockError('INVALID_INPUT', `Run ${args.runId} changed no files${args.files ? ' among those named' : ''}; there is nothing to apply.`);
      const who = clientName();
      const refuse = async (reason: string, message: string): Promise<never> => {
        await the().grants.note('refused', client, { what: 'run_apply', runId: run.id, dir: run.projectDir, reason });
        throw new AirlockError('FORBIDDEN', message);
      };
      // Review's rules (docs/architecture.md §11): what the user cannot be shown is not applied from here.
      if (reviewed.text === undefined) await refuse('too large to show', `Run ${run.id}'s patch (${reviewed.bytes} bytes) is too large to show for approval; nothing was written. The user reviews and applies it in Airlock's Review screen, or apply fewer files (files).`);
      const listed = await the().services.diffs.list({ runId: args.runId });
      const binary = listed.files.filter((f) => f.binary && reviewed.files.includes(f.path)).map((f) => f.path);
      if (binary.length) await refuse('binary files', `${binary.slice(0, 10).join(', ')} ${binary.length === 1 ? 'is a binary file' : 'are binary files'}, which cannot be shown for approval; nothing was written. The user applies them in Airlock's Review screen, or leave them out (files).`);
      const flags = classifyRiskyPaths(splitPatch(reviewed.text ?? ''));
      let by: 'user' | 'server-flag' = 'server-flag';
      let requestId: string | undefined;
      // --allow-apply writes without asking only into a granted folder and never a flagged file; anything else asks the user.
      const unasked = allowApply() && !flags.length && (await the().grants.grantedFolder(client, run.projectDir));
      if (!unasked) {
        const req = await the().approvals.request(
          { runId: run.id, client: who, projectDir: run.projectDir, target: run.projectDir, mode: args.branch ? 'branch' : 'working-tree', ...(args.branch ? { branch: args.branch } : {}), files: reviewed.files, reviewedSha256: args.reviewedSha256, patchBytes: reviewed.bytes, ...(flags.length ? { flags } : {}) },
          (args.waitSec ?? 300) * 1000,
        );
        requestId = req.requestId;
        const say = progress(extra);
        say(`waiting for the user's answer in Airlock (request ${req.requestId.slice(0, 8)})`);
        const keepAlive = setInterval(() => say("still waiting for the user's answer in Airlock"), KEEP_ALIVE_MS);
        const answer = await the().approvals.wait(req.requestId, extra.signal).finally(() => clearInterval(keepAlive));
        const how = the().approveHint ?? 'Open the Airlock app (or `airlock serve`): the request is shown there with the exact change to approve';
        const why = allowApply() ? ` (--allow-apply does not cover it: ${flags.length ? `flagged by review — ${flags.slice(0, 5).map((f) => `${f.path}: ${f.reason}`).join('; ')}` : `${run.projectDir} is not a folder granted to MCP clients`})` : '';
        if (answer === 'refused') await refuse('the user said no', `The user refused to apply run ${run.id}; nothing was written.`);
        if (answer === 'expired') await refuse('no answer', `Not applied: run_apply needs the user's yes${why} and none came within ${args.waitSec ?? 300} s. ${how}; call run_apply again and approve it there.${allowApply() ? '' : " (An MCP server started with 'airlock mcp --allow-apply' applies unflagged changes in granted folders without asking, recorded in the audit log.)"}`);
        by = 'user';
      }
      await the().grants.note('granted', client, { what: 'run_apply', runId: run.id, dir: run.projectDir, by, files: reviewed.files.length, reviewedSha256: args.reviewedSha256 });
      const result = await applyRunResult({
        store: the().core.store,
        run,
        reviewedSha256: args.reviewedSha256,
        mode: args.branch ? 'branch' : 'working-tree',
        ...(args.files ? { files: args.files } : {}),
        ...(args.branch ? { branch: args.branch } : {}),
        ...(args.message ? { message: args.message } : {}),
        approval: { via: 'mcp', client: who, by, ...(requestId ? { requestId } : {}) },
      });
      const value = { applied: result.applied, conflicts: result.conflicts, ...(result.branch ? { branch: result.branch } : {}), ...(result.commit ? { commit: result.commit } : {}), ...(result.patchSha256 ? { patchSha256: result.patchSha256 } : {}), approvedBy: by };
      return { value, text: `applied ${result.applied.length} file(s) to ${result.branch ? `branch ${result.branch}` : run.projectDir}${result.conflicts.length ? `; ${result.conflicts.length} left untouched (the project changed under them): ${result.conflicts.map((c) => c.path).join(', ')}` : ''} (approved by ${by === 'user' ? 'the user' : 'the --allow-apply flag'})` };
    },
  );

  registerResources(server, async () => { await ready; return the(); }, limits);

  return {
    server,
    sandboxes,
    async close(reason) {
      if (closed) return;
      closed = true;
      clearInterval(idleTimer);
      await Promise.all([...sandboxes].map((id) => end(id, reason).catch(debugLog.swallow('mcp.close.end'))));
    },
  };
}

/** A run's terminal log, events, diff and audit verification, as `airlock://runs/<id>/…` resources. */
function registerResources(server: McpServer, ready: () => Promise<McpDeps>, limits: McpLimits): void {
  const runIdOf = (v: string | string[] | undefined) => {
    const id = Array.isArray(v) ? v[0] : v;
    if (!id || !RunId.safeParse(id).success) throw new AirlockError('INVALID_INPUT', `'${String(id).slice(0, 80)}' is not a run id.`);
    return id;
  };
  const text = (uri: URL, body: string, mimeType = 'text/plain') => ({ contents: [{ uri: uri.href, mimeType, text: body }] });
  const template = (kind: string) => new ResourceTemplate(`airlock://runs/{runId}/${kind}`, { list: undefined });
  type Read = (uri: URL, vars: Record<string, string | string[]>) => Promise<ReadResourceResult>;
  const register = (name: string, kind: string, meta: { description: string; mimeType: string }, read: Read) =>
    server.registerResource(name, template(kind), meta, async (uri, vars) => {
      try {
        return await read(uri, vars);
      } catch (err) {
        throw resourceError(uri, err);
      }
    });

  register('run-terminal', 'terminal', { description: "A run's terminal log as plain text (escape codes left out; the last part past the cap)", mimeType: 'text/plain' }, async (uri, vars) => {
    const { core } = await ready();
    const id = runIdOf(vars.runId);
    await core.store.get(id);
    const file = path.join(core.store.paths(id).dir, 'terminal.log');
    const size = await stat(file).then((s) => s.size, () => 0);
    const from = Math.max(0, size - limits.patchBytes);
    const handle = await open(file, 'r').catch(() => undefined); // no terminal log yet: the resource is empty
    if (!handle) return text(uri, '');
    try {
      const buf = Buffer.alloc(size - from);
      await handle.read(buf, 0, buf.length, from);
      return text(uri, plainTerminalText(buf.toString('utf8')));
    } finally {
      await handle.close();
    }
  });
  server.registerResource('run-command-output', new ResourceTemplate('airlock://runs/{runId}/output/{command}/{stream}', { list: undefined }), { description: "The output a sandbox_exec kept (up to the cap, head and tail) when its result carried only part of it", mimeType: 'text/plain' }, async (uri, vars) => {
    try {
      const { core } = await ready();
      const id = runIdOf(vars.runId);
      const n = Number(vars.command);
      const stream = vars.stream;
      if (!Number.isSafeInteger(n) || n < 1 || (stream !== 'stdout' && stream !== 'stderr')) throw new AirlockError('INVALID_INPUT', `${uri.href} names no command output (…/output/<n>/stdout|stderr).`);
      const body = await readFile(outputFile(core, id, n, stream), 'utf8').catch(() => {
        throw new AirlockError('NOT_FOUND', `No kept output at ${uri.href}: only a sandbox_exec whose result was cut keeps one.`);
      });
      return text(uri, body);
    } catch (err) {
      throw resourceError(uri, err);
    }
  });
  register('run-events', 'events', { description: "A run's events (JSON)", mimeType: 'application/json' }, async (uri, vars) => {
    const { services } = await ready();
    const page = await services.runs.events({ runId: runIdOf(vars.runId), afterSeq: -1, limit: 5000 });
    return text(uri, JSON.stringify(page.events), 'application/json');
  });
  register('run-diff', 'diff', { description: "A finished run's result patch", mimeType: 'text/x-diff' }, async (uri, vars) => {
    const { services } = await ready();
    const whole = await services.diffs.preview({ runId: runIdOf(vars.runId) });
    return text(uri, (whole.text ?? '').slice(0, limits.patchBytes), 'text/x-diff');
  });
  register('run-audit', 'audit', { description: "Verification of a run's hash-chained audit log (JSON)", mimeType: 'application/json' }, async (uri, vars) => {
    const { services } = await ready();
    const result = await services.audit.verify({ runId: runIdOf(vars.runId) });
    return text(uri, JSON.stringify(result), 'application/json');
  });
}

/** Where a sandbox_exec's kept output lives: in the run's folder, so History keeps it with the run. */
function outputFile(core: AirlockCore, runId: string, command: number, stream: 'stdout' | 'stderr'): string {
  return path.join(core.store.paths(runId).dir, 'mcp-output', `${command}.${stream}.txt`);
}

/** MCP's code for a resource that does not exist (the specification's "Resource not found"). */
export const RESOURCE_NOT_FOUND = -32002;

/**
 * A failed resource read as a JSON-RPC error with the specification's code: no such run is -32002
 * (with the URI in `data`), a malformed run id -32602, anything else -32603, each with Airlock's message.
 */
function resourceError(uri: URL, err: unknown): McpError {
  const info = toErrorInfo(err);
  const code = info.kind === 'NOT_FOUND' ? RESOURCE_NOT_FOUND : info.kind === 'INVALID_INPUT' ? ErrorCode.InvalidParams : ErrorCode.InternalError;
  return new McpError(code, info.message, { uri: uri.href });
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

/** A unified patch cut into its files, for review's content-aware flags (`classifyRiskyPaths`). */
export function splitPatch(patch: string): Array<{ path: string; oldPath?: string; diff: string; oldMode?: string; newMode?: string }> {
  const out: Array<{ path: string; oldPath?: string; diff: string; oldMode?: string; newMode?: string }> = [];
  for (const part of patch.split(/^(?=diff --git )/m)) {
    if (!part.startsWith('diff --git ')) continue;
    const plus = /^\+\+\+ b\/(.+)$/m.exec(part)?.[1];
    const minus = /^--- a\/(.+)$/m.exec(part)?.[1];
    const header = /^diff --git a\/(.+?) b\/(.+)$/m.exec(part);
    const renamed = /^rename to (.+)$/m.exec(part)?.[1];
    const p = plus ?? renamed ?? header?.[2] ?? minus;
    if (!p) continue;
    const oldMode = /^old mode (\d+)$/m.exec(part)?.[1];
    const newMode = /^new (?:file )?mode (\d+)$/m.exec(part)?.[1];
    const old = minus ?? /^rename from (.+)$/m.exec(part)?.[1];
    out.push({ path: p, ...(old && old !== p ? { oldPath: old } : {}), diff: part, ...(oldMode ? { oldMode } : {}), ...(newMode ? { newMode } : {}) });
  }
  return out;
}
