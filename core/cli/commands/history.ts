import { describeError } from '../../../contracts/error-help';
import { createAirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import type { AirlockServices } from '../../api/services';
import { printChangedFiles, summaryRow, usageLine } from '../run-format';
import { numberOption, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';

/** Runs `fn` with the real services (no crash recovery: history commands only read and apply). */
async function withServices<T>(io: CliIo, fn: (s: AirlockServices) => Promise<T>): Promise<T> {
  const services = servicesFor(await createAirlockCore({ env: io.env, recover: false }));
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

export const runsCommand: CliCommand = {
  name: 'runs',
  summary: 'List past and current runs, newest first.',
  usage: 'airlock runs [--json] [--limit N]',
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
  summary: 'Show one run: its record, changed files (risky ones flagged) and usage.',
  usage: 'airlock show <runId> [--thread] [--json] [--diff]   (--thread: the whole thread\'s change up to this turn)',
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { json: { type: 'boolean' }, diff: { type: 'boolean' }, thread: { type: 'boolean' } });
    const [runId] = positionalsExactly(positionals, '<runId>');
    const scope = values.thread ? 'thread' : 'turn';
    const scopeFlag = values.thread ? ' --thread' : '';
    return withServices(io, async (s) => {
      const run = await s.runs.get({ runId });
      const { files, patchSha256 } = await s.diffs.list({ runId, scope });
      if (values.json) {
        io.stdout.write(`${JSON.stringify({ ...run, files, ...(patchSha256 ? { patchSha256 } : {}) })}\n`);
        return ExitCode.ok;
      }
      const out = io.stdout;
      out.write(`run ${run.id}  ${run.status}${run.error ? ` (${describeError(run.error).title}: ${run.error.message})` : ''}\n`);
      out.write(`task: ${run.task}\nproject: ${run.projectDir}\nagent: ${run.agent}  model: ${run.provider}/${run.model}  isolation: ${run.isolation}  network: ${run.network}\n`);
      if (run.thread) out.write(`thread: turn ${run.thread.turn}, continues ${run.thread.parentRunId} (first run ${run.thread.rootRunId}), conversation ${run.thread.conversation}; showing ${values.thread ? "the thread's total change" : "this turn's own change (--thread: the total)"}\n`);
      out.write(`created ${run.createdAt}${run.endedAt ? `, ended ${run.endedAt}` : ''}\n${usageLine(run.usage)}\n`);
      if (run.excludedFiles.length) out.write(`left out of the sandbox: ${run.excludedFiles.map((e) => `${e.path} (${e.reason})`).join(', ')}\n`);
      if (run.summary) out.write(`\nagent summary:\n${run.summary}\n\n`);
      printChangedFiles(out, files);
      if (patchSha256) out.write(`result sha256: ${patchSha256}  (after reviewing: airlock apply ${runId}${scopeFlag} --reviewed ${patchSha256})\n`);
      if (run.wipe) out.write(`sandbox wiped: ${run.wipe.verified ? 'verified gone' : `LEFTOVERS ${run.wipe.leftovers.join(', ')}`} at ${run.wipe.at}\n`);
      if (values.diff && run.patchPath) out.write(`\n${(await s.diffs.exportPatch({ runId, scope })).text ?? `(patch too large to print; see ${run.patchPath})`}`);
      return ExitCode.ok;
    });
  },
};

export const applyCommand: CliCommand = {
  name: 'apply',
  summary: "Apply a run's result to the project (or another folder): working tree or a new branch.",
  usage: 'airlock apply <runId> --reviewed SHA256 [--thread] [--to DIR] [--branch NAME [--message TEXT]] [--files a,b,…] [--json]   (SHA256: from airlock show / airlock patch; --thread: the whole thread\'s change up to this turn)',
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { thread: { type: 'boolean' }, to: { type: 'string' }, branch: { type: 'string' }, message: { type: 'string' }, files: { type: 'string', multiple: true }, json: { type: 'boolean' }, reviewed: { type: 'string' } });
    const [runId] = positionalsExactly(positionals, '<runId>');
    if (!values.reviewed || !/^[0-9a-f]{64}$/.test(values.reviewed)) {
      io.stderr.write(`airlock apply needs --reviewed <sha256>: the digest 'airlock show ${runId}' or 'airlock patch ${runId}' printed for the result (or selection) you read. Nothing is applied unseen.
`);
      return ExitCode.usage;
    }
    const files = fileList(values.files);
    return withServices(io, async (s) => {
      const result = await s.diffs.apply({
        runId,
        ...(values.thread ? { scope: 'thread' as const } : {}),
        reviewedSha256: values.reviewed as string,
        mode: values.branch ? 'branch' : 'working-tree',
        ...(values.branch ? { branch: values.branch } : {}),
        ...(values.message ? { message: values.message } : {}),
        ...(files?.length ? { files } : {}),
        ...(values.to ? { targetDir: values.to } : {}),
      });
      if (values.json) io.stdout.write(`${JSON.stringify(result)}\n`);
      else {
        for (const p of result.applied) io.stdout.write(`applied  ${p}\n`);
        for (const c of result.conflicts) io.stdout.write(`REFUSED  ${c.path}: ${c.reason}\n`);
        if (result.branch) io.stdout.write(`branch ${result.branch} at ${result.commit ?? '?'}${result.author ? ` by ${result.author}` : ''}\n`);
        if (result.authorFallback) io.stdout.write(`git has no user.name/user.email for this project, so the commit is authored by Airlock; set them with git config and apply again to author it yourself.\n`);
        if (result.conflicts.length) io.stdout.write(`${result.conflicts.length} file(s) left untouched because the project changed under them; nothing was overwritten.\n`);
      }
      return result.conflicts.length ? ExitCode.conflict : ExitCode.ok;
    });
  },
};

export const patchCommand: CliCommand = {
  name: 'patch',
  summary: "Print a run's result as a patch (git apply accepts it), or write it to a file.",
  usage: 'airlock patch <runId> [--thread] [--out FILE] [--files a,b,…]   (--thread: the whole thread\'s change up to this turn)',
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { thread: { type: 'boolean' }, out: { type: 'string' }, files: { type: 'string', multiple: true } });
    const [runId] = positionalsExactly(positionals, '<runId>');
    const files = fileList(values.files);
    const scopeFlag = values.thread ? ' --thread' : '';
    return withServices(io, async (s) => {
      const result = await s.diffs.exportPatch({ runId, ...(values.thread ? { scope: 'thread' as const } : {}), ...(files?.length ? { files } : {}), ...(values.out ? { destPath: values.out } : {}) });
      if (values.out) io.stderr.write(`wrote ${result.bytes} bytes to ${result.path}\n`);
      else if (result.text !== undefined) io.stdout.write(result.text);
      else io.stderr.write(`the patch is large (${result.bytes} bytes): written to ${result.path}\n`);
      if (result.sha256) io.stderr.write(`sha256 ${result.sha256}  (after reviewing: airlock apply ${runId}${scopeFlag} --reviewed ${result.sha256}${files?.length ? ` --files ${files.join(',')}` : ''})\n`);
      return ExitCode.ok;
    });
  },
};
