import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { RunId } from '../../contracts/ids';
import { applyRunResult } from '../runs/run-apply';
import { classifyRiskyPaths } from '../workspace/risky-paths';
import { KEEP_ALIVE_MS } from './mcp-limits';
import { progressFor, type McpToolContext } from './mcp-tool-context';

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex');

/**
 * `run_apply` (docs/architecture.md §17): a finished run's reviewed result into the real project, only
 * with the user's yes in Airlock, or under `--allow-apply` in a granted folder and of no flagged file.
 * What the user cannot be shown (too large, binary) is refused; every decision is in the audit log.
 */
export function registerApplyTool(ctx: McpToolContext): void {
  const { client } = ctx;
  ctx.tool(
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
      if (ctx.deps().core.runs.activeRunIds().includes(args.runId)) throw new AirlockError('CONFLICT', `Run ${args.runId} is still in progress; apply its result once it has ended (sandbox_destroy a sandbox first).`);
      const run = await ctx.deps().core.store.get(args.runId);
      const reviewed = await ctx.deps().services.diffs.preview({ runId: args.runId, ...(args.files ? { files: args.files } : {}) });
      if (reviewed.sha256 !== args.reviewedSha256) {
        throw new AirlockError('CONFLICT', `reviewedSha256 does not match the result (its patch${args.files ? ' for these files' : ''} has sha256 ${reviewed.sha256}); read it again with run_result and pass that digest.`, { field: 'reviewedSha256' });
      }
      if (!reviewed.files.length) throw new AirlockError('INVALID_INPUT', `Run ${args.runId} changed no files${args.files ? ' among those named' : ''}; there is nothing to apply.`);
      const who = ctx.clientName();
      const refuse = async (reason: string, message: string): Promise<never> => {
        await ctx.deps().grants.note('refused', client, { what: 'run_apply', runId: run.id, dir: run.projectDir, reason });
        throw new AirlockError('FORBIDDEN', message);
      };
      // Review's rules (docs/architecture.md §11): what the user cannot be shown is not applied from here.
      if (reviewed.text === undefined) await refuse('too large to show', `Run ${run.id}'s patch (${reviewed.bytes} bytes) is too large to show for approval; nothing was written. The user reviews and applies it in Airlock's Review screen, or apply fewer files (files).`);
      const listed = await ctx.deps().services.diffs.list({ runId: args.runId });
      const binary = listed.files.filter((f) => f.binary && reviewed.files.includes(f.path)).map((f) => f.path);
      if (binary.length) await refuse('binary files', `${binary.slice(0, 10).join(', ')} ${binary.length === 1 ? 'is a binary file' : 'are binary files'}, which cannot be shown for approval; nothing was written. The user applies them in Airlock's Review screen, or leave them out (files).`);
      const flags = classifyRiskyPaths(splitPatch(reviewed.text ?? ''));
      let by: 'user' | 'server-flag' = 'server-flag';
      let requestId: string | undefined;
      // --allow-apply writes without asking only into a granted folder and never a flagged file; anything else asks the user.
      const unasked = ctx.allowApply() && !flags.length && (await ctx.deps().grants.grantedFolder(client, run.projectDir));
      if (!unasked) {
        const req = await ctx.deps().approvals.request(
          { runId: run.id, client: who, projectDir: run.projectDir, target: run.projectDir, mode: args.branch ? 'branch' : 'working-tree', ...(args.branch ? { branch: args.branch } : {}), files: reviewed.files, reviewedSha256: args.reviewedSha256, patchBytes: reviewed.bytes, ...(flags.length ? { flags } : {}) },
          (args.waitSec ?? 300) * 1000,
        );
        requestId = req.requestId;
        const say = progressFor(extra);
        say(`waiting for the user's answer in Airlock (request ${req.requestId.slice(0, 8)})`);
        const keepAlive = setInterval(() => say("still waiting for the user's answer in Airlock"), KEEP_ALIVE_MS);
        const answer = await ctx.deps().approvals.wait(req.requestId, extra.signal).finally(() => clearInterval(keepAlive));
        const how = ctx.deps().approveHint ?? 'Open the Airlock app (or `airlock serve`): the request is shown there with the exact change to approve';
        const why = ctx.allowApply() ? ` (--allow-apply does not cover it: ${flags.length ? `flagged by review — ${flags.slice(0, 5).map((f) => `${f.path}: ${f.reason}`).join('; ')}` : `${run.projectDir} is not a folder granted to MCP clients`})` : '';
        if (answer === 'refused') await refuse('the user said no', `The user refused to apply run ${run.id}; nothing was written.`);
        if (answer === 'expired') await refuse('no answer', `Not applied: run_apply needs the user's yes${why} and none came within ${args.waitSec ?? 300} s. ${how}; call run_apply again and approve it there.${ctx.allowApply() ? '' : " (An MCP server started with 'airlock mcp --allow-apply' applies unflagged changes in granted folders without asking, recorded in the audit log.)"}`);
        by = 'user';
      }
      await ctx.deps().grants.note('granted', client, { what: 'run_apply', runId: run.id, dir: run.projectDir, by, files: reviewed.files.length, reviewedSha256: args.reviewedSha256 });
      const result = await applyRunResult({
        store: ctx.deps().core.store,
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
