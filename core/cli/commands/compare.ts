import { checkUnproven, type Comparison } from '../../../contracts/attempts';
import { COMMAND_HELP } from '../command-help';
import { requireAttemptGroupId } from '../../../contracts/ids';
import { comparisonMarkdown } from '../../runs/attempt-report';
import { createAirlockCore } from '../../app';
import { servicesFor } from '../../app-services';
import { CliUsageError, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';

function formatDuration(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : ms < 120_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** The comparison as a table for a terminal: one row per attempt. */
export function printComparison(io: CliIo, c: Comparison): void {
  const rows = [
    ['#', 'agent', 'model', 'status', 'check', 'files', 'lines', 'tokens', 'cost', 'wall', 'turns', 'risky', 'run'],
    ...c.attempts.map((a) => [
      String(a.index + 1),
      a.agent,
      a.model,
      a.status + (a.applied ? ' (applied)' : ''),
      !a.check ? '—' : a.check.notRun ? 'not run' : `${checkUnproven(a) ? 'UNPROVEN' : a.check.passed ? 'passed' : 'FAILED'} (${a.check.exitCode ?? 'timeout'}, ${formatDuration(a.check.durationMs)})`,
      String(a.filesChanged),
      `+${a.linesAdded} -${a.linesRemoved}`,
      String(a.tokens.total),
      a.costUsd === null ? '—' : `$${a.costUsd.toFixed(4)}`,
      a.wallMs === null ? '—' : formatDuration(a.wallMs),
      String(a.turns),
      String(a.riskyFiles.length),
      a.runId,
    ]),
  ];
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  io.stdout.write(`attempt group ${c.groupId}${c.check ? ` — check: ${c.check}` : ''}\n`);
  for (const r of rows) io.stdout.write(`${r.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ').trimEnd()}\n`);
  for (const a of c.attempts.filter(checkUnproven)) {
    io.stdout.write(`attempt ${a.index + 1} changed what its check reads, so its pass proves nothing: ${a.checkFiles.map((f) => `${f.path} (${f.reason})`).join(', ')}\n`);
  }
  io.stdout.write(`review: airlock show <run>   apply one: airlock apply <run>   report: airlock compare ${c.groupId} --markdown\n`);
}

/** `airlock compare <groupId>`: an attempt group's attempts side by side (docs/architecture.md §18). */
export const compareCommand: CliCommand = {
  name: 'compare',
  summary: COMMAND_HELP.compare.summary,
  usage: COMMAND_HELP.compare.usage,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { json: { type: 'boolean' }, markdown: { type: 'boolean' } });
    const [id] = positionalsExactly(positionals, '<groupId>');
    if (values.json && values.markdown) throw new CliUsageError('--json and --markdown are two formats of the same report; choose one.');
    const groupId = requireAttemptGroupId(id);
    const core = await createAirlockCore({ env: io.env, ...(io.app ? { app: io.app } : {}), recover: false });
    const services = servicesFor(core);
    try {
      const c = await services.attempts.compare({ groupId });
      if (values.json) io.stdout.write(`${JSON.stringify(c)}\n`);
      else if (values.markdown) io.stdout.write(comparisonMarkdown(c));
      else printComparison(io, c);
      return ExitCode.ok;
    } finally {
      await services.dispose();
    }
  },
};
