import { z } from 'zod';
import { AirlockError } from '../../contracts/errors';
import { RunId } from '../../contracts/ids';
import { AgentKind, Isolation, NetworkPolicy, StartRunInput } from '../../contracts/runs';
import { newRunDefaults } from '../../contracts/run-defaults';
import { ChangedFileOut, changedView, type McpToolContext } from './mcp-tool-context';

const RunStatusOut = z.object({
  runId: z.string(),
  status: z.string(),
  phase: z.string().optional(),
  agent: z.string(),
  changedFiles: z.number(),
  usage: z.object({ inputTokens: z.number(), outputTokens: z.number(), requests: z.number(), costUsd: z.number().optional() }),
  error: z.object({ kind: z.string(), message: z.string() }).optional(),
});
type RunStatus = z.output<typeof RunStatusOut>;

function statusView(r: { id: string; status: string; phase?: string | undefined; agent: string; changedFiles: number | unknown[]; usage: { inputTokens: number; outputTokens: number; requests: number; costUsd?: number | undefined }; error?: { kind: string; message: string } | undefined }): RunStatus {
  return {
    runId: r.id,
    status: r.status,
    ...(r.phase ? { phase: r.phase } : {}),
    agent: r.agent,
    changedFiles: Array.isArray(r.changedFiles) ? r.changedFiles.length : r.changedFiles,
    usage: { inputTokens: r.usage.inputTokens, outputTokens: r.usage.outputTokens, requests: r.usage.requests, ...(r.usage.costUsd !== undefined ? { costUsd: r.usage.costUsd } : {}) },
    ...(r.error ? { error: { kind: r.error.kind, message: r.error.message } } : {}),
  };
}

function statusAnswer(v: RunStatus): { value: RunStatus; text: string } {
  return { value: v, text: `run ${v.runId}: ${v.status}${v.phase ? ` (${v.phase})` : ''}, ${v.changedFiles} file(s) changed${v.error ? `; ${v.error.kind}: ${v.error.message}` : ''}` };
}

/**
 * The run tools (docs/architecture.md §17): start an agent run in a granted folder, its status and
 * result, a follow-up turn, cancel. A client's runs are capped and always bounded by a budget.
 */
export function registerRunTools(ctx: McpToolContext): void {
  registerRunStartTool(ctx);
  ctx.tool('run_status', 'Status of a run (or of a destroyed sandbox, by its id).', z.strictObject({ runId: RunId }), RunStatusOut, async (args) => statusAnswer(statusView(await ctx.deps().services.runs.get({ runId: args.runId }))));
  registerRunResultTool(ctx);
  registerRunContinueTool(ctx);
  ctx.tool('run_cancel', 'Cancel a run: the agent stops, its changes so far are kept for review, the sandbox is wiped.', z.strictObject({ runId: RunId }), RunStatusOut, async (args) => {
    await ctx.deps().services.runs.cancel({ runId: args.runId });
    return statusAnswer(statusView(await ctx.deps().core.runs.wait(args.runId)));
  });
}

/** The run slot is freed when the run ends; the client may continue its own runs. */
function holdRunSlot(ctx: McpToolContext, runId: string, release: () => void): void {
  ctx.client.runs.add(runId);
  void ctx.deps().core.runs.wait(runId).then(release, release);
}

/** A run slot of this client, or CONFLICT at the cap. */
function takeRunSlot(ctx: McpToolContext): () => void {
  const release = ctx.runSlots.take();
  if (!release) throw new AirlockError('CONFLICT', `This client already has ${ctx.runSlots.count} runs in progress (the cap is ${ctx.limits.runsPerClient}); wait for one (run_status) or run_cancel it.`);
  return release;
}

function registerRunStartTool(ctx: McpToolContext): void {
  ctx.tool(
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
      const release = takeRunSlot(ctx);
      try {
        const { grants, core, services } = ctx.deps();
        const folder = await grants.folder(ctx.client, args.projectDir, { purpose: 'run', signal: extra.signal });
        const network = args.network ?? 'none';
        await grants.network(ctx.client, folder, network, args.allow ?? []);
        const s = await core.settings.get();
        const defaults = newRunDefaults(s);
        const provider = args.provider ?? defaults.provider;
        const model = args.model ?? (provider === s.defaultProvider ? s.defaultModel : undefined);
        if (!provider || !model) throw new AirlockError('INVALID_INPUT', 'Name provider and model (no default is set in Airlock settings).', { field: provider ? 'model' : 'provider' });
        const started = await services.runs.start(StartRunInput.parse({
          projectDir: folder.dir,
          task: args.task,
          agent: args.agent ?? defaults.agent,
          provider,
          model,
          isolation: args.isolation ?? defaults.isolation,
          network,
          ...(args.allow?.length ? { allowlist: args.allow } : {}),
          // A client's run is always bounded: the default budget unless it names one.
          limits: { timeoutSec: args.timeoutSec ?? defaults.timeoutSec, budgetTokens: args.budgetTokens ?? ctx.limits.runBudgetTokens, ...(args.budgetUsd ? { budgetUsd: args.budgetUsd } : {}) },
        }));
        holdRunSlot(ctx, started.id, release);
        return statusAnswer(statusView(started));
      } catch (err) {
        release();
        throw err;
      }
    },
  );
}

function registerRunResultTool(ctx: McpToolContext): void {
  const { limits } = ctx;
  ctx.tool(
    'run_result',
    "A finished run's result: summary, changed files, the patch and its SHA-256 (pass it to run_apply as reviewedSha256).",
    z.strictObject({ runId: RunId }),
    z.object({ runId: z.string(), status: z.string(), summary: z.string().optional(), files: z.array(ChangedFileOut), patch: z.string(), patchBytes: z.number(), patchSha256: z.string(), truncated: z.boolean() }),
    async (args) => {
      const { core, services } = ctx.deps();
      const run = await services.runs.get({ runId: args.runId });
      if (core.runs.activeRunIds().includes(args.runId)) throw new AirlockError('CONFLICT', `Run ${args.runId} is still ${run.status}; its result is collected when it ends (run_status).`);
      const listed = await services.diffs.list({ runId: args.runId });
      const whole = await services.diffs.preview({ runId: args.runId });
      const text = whole.text ?? '';
      const truncated = whole.text === undefined || whole.bytes > limits.patchBytes;
      const value = { runId: run.id, status: run.status, ...(run.summary ? { summary: run.summary } : {}), files: listed.files.map(changedView), patch: text.slice(0, limits.patchBytes), patchBytes: whole.bytes, patchSha256: whole.sha256, truncated };
      return { value, text: `run ${run.id} ${run.status}${run.summary ? `: ${run.summary}` : ''}\n${value.files.length} file(s), patch sha256 ${whole.sha256}\n\n${value.patch}` };
    },
  );
}

function registerRunContinueTool(ctx: McpToolContext): void {
  ctx.tool(
    'run_continue',
    'Start a follow-up turn of a finished run: a fresh sandbox from the project plus that run\'s result.',
    z.strictObject({ runId: RunId, task: z.string().min(1).max(100_000), agent: AgentKind.optional(), provider: z.string().max(40).optional(), model: z.string().max(200).optional() }),
    RunStatusOut,
    async (args) => {
      const release = takeRunSlot(ctx);
      try {
        await ctx.deps().grants.continuation(ctx.client, await ctx.deps().core.store.get(args.runId));
      } catch (err) {
        release();
        throw err;
      }
      const started = await ctx
        .deps()
        .services.runs.continue({ runId: args.runId, task: args.task, ...(args.agent ? { agent: args.agent } : {}), ...(args.provider ? { provider: args.provider } : {}), ...(args.model ? { model: args.model } : {}) })
        .catch((err: unknown) => {
          release();
          throw err;
        });
      holdRunSlot(ctx, started.id, release);
      return statusAnswer(statusView(started));
    },
  );
}
