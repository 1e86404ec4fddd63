import { createInterface } from 'node:readline';
import { COMMAND_HELP } from '../command-help';
import type { McpAnswer, McpApprovalEvent, NetworkAnswer, RunEvent, RunSummary } from '../../../contracts';
import { ERROR_ACTION_CLI, describeError } from '../../../contracts/error-help';
import { connectionsRefusedText } from '../../../contracts/format';
import { AirlockError } from '../../../contracts/errors';
import { runAgainInput } from '../../../contracts/run-again';
import { defaultModelFor, newRunDefaults } from '../../../contracts/run-defaults';
import { AgentKind, StartRunInput, type GitHistory } from '../../../contracts/runs';
import { freshConversationReason } from '../../runs/run-thread';
import { getAgentAdapter } from '../../agents';
import { createAirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import { environmentLine, environmentLines, isFinal, printChangedFiles, setupLine, usageLine } from '../run-format';
import { CliUsageError, numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { parseAttempts, runAttemptGroup } from './run-attempts';
import { safeTerminalText as safe, TerminalSafeText } from '../terminal-safe';
import { debugLog } from '../../common/debug-log';

/**
 * `airlock run`: one task in a fresh sandbox, with live progress (phase, commands and their output,
 * files changed, tokens) or, with `--json`, one JSON event per line and a final summary line.
 */
export const runCommand: CliCommand = {
  name: 'run',
  summary: COMMAND_HELP.run.summary,
  usage: COMMAND_HELP.run.usage,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, {
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
    });
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

    const core = await createAirlockCore({ env: io.env, ...(io.app ? { app: io.app } : {}), ...(io.egressProxyForTests ? { egressProxyForTests: io.egressProxyForTests } : {}) });
    const services = servicesFor(core);
    try {
      const settings = await core.settings.get();
      const defaults = newRunDefaults(settings);
      const parent = parentId ? await services.runs.get({ runId: parentId }) : undefined;
      // `--again`: the past run's settings, under whatever flags were given (contracts/run-again.ts).
      const base = again ? runAgainInput(await services.runs.get({ runId: again })) : undefined;
      const provider = values.provider ?? parent?.provider ?? base?.provider ?? defaults.provider ?? 'anthropic';
      const config = await core.catalog.get(provider);
      if (values['key-env']) core.vault.useEnvKey(provider, values['key-env'], io.env);
      // A new run that names no MCP servers gets the ones the user enabled for the project (§20), and says which.
      const projectMcp = !values.mcp?.length && !values['no-mcp'] && !again && !parent && projectDir && getAgentAdapter(values.agent ?? defaults.agent).supportsMcp
        ? (await services.mcpServers.projectServers({ projectDir })).servers
        : [];
      if (projectMcp.length) {
        const note = `MCP servers enabled for this project: ${projectMcp.join(', ')} (--mcp NAME picks others, --no-mcp none)`;
        if (values.json) io.stdout.write(`${JSON.stringify({ type: 'note', message: note })}\n`);
        else io.stderr.write(`note: ${safe(note)}\n`);
      }
      const startInput = () => {
        const model = values.model ?? (provider === base?.provider ? base.model : undefined) ?? defaultModelFor(settings, config);
        if (!model) throw new AirlockError('INVALID_INPUT', `provider ${provider} lists no models; pass --model`);
        const tokens = budgetTokens ?? base?.limits?.budgetTokens;
        const usd = budgetUsd ?? base?.limits?.budgetUsd;
        return StartRunInput.parse({
          projectDir: projectDir ?? base?.projectDir,
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
          networkApprovals,
          ...((gitHistory ?? base?.gitHistory) !== undefined ? { gitHistory: gitHistory ?? base?.gitHistory } : {}),
          ...((values.environment ?? base?.environment) ? { environment: values.environment ?? base?.environment } : {}),
          ...(values['allow-local-env']?.length ? { allowLocalEnv: values['allow-local-env'] } : base?.allowLocalEnv ? { allowLocalEnv: base.allowLocalEnv } : {}),
          ...(values['trust-environment'] ? { trustEnvironment: true } : {}),
          ...(values['setup-allow']?.length ? { setupAllowlist: values['setup-allow'] } : {}),
          ...(values.check ? { check: { command: values.check, ...(checkTimeoutSec ? { timeoutSec: checkTimeoutSec } : {}) } } : {}),
          limits: {
            timeoutSec: timeoutSec ?? base?.limits?.timeoutSec ?? defaults.timeoutSec,
            ...(tokens ? { budgetTokens: tokens } : {}),
            ...(usd ? { budgetUsd: usd } : {}),
          },
        });
      };
      const json = values.json === true;
      if (values.attempts) {
        const groupRun = startInput();
        const specs = await parseAttempts(values.attempts, groupRun, core, settings);
        return await runAttemptGroup(io, services, core, groupRun, specs, json);
      }
      const view = json ? jsonView(io) : liveView(io);
      const subs = [
        services.runs.onDidEvent((e) => view.event(e)),
        services.runs.onDidChangeStatus((s) => view.status(s)),
      ];
      let started: RunSummary;
      if (parent) {
        // The parent's agent, provider, model and policies stay unless given here.
        started = await services.runs.continue({
          runId: parent.id,
          task: values.task ?? '',
          ...(fromCheckpoint !== undefined ? { checkpoint: fromCheckpoint } : {}),
          ...(values.agent ? { agent: AgentKind.parse(values.agent) } : {}),
          ...(values['custom-command'] ? { customCommand: values['custom-command'] } : {}),
          ...(values.provider ? { provider: values.provider } : {}),
          ...(values.model ? { model: values.model } : {}),
          ...(values['approve-commands'] ? { approval: 'ask' as const } : {}),
          networkApprovals,
          ...(timeoutSec || budgetTokens || budgetUsd ? { limits: { timeoutSec: timeoutSec ?? parent.limits.timeoutSec, ...(budgetTokens ? { budgetTokens } : {}), ...(budgetUsd ? { budgetUsd } : {}) } } : {}),
        });
        if (!json) io.stdout.write(`continuing ${parent.id}${fromCheckpoint !== undefined ? ` from checkpoint ${fromCheckpoint}` : ''}: turn ${started.thread?.turn ?? 2} of thread ${started.thread?.rootRunId ?? parent.id}\n`);
        if (started.thread?.conversation === 'fresh') {
          const why = freshConversationReason(parent, started);
          if (json) io.stdout.write(`${JSON.stringify({ type: 'note', message: why })}\n`);
          else io.stderr.write(`note: ${why}; the sandbox still starts from the previous result\n`);
        }
      } else {
        started = await startTrusting(io, json, (trust) => services.runs.start({ ...startInput(), ...(trust ? { trustEnvironment: true } : {}) }));
      }
      const runId = started.id;
      view.started(started);
      // The devcontainer's forwardPorts are offered, never published unasked (docs/architecture.md §16).
      const offer = services.runs.onDidChangeStatus((s) => {
        if (s.id !== runId || s.status !== 'running') return;
        offer.dispose();
        const offered = (s.forwardPorts ?? []).filter((p) => !publish.includes(p));
        if (offered.length && !json) io.stderr.write(`note: the devcontainer forwards port(s) ${offered.join(', ')}; publish them on this machine's loopback with ${offered.map((p) => `--publish ${p}`).join(' ')}\n`);
      });
      subs.push(offer);
      if (publish.length) {
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
        subs.push(sub);
      }

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
      const hasMcp = Boolean(values.mcp?.length || base?.mcpServers?.length || parent?.mcpServers?.length || projectMcp.length);
      const approvals = started.approval === 'ask' || ((started.network === 'allowlist' || hasMcp) && networkApprovals === 'ask') ? answerApprovals(io, runId, services, json) : undefined;
      const final = await core.runs.wait(runId);
      process.off('SIGINT', onSigint);
      approvals?.close();
      for (const s of subs) s.dispose();

      const summary = (await services.runs.get({ runId }));
      const files = (await services.diffs.list({ runId })).files;
      view.finished(summary, files);
      return final.status === 'done' ? ExitCode.ok : ExitCode.runNotDone;
    } finally {
      await services.dispose();
    }
  },
};

/** `--git-history none|N|all`: how much of the project's history the sandbox's repository holds. */
function gitHistoryOption(value: string | undefined): GitHistory | undefined {
  if (value === undefined || value === 'none' || value === 'all') return value;
  const n = Number(value);
  if (/^\d+$/.test(value) && n >= 1 && n <= 1_000_000) return n;
  throw new CliUsageError(`--git-history takes none, all or a number of commits from 1 to 1000000, not '${value.slice(0, 40)}'`);
}

interface RunView {
  started(s: RunSummary): void;
  status(s: RunSummary): void;
  event(e: RunEvent): void;
  finished(run: Awaited<ReturnType<ReturnType<typeof servicesFor>['runs']['get']>>, files: Awaited<ReturnType<ReturnType<typeof servicesFor>['diffs']['list']>>['files']): void;
}

function jsonView(io: CliIo): RunView {
  const line = (o: unknown) => io.stdout.write(`${JSON.stringify(o)}\n`);
  return {
    started: (s) => line({ type: 'run_started', runId: s.id }),
    status: () => undefined, // status transitions are in the event stream already
    event: (e) => line(e),
    finished: (run, files) =>
      line({
        type: 'summary',
        runId: run.id,
        status: run.status,
        changedFiles: files.map((f) => ({ path: f.path, status: f.status, ...(f.risky ? { risky: f.risky } : {}) })),
        patchPath: run.patchPath ?? null,
        usage: run.usage,
        ...(run.error ? { error: run.error } : {}),
        ...(run.thread ? { thread: run.thread } : {}),
        wipe: run.wipe ?? null,
        ...(run.environment?.prepared ? { prepared: run.environment.prepared } : {}),
      }),
  };
}

export function liveView(io: CliIo): RunView {
  const out = io.stdout;
  // The model's and the sandbox's bytes reach the terminal as text only (terminal-safe.ts): one
  // filter per stream, so a sequence split across events is judged whole.
  const modelText = new TerminalSafeText();
  const commandText = new TerminalSafeText();
  let lastPhase = '';
  let textOpen = false;
  const endText = () => {
    if (textOpen) out.write('\n');
    textOpen = false;
  };
  return {
    started: (s) => out.write(`run ${s.id}: ${s.agent} with ${s.provider}/${s.model} on ${s.projectDir}\n`),
    status: (s) => {
      const phase = `${s.status}${s.phase ? ` — ${s.phase}` : ''}`;
      if (phase !== lastPhase && !isFinal(s.status)) {
        endText();
        out.write(`· ${phase}\n`);
        lastPhase = phase;
      }
    },
    event: ({ event }) => {
      switch (event.type) {
        case 'assistant_text':
          out.write(modelText.push(event.delta));
          textOpen = !event.delta.endsWith('\n');
          break;
        case 'command_started':
          endText();
          out.write(`$ ${safe(event.command)}\n`);
          break;
        case 'command_output':
          out.write(commandText.push(event.data));
          break;
        case 'command_exited':
          if (event.exitCode !== 0) out.write(`[exit ${event.exitCode ?? 'killed'}${event.timedOut ? ', timed out' : ''}]\n`);
          break;
        case 'environment':
          endText();
          for (const l of environmentLines(event)) out.write(`${l}\n`);
          break;
        case 'setup': {
          const line = setupLine(event);
          if (line === undefined) break;
          if (event.phase === 'output') out.write(line);
          else {
            endText();
            out.write(`${line}\n`);
          }
          break;
        }
        case 'file_changed':
          endText();
          out.write(`~ changed: ${safe(event.paths.slice(0, 5).join(', '))}${event.paths.length > 5 ? ` (+${event.paths.length - 5})` : ''}\n`);
          break;
        case 'approval_request':
          endText();
          out.write(`? the agent wants to run: ${safe(event.command)}\n  approve? [y/N] `);
          break;
        case 'agent_error':
          endText();
          out.write(`! ${safe(event.message)}\n`);
          break;
        case 'network_blocked':
          endText();
          out.write(
            event.rule
              ? `! network: refused ${event.method} ${event.host}${event.path ?? ''} (${event.reason ?? 'refused'}; rule: ${event.rule})\n`
              : // A reason that names its own flag (--internal-host) says how; otherwise the allowlist is what refused.
                `! network: blocked ${event.method} ${event.host}:${event.port}${event.reason ? ` (${event.reason})` : ''}${event.reason?.includes('--internal-host') ? '' : `; allow it with --allow ${event.host}`}\n`,
          );
          break;
        case 'network_approval':
          endText();
          out.write(
            event.kind === 'proposal'
              ? `? the agent proposes the network rule: ${event.rule}\n  its reason (the agent's words): "${safe(event.reason ?? '')}"\n  ${answerPrompt(NETWORK_KEYS, event.answers)} `
              : `? ${event.method} ${event.host}${event.path} is waiting (refused by ${event.deniedBy ?? 'a rule'})${event.rule ? `\n  "for this project" adds: ${event.rule}` : ''}\n  ${answerPrompt(NETWORK_KEYS, event.answers)} `,
          );
          break;
        case 'connections_refused':
          endText();
          out.write(`! ${connectionsRefusedText(event.service, event.limit, event.refused, event.ended)}\n`);
          break;
        case 'network_approval_resolved':
          if (event.by !== 'user') out.write(`\n! network question ${event.by === 'timeout' ? 'timed out: denied' : 'closed'}\n`);
          break;
        case 'mcp_approval':
          endText();
          out.write(`${mcpQuestionText(event)}\n  ${answerPrompt(MCP_KEYS, event.answers)} `);
          break;
        case 'mcp_approval_resolved':
          if (event.by !== 'user') out.write(`\n! MCP question ${event.by === 'timeout' ? 'timed out: denied' : 'closed'}\n`);
          break;
        case 'mcp_call':
          if (event.decision === 'deny') {
            endText();
            out.write(`! MCP: refused ${event.server}/${safe(event.tool)}: ${safe(event.reason ?? 'denied')}\n`);
          }
          break;
        case 'finished':
          endText();
          out.write(`\n${safe(event.summary)}\n`);
          break;
        default:
          break;
      }
    },
    finished: (run, files) => {
      endText();
      out.write(`\n${run.status.toUpperCase()} ${run.id}${run.error ? `: ${describeError(run.error).title}: ${run.error.message}` : ''}\n${run.error ? describeError(run.error).actions.map((a) => `  → ${ERROR_ACTION_CLI[a].replace('<provider>', run.provider)}\n`).join('') : ''}`);
      printChangedFiles(out, files);
      out.write(`${usageLine(run.usage)}\n`);
      const envLine = environmentLine(run.environment);
      if (envLine) out.write(`${envLine}\n`);
      if (run.patchPath) out.write(`patch: ${run.patchPath}\napply: airlock apply ${run.id}   review: airlock show ${run.id}${run.thread ? '   (this turn; --thread for the whole thread)' : ''}\n`);
      if (run.status !== 'cancelled' && run.patchPath) out.write(`follow up: airlock run --continue ${run.id} --task "…"\n`);
      if (run.wipe) out.write(`sandbox wiped: ${run.wipe.verified ? 'verified gone' : `LEFTOVERS ${run.wipe.leftovers.join(', ')}`}${run.wipe.pooledAs ? ` (run ${run.id}'s sandbox, started in the warm pool as ${run.wipe.pooledAs})` : ''}\n`);
    },
  };
}

/**
 * Answers approval requests from stdin: each line (`y`/`n` on a TTY prompt, or
 * `{"approved":true}` with --json) answers the oldest open request. No answer means no run.
 */
/**
 * Starts a run; when the project's devcontainer is not accepted yet (building it runs the project's
 * code, docs/architecture.md §16) and a person is at the terminal, shows why and asks once.
 */
async function startTrusting(io: CliIo, json: boolean, start: (trust: boolean) => Promise<RunSummary>): Promise<RunSummary> {
  try {
    return await start(false);
  } catch (err) {
    if (!(err instanceof AirlockError && err.kind === 'FORBIDDEN' && err.field === 'environment') || json || !io.stdin.isTTY) throw err;
    io.stderr.write(`${err.message}\nBuild and run this environment? [y/N] `);
    const rl = createInterface({ input: io.stdin, terminal: false });
    const answer = await new Promise<string>((resolve) => {
      rl.once('line', resolve);
      rl.once('close', () => resolve(''));
    });
    rl.close();
    if (!/^y(es)?$/i.test(answer.trim())) throw err;
    return start(true);
  }
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

const NETWORK_KEYS: Record<NetworkAnswer, string> = { once: '[o]nce', run: '[r]un', project: '[p]roject', deny: '[d]eny' };

/** `allow? [o]nce / [p]roject / [d]eny` for the answers offered, each named by `keys`. */
function answerPrompt<A extends string>(keys: Record<A, string>, answers: readonly A[]): string {
  return `allow? ${answers.map((a) => keys[a]).join(' / ')} (no answer: deny)`;
}

/**
 * A line answering a network or MCP question: a word (`once`) or its first letter, or `{"answer":"once"}`
 * with --json; anything not offered denies.
 */
export function parseChoice<A extends string>(line: string, offered: readonly A[], json: boolean): A | 'deny' {
  let word = line.trim().toLowerCase();
  if (json && word.startsWith('{')) {
    try {
      word = String((JSON.parse(line) as { answer?: unknown }).answer ?? '');
    } catch {
      word = '';
    }
  }
  return offered.find((a) => a === word || (word.length === 1 && a.startsWith(word))) ?? 'deny';
}

/** What a waiting MCP call shows: the tool, why it asks, and the agent's arguments (or the server's new description) marked as theirs. */
export function mcpQuestionText(q: McpApprovalEvent): string {
  const head = `? MCP ${q.server}/${safe(q.tool)} wants to run`;
  const why = q.why === 'changed' ? `\n  its description CHANGED since you enabled ${q.server}; now (the server's words): "${safe(q.description ?? '')}"` : q.why === 'new' ? `\n  it was not pinned when you enabled ${q.server}; its description (the server's words): "${safe(q.description ?? '')}"` : '';
  return `${head}${why}\n  arguments (the agent's): ${safe(q.args)}`;
}

const MCP_KEYS: Record<McpAnswer, string> = { once: '[o]nce', run: '[r]un (this tool, this run)', deny: '[d]eny' };

export function answerApprovals(io: CliIo, runId: string, services: Pick<ReturnType<typeof servicesFor>, 'runs'>, json: boolean): { close(): void } {
  const rl = createInterface({ input: io.stdin, terminal: false });
  const waiting: Array<{ kind: 'command'; id: string } | { kind: 'network'; id: string; answers: NetworkAnswer[] } | { kind: 'mcp'; id: string; answers: McpAnswer[] }> = [];
  const answers: string[] = [];
  const settle = () => {
    while (waiting.length && answers.length) {
      const q = waiting.shift() as (typeof waiting)[number];
      const line = answers.shift() as string;
      if (q.kind === 'network') void services.runs.answerNetwork({ runId, id: q.id, answer: parseChoice(line, q.answers, json) }).catch(debugLog.swallow('cli.run.answerNetwork'));
      else if (q.kind === 'mcp') void services.runs.answerMcp({ runId, id: q.id, answer: parseChoice(line, q.answers, json) }).catch(debugLog.swallow('cli.run.answerMcp'));
      else void services.runs.approve({ runId, requestId: q.id, approved: parseAnswer(line, json) }).catch(debugLog.swallow('cli.run.approve'));
    }
  };
  const sub = services.runs.onDidEvent((e) => {
    if (e.runId !== runId) return;
    if (e.event.type === 'approval_request') waiting.push({ kind: 'command', id: e.event.id });
    else if (e.event.type === 'network_approval') waiting.push({ kind: 'network', id: e.event.id, answers: e.event.answers });
    else if (e.event.type === 'mcp_approval') waiting.push({ kind: 'mcp', id: e.event.id, answers: e.event.answers });
    else if (e.event.type === 'network_approval_resolved' || e.event.type === 'mcp_approval_resolved') {
      // Timed out or answered elsewhere: the next line answers the next question, not this one.
      const id = e.event.id;
      const at = waiting.findIndex((w) => w.id === id);
      if (at >= 0) waiting.splice(at, 1);
    } else return;
    settle();
  });
  rl.on('line', (line) => {
    answers.push(line);
    settle();
  });
  return {
    close() {
      sub.dispose();
      rl.close();
    },
  };
}

function parseAnswer(line: string, json: boolean): boolean {
  if (json && line.trim().startsWith('{')) {
    try {
      return (JSON.parse(line) as { approved?: unknown }).approved === true;
    } catch {
      return false;
    }
  }
  return /^\s*y(es)?\s*$/i.test(line);
}
