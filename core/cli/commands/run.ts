import type { RunSummary } from '../../../contracts';
import { COMMAND_HELP } from '../command-help';
import { AirlockError } from '../../../contracts/errors';
import { runAgainInput } from '../../../contracts/run-again';
import { defaultModelFor, newRunDefaults } from '../../../contracts/run-defaults';
import { AgentKind, StartRunInput, type GitHistory, type StartRunArgs } from '../../../contracts/runs';
import type { Settings } from '../../../contracts/settings';
import { freshConversationReason } from '../../runs/run-thread';
import { getAgentAdapter } from '../../agents';
import { createAirlockCore, type AirlockCore } from '../../app';
import type { StoredRun } from '../../runs/run-record';
import { servicesFor } from '../../app-services';
import { CliUsageError, numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { answerApprovals, startTrusting } from '../run-answers';
import { jsonView, liveView, type RunView } from '../run-view';
import { parseAttempts, runAttemptGroup } from './run-attempts';
import { safeTerminalText as safe } from '../terminal-safe';

const RUN_OPTIONS = {
  task: { type: 'string' },
  agent: { type: 'string' },
  'custom-command': { type: 'string' },
  provider: { type: 'string' },
  model: { type: 'string' },
  'approve-commands': { type: 'boolean' },
  timeout: { type: 'string' },
  'budget-tokens': { type: 'string' },
  'budget-usd': { type: 'string' },
  isolation: { type: 'string' },
  network: { type: 'string' },
  allow: { type: 'string', multiple: true },
  rule: { type: 'string', multiple: true },
  secret: { type: 'string', multiple: true },
  mcp: { type: 'string', multiple: true },
  'no-mcp': { type: 'boolean' },
  'internal-host': { type: 'string', multiple: true },
  'network-approvals': { type: 'string' },
  'key-env': { type: 'string' },
  publish: { type: 'string', multiple: true },
  'git-history': { type: 'string' },
  environment: { type: 'string' },
  'trust-environment': { type: 'boolean' },
  'allow-local-env': { type: 'string', multiple: true },
  'setup-allow': { type: 'string', multiple: true },
  json: { type: 'boolean' },
  check: { type: 'string' },
  'check-timeout': { type: 'string' },
  attempts: { type: 'string' },
  again: { type: 'string' },
  continue: { type: 'string' },
  checkpoint: { type: 'string' },
} as const;

type RunServices = ReturnType<typeof servicesFor>;
type RunRecord = Awaited<ReturnType<RunServices['runs']['get']>>;

/** `airlock run`'s flags, checked on their own (before anything is started or read). */
interface RunFlags {
  values: ReturnType<typeof parseCliArgs<typeof RUN_OPTIONS>>['values'];
  projectDir: string | undefined;
  /** `--again`: a new run like this past one. */
  again: string | undefined;
  /** `--continue`: the run this one follows up; its project (and settings) are taken from it. */
  parentId: string | undefined;
  fromCheckpoint: number | undefined;
  timeoutSec: number | undefined;
  budgetTokens: number | undefined;
  budgetUsd: number | undefined;
  gitHistory: GitHistory | undefined;
  checkTimeoutSec: number | undefined;
  networkApprovals: 'ask' | 'deny';
  publish: number[];
  json: boolean;
}

/** What a new run is resolved against: settings, the run it follows or repeats, the provider, the project's MCP servers. */
interface RunBasis {
  settings: Settings;
  /** `--continue`: the run followed up. */
  parent: RunRecord | undefined;
  /** `--again`: the past run's settings, under whatever flags were given (contracts/run-again.ts). */
  base: StartRunInput | undefined;
  provider: string;
  config: Awaited<ReturnType<AirlockCore['catalog']['get']>>;
  /** The MCP servers the user enabled for the project, for a new run that names none (§20). */
  projectMcp: string[];
}

/**
 * `airlock run`: one task in a fresh sandbox, with live progress (phase, commands and their output,
 * files changed, tokens) or, with `--json`, one JSON event per line and a final summary line.
 */
export const runCommand: CliCommand = {
  name: 'run',
  summary: COMMAND_HELP.run.summary,
  usage: COMMAND_HELP.run.usage,
  async run(args, io) {
    const flags = parseRunFlags(args, io);
    const core = await createAirlockCore({ env: io.env, ...(io.app ? { app: io.app } : {}), ...(io.egressProxyForTests ? { egressProxyForTests: io.egressProxyForTests } : {}) });
    const services = servicesFor(core);
    try {
      const basis = await resolveRunBasis(flags, core, services, io);
      if (flags.values.attempts) {
        const groupRun = newRunInput(flags, basis);
        const specs = await parseAttempts(flags.values.attempts, groupRun, core, basis.settings);
        return await runAttemptGroup(io, services, core, groupRun, specs, flags.json);
      }
      const view = flags.json ? jsonView(io) : liveView(io);
      const subs = [
        services.runs.onDidEvent((e) => view.event(e)),
        services.runs.onDidChangeStatus((s) => view.status(s)),
      ];
      const started = basis.parent ? await continueRun(flags, basis.parent, services, io) : await startTrusting(io, flags.json, (trust) => services.runs.start({ ...newRunInput(flags, basis), ...(trust ? { trustEnvironment: true } : {}) }));
      view.started(started);
      subs.push(...offerAndPublishPorts(flags, started.id, core, services, io));
      const final = await followRun(flags, basis, started, core, services, io);
      for (const s of subs) s.dispose();
      await showFinished(view, started.id, services);
      return final.status === 'done' ? ExitCode.ok : ExitCode.runNotDone;
    } finally {
      await services.dispose();
    }
  },
};

/** Parses and checks `airlock run`'s flags: which go together, numbers in range. */
function parseRunFlags(args: string[], io: CliIo): RunFlags {
  const { values, positionals } = parseCliArgs(args, RUN_OPTIONS);
  const again = values.again;
  // A follow-up turn takes its project (and its settings) from the run it continues.
  const parentId = values.continue;
  if (again && parentId) throw new CliUsageError('--again starts a new run like a past one; --continue follows one up. Use one of them.');
  const [projectDir] = (again || parentId) && positionals.length === 0 ? [undefined] : positionalsExactly(positionals, '<projectDir>');
  if (parentId && projectDir) throw new CliUsageError(`--continue works on the project of run ${parentId}; leave out the project folder.`);
  const fromCheckpoint = numberOption(values.checkpoint, 'checkpoint', { integer: true, min: 1 });
  if (fromCheckpoint !== undefined && !parentId) throw new CliUsageError('--checkpoint N continues a run from one of its checkpoints: use it with --continue <runId>.');
  const timeoutSec = numberOption(values.timeout, 'timeout', { integer: true, min: 10 });
  const budgetTokens = numberOption(values['budget-tokens'], 'budget-tokens', { integer: true, min: 1 });
  const budgetUsd = numberOption(values['budget-usd'], 'budget-usd', { min: 0 });
  const gitHistory = gitHistoryOption(values['git-history']);
  const checkTimeoutSec = numberOption(values['check-timeout'], 'check-timeout', { integer: true, min: 1, max: 3600 });
  if (checkTimeoutSec && !values.check) throw new CliUsageError('--check-timeout goes with --check (the command the host runs after the agent).');
  if (values.attempts && (parentId || values.publish?.length)) throw new CliUsageError('--attempts starts a new group of runs; it does not combine with --continue or --publish.');
  const networkApprovals = networkApprovalsOption(values['network-approvals'], io.stdin.isTTY === true);
  const publish = (values.publish ?? []).map((p) => numberOption(p, 'publish', { integer: true, min: 1, max: 65535 }) as number);
  return { values, projectDir, again, parentId, fromCheckpoint, timeoutSec, budgetTokens, budgetUsd, gitHistory, checkTimeoutSec, networkApprovals, publish, json: values.json === true };
}

/** Reads what the run is resolved against; names the project's MCP servers when a new run gets them unasked. */
async function resolveRunBasis(flags: RunFlags, core: AirlockCore, services: RunServices, io: CliIo): Promise<RunBasis> {
  const { values, projectDir } = flags;
  const settings = await core.settings.get();
  const defaults = newRunDefaults(settings);
  const parent = flags.parentId ? await services.runs.get({ runId: flags.parentId }) : undefined;
  // `--again`: the past run's settings, under whatever flags were given (contracts/run-again.ts).
  const base = flags.again ? runAgainInput(await services.runs.get({ runId: flags.again })) : undefined;
  const provider = values.provider ?? parent?.provider ?? base?.provider ?? defaults.provider ?? 'anthropic';
  const config = await core.catalog.get(provider);
  if (values['key-env']) core.vault.useEnvKey(provider, values['key-env'], io.env);
  // A new run that names no MCP servers gets the ones the user enabled for the project (§20), and says which.
  const projectMcp = !values.mcp?.length && !values['no-mcp'] && !flags.again && !parent && projectDir && getAgentAdapter(values.agent ?? defaults.agent).supportsMcp
    ? (await services.mcpServers.projectServers({ projectDir })).servers
    : [];
  if (projectMcp.length) {
    const note = `MCP servers enabled for this project: ${projectMcp.join(', ')} (--mcp NAME picks others, --no-mcp none)`;
    if (values.json) io.stdout.write(`${JSON.stringify({ type: 'note', message: note })}\n`);
    else io.stderr.write(`note: ${safe(note)}\n`);
  }
  return { settings, parent, base, provider, config, projectMcp };
}

/** The new run's input: each flag given, else the `--again` run's setting, else the user's default. */
function newRunInput(flags: RunFlags, { settings, base, provider, config, projectMcp }: RunBasis): StartRunArgs {
  const { values, budgetTokens, budgetUsd, checkTimeoutSec, gitHistory } = flags;
  const defaults = newRunDefaults(settings);
  const model = values.model ?? (provider === base?.provider ? base.model : undefined) ?? defaultModelFor(settings, config);
  if (!model) throw new AirlockError('INVALID_INPUT', `provider ${provider} lists no models; pass --model`);
  const tokens = budgetTokens ?? base?.limits?.budgetTokens;
  const usd = budgetUsd ?? base?.limits?.budgetUsd;
  return StartRunInput.parse({
    projectDir: flags.projectDir ?? base?.projectDir,
    task: values.task ?? base?.task ?? '',
    agent: values.agent ?? base?.agent ?? defaults.agent,
    ...(values['custom-command'] ? { customCommand: values['custom-command'] } : base?.customCommand ? { customCommand: base.customCommand } : {}),
    provider,
    model,
    approval: values['approve-commands'] ? 'ask' : (base?.approval ?? 'auto'),
    isolation: values.isolation ?? base?.isolation ?? defaults.isolation,
    network: values.network ?? base?.network ?? defaults.network,
    ...(values.allow?.length ? { allowlist: values.allow } : base?.allowlist ? { allowlist: base.allowlist } : {}),
    ...(values.rule?.length ? { egressRules: values.rule } : base?.egressRules ? { egressRules: base.egressRules } : {}),
    ...(values.secret?.length ? { secrets: values.secret } : base?.secrets ? { secrets: base.secrets } : {}),
    ...(values['no-mcp'] ? {} : values.mcp?.length ? { mcpServers: values.mcp } : base?.mcpServers ? { mcpServers: base.mcpServers } : projectMcp.length ? { mcpServers: projectMcp } : {}),
    ...(values['internal-host']?.length ? { internalHosts: values['internal-host'] } : base?.internalHosts ? { internalHosts: base.internalHosts } : {}),
    networkApprovals: flags.networkApprovals,
    ...((gitHistory ?? base?.gitHistory) !== undefined ? { gitHistory: gitHistory ?? base?.gitHistory } : {}),
    ...((values.environment ?? base?.environment) ? { environment: values.environment ?? base?.environment } : {}),
    ...(values['allow-local-env']?.length ? { allowLocalEnv: values['allow-local-env'] } : base?.allowLocalEnv ? { allowLocalEnv: base.allowLocalEnv } : {}),
    ...(values['trust-environment'] ? { trustEnvironment: true } : {}),
    ...(values['setup-allow']?.length ? { setupAllowlist: values['setup-allow'] } : {}),
    ...(values.check ? { check: { command: values.check, ...(checkTimeoutSec ? { timeoutSec: checkTimeoutSec } : {}) } } : {}),
    limits: {
      timeoutSec: flags.timeoutSec ?? base?.limits?.timeoutSec ?? defaults.timeoutSec,
      ...(tokens ? { budgetTokens: tokens } : {}),
      ...(usd ? { budgetUsd: usd } : {}),
    },
  });
}

/** `--continue`: the next turn of the parent's thread; its agent, provider, model and policies stay unless given here. */
async function continueRun(flags: RunFlags, parent: RunRecord, services: RunServices, io: CliIo): Promise<RunSummary> {
  const { values, fromCheckpoint, timeoutSec, budgetTokens, budgetUsd, json } = flags;
  const started = await services.runs.continue({
    runId: parent.id,
    task: values.task ?? '',
    ...(fromCheckpoint !== undefined ? { checkpoint: fromCheckpoint } : {}),
    ...(values.agent ? { agent: AgentKind.parse(values.agent) } : {}),
    ...(values['custom-command'] ? { customCommand: values['custom-command'] } : {}),
    ...(values.provider ? { provider: values.provider } : {}),
    ...(values.model ? { model: values.model } : {}),
    ...(values['approve-commands'] ? { approval: 'ask' as const } : {}),
    networkApprovals: flags.networkApprovals,
    ...(timeoutSec || budgetTokens || budgetUsd ? { limits: { timeoutSec: timeoutSec ?? parent.limits.timeoutSec, ...(budgetTokens ? { budgetTokens } : {}), ...(budgetUsd ? { budgetUsd } : {}) } } : {}),
  });
  if (!json) io.stdout.write(`continuing ${parent.id}${fromCheckpoint !== undefined ? ` from checkpoint ${fromCheckpoint}` : ''}: turn ${started.thread?.turn ?? 2} of thread ${started.thread?.rootRunId ?? parent.id}\n`);
  if (started.thread?.conversation === 'fresh') {
    const why = freshConversationReason(parent, started);
    if (json) io.stdout.write(`${JSON.stringify({ type: 'note', message: why })}\n`);
    else io.stderr.write(`note: ${why}; the sandbox still starts from the previous result\n`);
  }
  return started;
}

/**
 * Once the sandbox runs: says which of the devcontainer's forwardPorts were not published (they are
 * offered, never published unasked, docs/architecture.md §16), and publishes `--publish` ports.
 */
function offerAndPublishPorts(flags: RunFlags, runId: string, core: AirlockCore, services: RunServices, io: CliIo): Array<{ dispose(): void }> {
  const { publish, json } = flags;
  const offer = services.runs.onDidChangeStatus((s) => {
    if (s.id !== runId || s.status !== 'running') return;
    offer.dispose();
    const offered = (s.forwardPorts ?? []).filter((p) => !publish.includes(p));
    if (offered.length && !json) io.stderr.write(`note: the devcontainer forwards port(s) ${offered.join(', ')}; publish them on this machine's loopback with ${offered.map((p) => `--publish ${p}`).join(' ')}\n`);
  });
  if (!publish.length) return [offer];
  // Ports are published once the sandbox exists; the server inside may start later.
  const sub = services.runs.onDidChangeStatus((s) => {
    if (s.id !== runId || s.status !== 'running') return;
    sub.dispose();
    for (const port of publish) {
      core.runs.publishPort(runId, port).then(
        (p) => (json ? io.stdout.write(`${JSON.stringify({ type: 'port_published', ...p })}\n`) : io.stdout.write(`preview: sandbox port ${port} → ${p.url}\n`)),
        (err: unknown) => io.stderr.write(`could not publish port ${port}: ${(err as Error).message}\n`),
      );
    }
  });
  return [offer, sub];
}

/** Waits for the run to end, answering its questions from stdin when someone can, and cancelling it on Ctrl-C. */
async function followRun(flags: RunFlags, { base, parent, projectMcp }: RunBasis, started: RunSummary, core: AirlockCore, services: RunServices, io: CliIo): Promise<StoredRun> {
  const runId = started.id;
  // Ctrl-C cancels the run (the sandbox is still wiped); a second one leaves at once.
  let interrupts = 0;
  const onSigint = () => {
    if (++interrupts > 1) process.exit(ExitCode.runNotDone);
    io.stderr.write('\ncancelling — wiping the sandbox (Ctrl-C again to leave now)\n');
    void services.runs.cancel({ runId });
  };
  process.on('SIGINT', onSigint);
  // Command approvals (mode ask), and network questions while an intercepted request waits.
  // MCP calls that ask wait for an answer here too (the same `--network-approvals` mode, §20).
  const hasMcp = Boolean(flags.values.mcp?.length || base?.mcpServers?.length || parent?.mcpServers?.length || projectMcp.length);
  const approvals = started.approval === 'ask' || ((started.network === 'allowlist' || hasMcp) && flags.networkApprovals === 'ask') ? answerApprovals(io, runId, services, flags.json) : undefined;
  const final = await core.runs.wait(runId);
  process.off('SIGINT', onSigint);
  approvals?.close();
  return final;
}

/** The run as it ended and the files it changed, through the view. */
async function showFinished(view: RunView, runId: string, services: RunServices): Promise<void> {
  const summary = await services.runs.get({ runId });
  const files = (await services.diffs.list({ runId })).files;
  view.finished(summary, files);
}

/** `--git-history none|N|all`: how much of the project's history the sandbox's repository holds. */
function gitHistoryOption(value: string | undefined): GitHistory | undefined {
  if (value === undefined || value === 'none' || value === 'all') return value;
  const n = Number(value);
  if (/^\d+$/.test(value) && n >= 1 && n <= 1_000_000) return n;
  throw new CliUsageError(`--git-history takes none, all or a number of commits from 1 to 1000000, not '${value.slice(0, 40)}'`);
}

/**
 * `--network-approvals`: whether a request the gateway's rules refuse (and an MCP call that asks, §20) waits for an answer here. The
 * default follows who can answer: `ask` at a terminal, `deny` otherwise — a script or CI job has no one
 * to answer, and holding the request for the full wait only delays the same 403 (docs/architecture.md §2.8).
 * `ask` without a terminal reads the answers from stdin (`o`/`p`/`d`, or `{"answer":"once"}` with --json).
 */
export function networkApprovalsOption(value: string | undefined, tty: boolean): 'ask' | 'deny' {
  if (value === undefined) return tty ? 'ask' : 'deny';
  if (value === 'ask' || value === 'deny') return value;
  throw new CliUsageError(`--network-approvals is ask or deny, not "${value}": ask holds a refused request for your answer, deny refuses it at once.`);
}
