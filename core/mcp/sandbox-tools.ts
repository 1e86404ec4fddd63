import { createHash } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { ResourceLink } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { headAndTail, WORKSPACE, workspacePath } from './mcp-limits';
import { commandOutputFile } from './mcp-resources';
import { ChangedFileOut, changedView, PreviewOut, progressFor, SandboxId, type McpToolContext } from './mcp-tool-context';
import { registerSandboxCreateTool } from './sandbox-create-tool';
import { readCapped } from './sandbox-read';
import { debugLog } from '../common/debug-log';

const WipeOut = z.object({ verified: z.boolean(), removed: z.array(z.string()), leftovers: z.array(z.string()), durationMs: z.number().optional(), at: z.string() });

/**
 * The sandbox tools (docs/architecture.md §17): create, list, run commands, read and write files, the
 * changes, published ports, destroy. Commands run by the host and are recorded first-hand.
 */
export function registerSandboxTools(ctx: McpToolContext): void {
  registerSandboxCreateTool(ctx);
  registerSandboxListTool(ctx);
  registerSandboxExecTool(ctx);
  registerSandboxFileTools(ctx);
  registerSandboxDiffTool(ctx);
  registerSandboxPortTool(ctx);
  registerSandboxDestroyTool(ctx);
}

function registerSandboxListTool(ctx: McpToolContext): void {
  ctx.tool(
    'sandbox_list',
    "This client's live sandboxes: id, project, when made and last used.",
    z.strictObject({}),
    z.object({ sandboxes: z.array(z.object({ sandboxId: z.string(), projectDir: z.string(), createdAt: z.string(), lastUsedAt: z.string(), kept: z.boolean() })), cap: z.number() }),
    async () => {
      const list = await ctx.sandboxes.list();
      const cap = ctx.limits.sandboxesPerClient;
      return { value: { sandboxes: list, cap }, text: list.length ? list.map((s) => `${s.sandboxId}  ${s.projectDir}  (made ${s.createdAt}${s.kept ? ', kept' : ''})`).join('\n') : `no live sandboxes (cap ${cap})` };
    },
  );
}

function registerSandboxExecTool(ctx: McpToolContext): void {
  const { limits } = ctx;
  ctx.tool(
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
      const id = await ctx.sandboxes.own(args.sandboxId);
      const cwd = workspacePath(args.cwd ?? WORKSPACE, 'cwd');
      const say = progressFor(extra);
      let streamed = 0;
      const result = await ctx.deps().core.runs.execInSession(id, { command: args.command, cwd, timeoutSec: args.timeoutSec ?? 600, capBytes: limits.outputBytes, signal: extra.signal }, (_stream, bytes) => {
        ctx.sandboxes.touch(id);
        if (streamed >= limits.outputBytes) return;
        streamed += bytes.length;
        say(bytes.subarray(0, 16 * 1024).toString('utf8'));
      });
      ctx.sandboxes.touch(id);
      await say.flushed();
      if (result.failure) throw new AirlockError('CONFLICT', `The command could not run: ${result.failure}.`);
      // The result is sized for an agent's context; a longer output is kept in the run's folder and linked.
      const n = ctx.sandboxes.nextCommand(id);
      const links: ResourceLink[] = [];
      const outputUris: { stdout?: string; stderr?: string } = {};
      const shown = async (stream: 'stdout' | 'stderr', kept: string) => {
        const uri = `airlock://runs/${id}/output/${n}/${stream}`;
        const cut = headAndTail(kept, limits.resultBytes, `the whole ${stream} kept is the resource ${uri}`);
        if (!cut.cut) return kept;
        const file = commandOutputFile(ctx.deps().core, id, n, stream);
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
}

/** `sandbox_read_file`, `sandbox_write_file`, `sandbox_list_files`: the workspace's files, paths kept inside it. */
function registerSandboxFileTools(ctx: McpToolContext): void {
  const { limits } = ctx;
  ctx.tool(
    'sandbox_read_file',
    `Read a file of the sandbox's workspace (paths relative to ${WORKSPACE}).`,
    z.strictObject({ sandboxId: SandboxId, path: z.string().min(1).max(4096) }),
    z.object({ path: z.string(), bytes: z.number(), encoding: z.enum(['utf8', 'base64']), content: z.string(), sha256: z.string() }),
    async (args) => {
      const id = await ctx.sandboxes.own(args.sandboxId);
      const file = workspacePath(args.path);
      // Over the cap: a LimitError saying so and what to do instead (sandbox-read.ts).
      const data = await readCapped(ctx.deps().core.runs.sessionSandbox(id).channel, file, limits.fileBytes);
      const utf8 = data.toString('utf8');
      const text = Buffer.from(utf8, 'utf8').equals(data);
      return { value: { path: file, bytes: data.length, encoding: text ? ('utf8' as const) : ('base64' as const), content: text ? utf8 : data.toString('base64'), sha256: createHash('sha256').update(data).digest('hex') }, text: text ? utf8 : `${file}: ${data.length} bytes of binary data (base64 in structuredContent)` };
    },
  );

  ctx.tool(
    'sandbox_write_file',
    `Write a file in the sandbox's workspace (paths relative to ${WORKSPACE}); parent folders are made.`,
    z.strictObject({ sandboxId: SandboxId, path: z.string().min(1).max(4096), content: z.string(), encoding: z.enum(['utf8', 'base64']).optional(), executable: z.boolean().optional() }),
    z.object({ path: z.string(), bytes: z.number(), sha256: z.string() }),
    async (args) => {
      const id = await ctx.sandboxes.own(args.sandboxId);
      const file = workspacePath(args.path);
      if (file === WORKSPACE) throw new AirlockError('INVALID_INPUT', 'Name a file inside the workspace, not the workspace itself.', { field: 'path' });
      const data = Buffer.from(args.content, args.encoding ?? 'utf8');
      if (data.length > limits.fileBytes) throw new AirlockError('INVALID_INPUT', `The file is ${data.length} bytes; sandbox_write_file takes at most ${limits.fileBytes}. Nothing was written.`, { field: 'content' });
      const sandbox = ctx.deps().core.runs.sessionSandbox(id);
      const mk = await sandbox.channel.run({ argv: ['mkdir', '-p', '--', path.posix.dirname(file)] });
      if (mk.exitCode !== 0) throw new AirlockError('INVALID_INPUT', `Could not make the folder ${path.posix.dirname(file)}: ${mk.stderr.toString('utf8').slice(0, 300)}`);
      await sandbox.channel.writeFile(file, data, { mode: args.executable ? 0o755 : 0o644 });
      const sha256 = createHash('sha256').update(data).digest('hex');
      await ctx.deps().core.runs.noteOn(id, `MCP client wrote ${file} (${data.length} bytes)`, { path: file, bytes: data.length, sha256 });
      return { value: { path: file, bytes: data.length, sha256 }, text: `wrote ${file} (${data.length} bytes)` };
    },
  );

  ctx.tool(
    'sandbox_list_files',
    `List a folder of the sandbox's workspace (default ${WORKSPACE}).`,
    z.strictObject({ sandboxId: SandboxId, path: z.string().max(4096).optional() }),
    z.object({ path: z.string(), entries: z.array(z.object({ name: z.string(), type: z.string(), size: z.number() })), truncated: z.boolean() }),
    async (args) => {
      const id = await ctx.sandboxes.own(args.sandboxId);
      const dir = workspacePath(args.path ?? WORKSPACE);
      const all = await ctx.deps().core.runs.sessionSandbox(id).channel.list(dir);
      const entries = all.slice(0, limits.listEntries).map((e) => ({ name: e.name, type: e.type, size: e.size }));
      const truncated = all.length > entries.length;
      return { value: { path: dir, entries, truncated }, text: `${dir}:\n${entries.map((e) => `${e.type === 'dir' ? 'd' : e.type === 'symlink' ? 'l' : '-'} ${e.name}${e.type === 'dir' ? '/' : ''}`).join('\n')}${truncated ? `\n… ${all.length - entries.length} more` : ''}` };
    },
  );
}

function registerSandboxDiffTool(ctx: McpToolContext): void {
  const { limits } = ctx;
  const patchView = (patch: Buffer) => {
    const truncated = patch.length > limits.patchBytes;
    return { patch: patch.subarray(0, limits.patchBytes).toString('utf8'), patchBytes: patch.length, patchSha256: createHash('sha256').update(patch).digest('hex'), truncated };
  };
  ctx.tool(
    'sandbox_diff',
    'The changes in the sandbox against the copy it started from, derived on the host: changed files, the patch and its SHA-256.',
    z.strictObject({ sandboxId: SandboxId }),
    z.object({ files: z.array(ChangedFileOut), patch: z.string(), patchBytes: z.number(), patchSha256: z.string(), truncated: z.boolean() }),
    async (args) => {
      const id = await ctx.sandboxes.own(args.sandboxId);
      const { result, patch } = await ctx.deps().core.runs.collectSession(id);
      const files = result.changes.map(changedView);
      const view = patchView(patch);
      return { value: { files, ...view }, text: files.length ? `${files.length} file(s) changed (patch sha256 ${view.patchSha256}):\n${files.map((f) => `  ${f.status} ${f.path}`).join('\n')}\n\n${view.patch}` : 'no changes' };
    },
  );
}

function registerSandboxPortTool(ctx: McpToolContext): void {
  ctx.tool(
    'sandbox_publish_port',
    'Publish a port a process in the sandbox listens on, on a random loopback port of this machine; returns its URL.',
    z.strictObject({ sandboxId: SandboxId, port: z.number().int().min(1).max(65535) }),
    PreviewOut,
    async (args) => {
      const p = await ctx.deps().core.runs.publishPort(await ctx.sandboxes.own(args.sandboxId), args.port);
      return { value: p, text: `sandbox port ${p.sandboxPort} → ${p.url}` };
    },
  );
}

function registerSandboxDestroyTool(ctx: McpToolContext): void {
  ctx.tool(
    'sandbox_destroy',
    'Destroy a sandbox: its changes are kept as a reviewable result (apply with run_apply, sandboxId as runId), the sandbox is wiped and checked gone.',
    z.strictObject({ sandboxId: SandboxId }),
    z.object({ sandboxId: z.string(), status: z.string(), wipe: WipeOut.optional(), changedFiles: z.number(), patchSha256: z.string().optional() }),
    async (args) => {
      const id = await ctx.sandboxes.own(args.sandboxId);
      const record = await ctx.sandboxes.end(id, 'sandbox_destroy');
      // No diff to list (nothing was collected): the result just names no digest to apply.
      const listed = await ctx.deps().services.diffs.list({ runId: id }).catch(debugLog.swallow('mcp.sandboxDestroy.diff'));
      const wipe = record.wipe ? { verified: record.wipe.verified, removed: record.wipe.removed, leftovers: record.wipe.leftovers, ...(record.wipe.durationMs !== undefined ? { durationMs: record.wipe.durationMs } : {}), at: record.wipe.at } : undefined;
      return {
        value: { sandboxId: id, status: record.status, ...(wipe ? { wipe } : {}), changedFiles: record.changedFiles.length, ...(listed?.patchSha256 ? { patchSha256: listed.patchSha256 } : {}) },
        text: `Sandbox ${id} ${record.status}; ${wipe ? (wipe.verified ? `wiped and verified gone (${wipe.removed.length} resource(s) removed)` : `LEFTOVERS: ${wipe.leftovers.join(', ')}`) : 'no wipe recorded'}. ${record.changedFiles.length} file(s) changed${listed?.patchSha256 ? `; apply with run_apply {runId: "${id}", reviewedSha256: "${listed.patchSha256}"}` : ''}.`,
      };
    },
  );
}
