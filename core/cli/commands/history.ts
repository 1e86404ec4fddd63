import type { ApplyResult, ChangedFile, FileSelection } from '../../../contracts/diffs';
import { COMMAND_HELP } from '../command-help';
import { ERROR_ACTION_CLI, describeError } from '../../../contracts/error-help';
import { AirlockError } from '../../../contracts/errors';
import { parseSection } from '../../workspace/partial';
import { createAirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import type { AirlockServices } from '../../api/services';
import { environmentLine, printChangedFiles, summaryRow, usageLine } from '../run-format';
import { numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';

export const checkpointsCommand: CliCommand = {
  name: 'checkpoints',
  summary: COMMAND_HELP.checkpoints.summary,
  usage: COMMAND_HELP.checkpoints.usage,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { json: { type: 'boolean' } });
    const [runId] = positionalsExactly(positionals, '<runId>');
    return withServices(io, async (s) => {
      const list = await s.diffs.checkpoints({ runId });
      if (values.json) {
        io.stdout.write(`${JSON.stringify({ runId, ...list })}\n`);
        return ExitCode.ok;
      }
      if (!list.checkpoints.length) {
        io.stdout.write(`run ${runId} has no checkpoints (no turn changed files, or the run is from an Airlock without them)\n`);
        return ExitCode.ok;
      }
      for (const c of list.checkpoints) {
        const when = c.final ? 'the result' : `after turn ${(c.request ?? 1) - 1} (model request ${c.request ?? '?'})`;
        io.stdout.write(`${String(c.n).padStart(3)}  ${when.padEnd(26)} ${files(c.files).padEnd(9)} +${c.additions} -${c.deletions}  ${c.conversation ? 'conversation kept  ' : ''}sha256 ${c.patchSha256}\n`);
      }
      if (list.limited) io.stdout.write(`later turns have no checkpoint of their own: the ${list.limited.reason} bound was reached at model request ${list.limited.atRequest} (the result is whole)\n`);
      io.stdout.write(`review: airlock show ${runId} --checkpoint N --diff; apply: airlock apply ${runId} --checkpoint N --reviewed SHA256; continue: airlock run --continue ${runId} --checkpoint N --task "…"\n`);
      return ExitCode.ok;
    });
  },
};

/** Runs `fn` with the real services (no crash recovery: history commands only read and apply). */
async function withServices<T>(io: CliIo, fn: (s: AirlockServices) => Promise<T>): Promise<T> {
  const services = servicesFor(await createAirlockCore({ env: io.env, ...(io.app ? { app: io.app } : {}), recover: false }));
  try {
    return await fn(services);
  } finally {
    await services.dispose();
  }
}

/** Comma-separated and repeated `--files` values as one list. */
function fileList(values: string[] | undefined): string[] | undefined {
  return values?.flatMap((f) => f.split(',')).filter(Boolean);
}

/**
 * `--hunks PATH:1,3` and `--lines PATH:-3,+4` (repeatable; the last `:` splits, so a path may
 * hold one) as the contract's selection: per path, hunk indexes and line ids. Hunks are numbered
 * from 1 for people (as `show --hunks` and the review screen print them); the contract's are 0-based.
 */
export function selectionOf(hunks: string[] | undefined, lines: string[] | undefined): FileSelection[] | undefined {
  const byPath = new Map<string, FileSelection>();
  const add = (arg: string, option: 'hunks' | 'lines') => {
    const at = arg.lastIndexOf(':');
    const file = arg.slice(0, at);
    const items = arg.slice(at + 1).split(',').filter(Boolean);
    if (at <= 0 || !items.length) throw new AirlockError('INVALID_INPUT', `--${option} takes PATH:${option === 'hunks' ? '1,3' : '-3,+4'} (got '${arg}'); 'airlock show <runId> --hunks' numbers them.`, { field: option });
    const sel = byPath.get(file) ?? { path: file };
    if (option === 'hunks') {
      const bad = items.find((i) => !/^[1-9][0-9]*$/.test(i));
      if (bad !== undefined) throw new AirlockError('INVALID_INPUT', `--hunks ${arg}: '${bad}' is not a hunk number (1, 2, …, as 'airlock show <runId> --hunks' prints them).`, { field: option });
      sel.hunks = [...(sel.hunks ?? []), ...items.map((i) => Number(i) - 1)];
    } else {
      const bad = items.find((i) => !/^[+-][0-9]+$/.test(i));
      if (bad !== undefined) throw new AirlockError('INVALID_INPUT', `--lines ${arg}: '${bad}' is not a line id (-<old line> or +<new line>).`, { field: option });
      sel.lines = [...(sel.lines ?? []), ...items];
    }
    byPath.set(file, sel);
  };
  for (const h of hunks ?? []) add(h, 'hunks');
  for (const l of lines ?? []) add(l, 'lines');
  return byPath.size ? [...byPath.values()] : undefined;
}

/** `--files` plus the paths `--hunks`/`--lines` name (a picked file is a selected file). */
function selectedFiles(files: string[] | undefined, selection: FileSelection[] | undefined): string[] | undefined {
  if (!files?.length) return undefined;
  return [...new Set([...files, ...(selection ?? []).map((s) => s.path)])];
}

/** Each text file's hunks with their numbers and its changed lines with their ids, for `--hunks`/`--lines`. */
async function printHunks(out: NodeJS.WritableStream, s: AirlockServices, runId: string, files: ChangedFile[]): Promise<void> {
  for (const f of files) {
    const d = await s.diffs.file({ runId, path: f.path, context: 3 });
    out.write(`\n${f.path}${d.wholeFileOnly ? `  (whole file only: ${d.wholeFileOnly})` : ''}\n`);
    if (d.wholeFileOnly && !d.diff) continue;
    for (const [i, h] of parseSection(d.diff, f.path).hunks.entries()) {
      out.write(`  hunk ${i + 1}  ${h.header}\n`);
      for (const l of h.lines) out.write(l.id ? `    ${l.id.padEnd(7)}${l.kind}${l.text}\n` : '');
    }
  }
}

export const runsCommand: CliCommand = {
  name: 'runs',
  summary: COMMAND_HELP.runs.summary,
  usage: COMMAND_HELP.runs.usage,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { json: { type: 'boolean' }, limit: { type: 'string' } });
    positionalsExactly(positionals);
    const limit = numberOption(values.limit, 'limit', { integer: true, min: 1, max: 10_000 });
    return withServices(io, async (s) => {
      const runs = await s.runs.list({ ...(limit ? { limit } : {}) });
      if (values.json) io.stdout.write(`${JSON.stringify(runs)}\n`);
      else if (!runs.length) io.stdout.write("no runs yet — start one with 'airlock run <projectDir> --task \"…\"'\n");
      else for (const r of runs) io.stdout.write(`${summaryRow(r)}\n`);
      return ExitCode.ok;
    });
  },
};

export const showCommand: CliCommand = {
  name: 'show',
  summary: COMMAND_HELP.show.summary,
  usage: COMMAND_HELP.show.usage,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { json: { type: 'boolean' }, diff: { type: 'boolean' }, hunks: { type: 'boolean' }, thread: { type: 'boolean' }, checkpoint: { type: 'string' } });
    const [runId] = positionalsExactly(positionals, '<runId>');
    const scope = values.thread ? 'thread' : 'turn';
    const checkpoint = numberOption(values.checkpoint, 'checkpoint', { integer: true, min: 1 });
    const cp = checkpoint !== undefined ? { checkpoint } : {};
    const scopeFlag = `${values.thread ? ' --thread' : ''}${checkpoint !== undefined ? ` --checkpoint ${checkpoint}` : ''}`;
    return withServices(io, async (s) => {
      const run = await s.runs.get({ runId });
      const { files, patchSha256 } = await s.diffs.list({ runId, scope, ...cp });
      if (values.json) {
        io.stdout.write(`${JSON.stringify({ ...run, files, ...(patchSha256 ? { patchSha256 } : {}) })}\n`);
        return ExitCode.ok;
      }
      const out = io.stdout;
      out.write(`run ${run.id}  ${run.status}${run.error ? ` (${describeError(run.error).title}: ${run.error.message})` : ''}\n`);
      if (run.error) for (const a of describeError(run.error).actions) out.write(`  → ${ERROR_ACTION_CLI[a].replace('<provider>', run.provider)}\n`);
      out.write(`task: ${run.task}\nproject: ${run.projectDir}\nagent: ${run.agent}  model: ${run.provider}/${run.model}  isolation: ${run.isolation}  network: ${run.network}\n`);
      if (run.thread) out.write(`thread: turn ${run.thread.turn}, continues ${run.thread.parentRunId} (first run ${run.thread.rootRunId}), conversation ${run.thread.conversation}; showing ${values.thread ? "the thread's total change" : "this turn's own change (--thread: the total)"}\n`);
      out.write(`created ${run.createdAt}${run.endedAt ? `, ended ${run.endedAt}` : ''}\n${usageLine(run.usage)}\n`);
      const envLine = environmentLine(run.environment);
      if (envLine) out.write(`${envLine}\n`);
      if (run.excludedFiles.length) out.write(`left out of the sandbox: ${run.excludedFiles.map((e) => `${e.path} (${e.reason})`).join(', ')}\n`);
      if (run.summary) out.write(`\nagent summary:\n${run.summary}\n\n`);
      printChangedFiles(out, files);
      if (checkpoint !== undefined) out.write(`showing checkpoint ${checkpoint} (the run's change up to that turn; 'airlock checkpoints ${runId}' lists them)\n`);
      if (patchSha256) out.write(`${checkpoint !== undefined ? `checkpoint ${checkpoint}` : 'result'} sha256: ${patchSha256}  (after reviewing: airlock apply ${runId}${scopeFlag} --reviewed ${patchSha256})\n`);
      if (run.wipe) out.write(`sandbox wiped: ${run.wipe.verified ? 'verified gone' : `LEFTOVERS ${run.wipe.leftovers.join(', ')}`}${run.wipe.pooledAs ? ` (run ${run.id}'s sandbox, started in the warm pool as ${run.wipe.pooledAs})` : ''} at ${run.wipe.at}\n`);
      if (values.diff && run.patchPath) out.write(`\n${(await s.diffs.exportPatch({ runId, scope, ...cp })).text ?? `(patch too large to print; see ${run.patchPath})`}`);
      if (values.hunks) await printHunks(out, s, runId, files);
      return ExitCode.ok;
    });
  },
};

export const applyCommand: CliCommand = {
  name: 'apply',
  summary: COMMAND_HELP.apply.summary,
  usage: COMMAND_HELP.apply.usage,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { thread: { type: 'boolean' }, to: { type: 'string' }, branch: { type: 'string' }, message: { type: 'string' }, files: { type: 'string', multiple: true }, hunks: { type: 'string', multiple: true }, lines: { type: 'string', multiple: true }, json: { type: 'boolean' }, reviewed: { type: 'string' }, 'skip-conflicts': { type: 'boolean' }, checkpoint: { type: 'string' } });
    const checkpoint = numberOption(values.checkpoint, 'checkpoint', { integer: true, min: 1 });
    const [runId] = positionalsExactly(positionals, '<runId>');
    if (!values.reviewed || !/^[0-9a-f]{64}$/.test(values.reviewed)) {
      io.stderr.write(`airlock apply needs --reviewed <sha256>: the digest 'airlock show ${runId}' or 'airlock patch ${runId}' printed for the result (or selection) you read. Nothing is applied unseen.
`);
      return ExitCode.usage;
    }
    const selection = selectionOf(values.hunks, values.lines);
    const files = selectedFiles(fileList(values.files), selection);
    return withServices(io, async (s) => {
      const result = await s.diffs.apply({
        runId,
        ...(values.thread ? { scope: 'thread' as const } : {}),
        ...(checkpoint !== undefined ? { checkpoint } : {}),
        reviewedSha256: values.reviewed as string,
        mode: values.branch ? 'branch' : 'working-tree',
        ...(values.branch ? { branch: values.branch } : {}),
        ...(values.message ? { message: values.message } : {}),
        ...(files?.length ? { files } : {}),
        ...(selection ? { selection } : {}),
        ...(values.to ? { targetDir: values.to } : {}),
        ...(values['skip-conflicts'] ? { skipConflicts: true } : {}),
      });
      if (values.json) io.stdout.write(`${JSON.stringify(result)}\n`);
      else io.stdout.write(applyReport(result, `airlock apply ${args.join(' ')}`));
      return result.conflicts.length ? ExitCode.conflict : ExitCode.ok;
    });
  },
};

/** What an apply did, in words: written, conflicting, held back (whole or nothing), already there. */
export function applyReport(result: ApplyResult, again: string): string {
  const lines: string[] = [];
  for (const p of result.applied) lines.push(`applied    ${p}`);
  for (const p of result.unchanged) lines.push(`unchanged  ${p} (the project already has it)`);
  for (const c of result.conflicts) lines.push(`CONFLICT   ${c.path}: ${c.reason}`);
  for (const p of result.held) lines.push(`held       ${p} (not written: it applies cleanly, but the set is applied whole or not at all)`);
  if (result.branch) lines.push(`branch ${result.branch} at ${result.commit ?? '?'}${result.author ? ` by ${result.author}` : ''}`);
  if (result.authorFallback) lines.push('git has no user.name/user.email for this project, so the commit is authored by Airlock; set them with git config and apply again to author it yourself.');
  if (result.conflicts.length && !result.applied.length) {
    lines.push(`Nothing was written: ${files(result.conflicts.length)} ${result.conflicts.length === 1 ? 'conflicts' : 'conflict'} with changes in your project. Resolve ${result.conflicts.length === 1 ? 'it' : 'them'} (the app's merge view), or leave ${result.conflicts.length === 1 ? 'it' : 'them'} out with --files.`);
    if (result.held.length) lines.push(`To write the ${files(result.held.length)} that do not conflict anyway: ${again} --skip-conflicts (your project then has the run's changes to those, not to ${result.conflicts.map((c) => c.path).join(', ')}, and may not build or pass its tests until you bring those in).`);
  } else if (result.conflicts.length) {
    lines.push(`${files(result.conflicts.length)} left untouched because the project changed under them (nothing was overwritten); the project now has only part of the result.`);
  } else if (!result.applied.length) {
    lines.push('Nothing to apply: the project already has these changes.');
  }
  return `${lines.join('\n')}\n`;
}

const files = (n: number): string => `${n} ${n === 1 ? 'file' : 'files'}`;

export const patchCommand: CliCommand = {
  name: 'patch',
  summary: COMMAND_HELP.patch.summary,
  usage: COMMAND_HELP.patch.usage,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { thread: { type: 'boolean' }, out: { type: 'string' }, files: { type: 'string', multiple: true }, hunks: { type: 'string', multiple: true }, lines: { type: 'string', multiple: true }, checkpoint: { type: 'string' } });
    const checkpoint = numberOption(values.checkpoint, 'checkpoint', { integer: true, min: 1 });
    const [runId] = positionalsExactly(positionals, '<runId>');
    const selection = selectionOf(values.hunks, values.lines);
    const files = selectedFiles(fileList(values.files), selection);
    const again = [values.thread ? ' --thread' : '', checkpoint !== undefined ? ` --checkpoint ${checkpoint}` : '', files?.length ? ` --files ${files.join(',')}` : '', ...(values.hunks ?? []).map((h) => ` --hunks ${h}`), ...(values.lines ?? []).map((l) => ` --lines ${l}`)].join('');
    return withServices(io, async (s) => {
      const result = await s.diffs.exportPatch({ runId, ...(values.thread ? { scope: 'thread' as const } : {}), ...(checkpoint !== undefined ? { checkpoint } : {}), ...(files?.length ? { files } : {}), ...(selection ? { selection } : {}), ...(values.out ? { destPath: values.out } : {}) });
      if (values.out) io.stderr.write(`wrote ${result.bytes} bytes to ${result.path}\n`);
      else if (result.text !== undefined) io.stdout.write(result.text);
      else io.stderr.write(`the patch is large (${result.bytes} bytes): written to ${result.path}\n`);
      if (result.sha256) io.stderr.write(`sha256 ${result.sha256}  (after reviewing: airlock apply ${runId} --reviewed ${result.sha256}${again})\n`);
      return ExitCode.ok;
    });
  },
};
