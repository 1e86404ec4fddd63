import { stat } from 'node:fs/promises';
import { COMMAND_HELP } from '../command-help';
import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import type { ChangedFile } from '../../../contracts/diffs';
import { createAirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import type { StoredRun } from '../../runs/run-record';
import { CliUsageError, numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { debugLog } from '../../common/debug-log';

interface ExecArgs {
  projectDir: string;
  argv: string[];
  image?: string;
  timeoutSec?: number;
  include: string[];
  exclude: string[];
  patchFile?: string;
  showDiff: boolean;
}

function parseExec(args: string[]): ExecArgs {
  // Everything after `--` is the command, options included: it is split off before parsing.
  const dash = args.indexOf('--');
  const { values, positionals } = parseCliArgs(dash < 0 ? args : args.slice(0, dash), {
    image: { type: 'string' },
    timeout: { type: 'string' },
    include: { type: 'string', multiple: true },
    exclude: { type: 'string', multiple: true },
    patch: { type: 'string' },
    'no-diff': { type: 'boolean' },
  });
  const [projectDir] = positionalsExactly(positionals, '<projectDir>');
  if (dash < 0 || dash === args.length - 1) throw new CliUsageError("give the command after '--'");
  const timeoutSec = numberOption(values.timeout, 'timeout', { min: 0.001 });
  return {
    projectDir,
    argv: args.slice(dash + 1),
    include: values.include ?? [],
    exclude: values.exclude ?? [],
    showDiff: values['no-diff'] !== true,
    ...(values.image ? { image: values.image } : {}),
    ...(timeoutSec !== undefined ? { timeoutSec } : {}),
    ...(values.patch ? { patchFile: values.patch } : {}),
  };
}

function statusLetter(c: ChangedFile): string {
  return c.status === 'added' ? 'A' : c.status === 'deleted' ? 'D' : c.status === 'renamed' ? 'R' : 'M';
}

function describeChange(c: ChangedFile): string {
  const name = c.oldPath ? `${c.oldPath} → ${c.path}` : c.path;
  const parts: string[] = [];
  if (c.binary) parts.push('binary');
  else if (c.additions || c.deletions) parts.push(`+${c.additions} −${c.deletions}`);
  if (c.modeChange) parts.push(`mode ${c.modeChange}`);
  return `  ${statusLetter(c)} ${name}${parts.length ? `  (${parts.join(', ')})` : ''}`;
}

function describeProof(runId: string, wipe: NonNullable<StoredRun['wipe']>): string {
  const state = wipe.leftovers.length ? `LEFTOVERS: ${wipe.leftovers.join(', ')}` : 'verified: nothing labelled with the run remains';
  return `wiped run ${runId}: removed ${wipe.removed.length} resource(s) in ${Math.round(wipe.durationMs ?? 0)} ms; ${state}`;
}

/** An argv as one `bash -c` command line, each word quoted when it needs it. */
export function shellLine(argv: readonly string[]): string {
  return argv.map((a) => (/^[\w./:=@+,-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}

/**
 * One command in a fresh sandbox, as a recorded session of the run service (docs/architecture.md
 * §17): the same snapshot, hydrate, host-run command, host-derived collect, audit and wipe as a run
 * or an MCP sandbox. Nothing the sandbox says about its own changes is read back: the change list
 * and the patch are derived on the host (§11), and applied only with `airlock apply --reviewed`.
 */
async function execInSandbox(args: ExecArgs, io: CliIo): Promise<number> {
  const say = (line: string) => io.stderr.write(`airlock: ${line}\n`);
  const projectDir = path.resolve(args.projectDir);
  if (!(await stat(projectDir).then((st) => st.isDirectory(), () => false))) throw new AirlockError('NOT_FOUND', `${projectDir} is not a folder; pass the project folder to copy into the sandbox.`);
  const core = await createAirlockCore({ env: io.env, ...(io.app ? { app: io.app } : {}) });
  const services = servicesFor(core, undefined, { asksForMcp: false });
  const stop = new AbortController();
  const onSigint = () => {
    say('interrupted: stopping the command and wiping the sandbox');
    stop.abort();
  };
  process.once('SIGINT', onSigint);
  let runId: string | undefined;
  try {
    const line = shellLine(args.argv);
    say(`starting a sandbox on a copy of ${projectDir}`);
    const record = await core.runs.startSession({
      projectDir,
      client: 'airlock sandbox exec',
      isolation: 'container',
      network: 'none',
      // The session outlives the command by the time a collect and a wipe take.
      timeoutSec: Math.ceil((args.timeoutSec ?? 24 * 3600) + 600),
      ...(args.image ? { environment: `image:${args.image}` } : { environment: 'airlock' }),
      ...(args.include.length || args.exclude.length ? { snapshot: { include: args.include, exclude: args.exclude } } : {}),
    });
    runId = record.id;
    say(`sandbox ready (run ${record.id}, no network)`);
    const notable = record.excludedFiles;
    if (notable.length) {
      say(`left on the host (${notable.length}):`);
      for (const e of notable) io.stderr.write(`  - ${e.path}: ${e.reason}\n`);
    }
    if (stop.signal.aborted) return ExitCode.runNotDone;
    say(`$ ${line}`);
    const result = await core.runs.execInSession(record.id, { command: `exec ${line}`, cwd: '/workspace', timeoutSec: args.timeoutSec ?? 24 * 3600, capBytes: 1024 * 1024, signal: stop.signal }, (stream, bytes) => (stream === 'stdout' ? io.stdout : io.stderr).write(bytes));
    if (result.failure) throw new AirlockError('SANDBOX_FAILED', `The command could not run: ${result.failure}.`);
    const code = result.timedOut ? 124 : (result.exitCode ?? 128 + 9);
    say(`command ${result.timedOut ? `timed out after ${args.timeoutSec} s` : `exited with ${result.exitCode ?? 'a signal'}`} (${Math.round(result.durationMs)} ms)`);

    // Collected on the host at the end of the session, like a run's result; then wiped and checked gone.
    const ended = await core.runs.endSession(record.id, 'the command ended');
    runId = undefined;
    const listed = await services.diffs.list({ runId: record.id });
    if (!listed.files.length) {
      say('no files changed');
    } else {
      say(`${listed.files.length} file(s) changed:`);
      for (const c of listed.files) io.stderr.write(`${describeChange(c)}\n`);
      for (const c of listed.files) if (c.risky) say(`review: ${c.path} — ${c.risky}`);
      const preview = await services.diffs.preview({ runId: record.id });
      if (args.patchFile) {
        const written = await services.diffs.exportPatch({ runId: record.id, destPath: path.resolve(args.patchFile) });
        say(`patch written to ${written.path}`);
      }
      if (args.showDiff) io.stdout.write(preview.text ?? `(patch too large to print; see airlock show ${record.id} --diff)\n`);
      say(`result sha256: ${preview.sha256}  (after reviewing: airlock apply ${record.id} --reviewed ${preview.sha256})`);
    }
    if (ended.wipe) say(describeProof(record.id, ended.wipe));
    return stop.signal.aborted ? ExitCode.runNotDone : code;
  } finally {
    process.off('SIGINT', onSigint);
    // Interrupted or failed mid-way: the session still ends, collected and wiped.
    if (runId) {
      const ended = await core.runs.endSession(runId, 'airlock sandbox exec stopped').catch(debugLog.swallow('cli.sandbox.endSession'));
      if (ended?.wipe) say(describeProof(runId, ended.wipe));
    }
    await services.dispose();
  }
}

/**
 * `airlock sandbox exec <projectDir> -- <cmd…>`: one command in a fresh hardened sandbox on a copy of
 * the project, as a recorded session (History, audit); streams its output, prints the changed files
 * and the diff derived on the host, wipes the sandbox (with proof), prints the digest to apply by
 * and exits with the command's exit code. The project folder is only read.
 */
export const sandboxCommand: CliCommand = {
  name: 'sandbox',
  summary: COMMAND_HELP.sandbox.summary,
  usage: COMMAND_HELP.sandbox.usage,
  async run(args: string[], io: CliIo): Promise<number> {
    const [sub, ...rest] = args;
    if (sub !== 'exec') {
      if (sub?.startsWith('-')) parseExec(args); // an unknown option is named as such
      throw new CliUsageError(sub ? `unknown subcommand '${sub.slice(0, 40)}'` : 'name a subcommand');
    }
    return execInSandbox(parseExec(rest), io);
  },
};
