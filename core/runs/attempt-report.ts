import { checkUnproven, MAX_LISTED_FILES, type AttemptComparison, type AttemptGroup, type Comparison } from '../../contracts/attempts';
import type { ChangedFile } from '../../contracts/diffs';
import { checkTouchedFiles } from './check-files';
import type { StoredRun } from './run-record';

/**
 * One attempt in the comparison, from its run record and its host-derived changed files (risky ones
 * marked by `diffs:list`'s classification). The check is the host's record, never agent output.
 */
export function compareAttempt(slot: AttemptGroup['attempts'][number], run: StoredRun, files: ChangedFile[], chosen: string | undefined, checkCommand?: string): AttemptComparison {
  const u = run.usage;
  const ended = run.endedAt ? Date.parse(run.endedAt) : undefined;
  return {
    index: slot.index,
    runId: run.id,
    agent: slot.agent,
    provider: run.provider,
    model: run.model,
    status: run.status,
    check: run.check ? { exitCode: run.check.exitCode, passed: run.check.passed, durationMs: run.check.durationMs, timedOut: run.check.timedOut, ...(run.check.notRun ? { notRun: run.check.notRun } : {}) } : null,
    filesChanged: files.length,
    linesAdded: files.reduce((n, f) => n + f.additions, 0),
    linesRemoved: files.reduce((n, f) => n + f.deletions, 0),
    tokens: { input: u.inputTokens, output: u.outputTokens, cacheRead: u.cacheReadTokens, cacheWrite: u.cacheWriteTokens, total: u.inputTokens + u.outputTokens + u.cacheReadTokens + u.cacheWriteTokens },
    costUsd: u.costUsd ?? null,
    wallMs: ended !== undefined ? Math.max(0, ended - Date.parse(run.createdAt)) : null,
    turns: u.requests,
    riskyFiles: files.filter((f) => f.risky).map((f) => ({ path: f.path, reason: f.risky as string })),
    files: files.slice(0, MAX_LISTED_FILES).map((f) => ({ path: f.path, status: f.status, additions: f.additions, deletions: f.deletions })),
    checkFiles: checkCommand ? checkTouchedFiles(checkCommand, files) : [],
    wipeVerified: run.wipe?.verified === true,
    ...(run.error ? { error: run.error.message } : {}),
    applied: chosen === run.id,
  };
}

export function comparisonOf(group: AttemptGroup, attempts: AttemptComparison[]): Comparison {
  return { groupId: group.id, task: group.task, projectDir: group.projectDir, createdAt: group.createdAt, check: group.check ?? null, attempts, ...(group.chosen ? { chosen: group.chosen } : {}) };
}

/** `|` and line breaks would break a table row; the rest of Markdown is left to the reader. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/[\r\n]+/g, ' ');
}

function checkWords(a: AttemptComparison): string {
  const c = a.check;
  if (!c) return '—';
  if (c.notRun) return `not run (${c.notRun})`;
  const words = `${c.passed ? 'passed' : 'failed'} (exit ${c.exitCode ?? (c.timedOut ? 'timeout' : 'none')}, ${(c.durationMs / 1000).toFixed(1)} s)`;
  return checkUnproven(a) ? `${words}, UNPROVEN: the attempt changed ${a.checkFiles.map((f) => f.path).join(', ')}` : words;
}

/** The comparison as a Markdown report for the team (`airlock compare --markdown`, the UI's Export). */
export function comparisonMarkdown(c: Comparison): string {
  const lines = [
    `# Attempt group ${c.groupId}`,
    '',
    `- Task: ${cell(c.task.split('\n')[0]?.slice(0, 300) ?? '')}`,
    `- Project: \`${c.projectDir}\``,
    `- Started: ${c.createdAt}`,
    `- Check: ${c.check ? `\`${cell(c.check)}\` (run by the host in each sandbox after its agent's processes were gone)` : 'none'}`,
    ...(c.chosen ? [`- Applied: ${c.chosen.runId} at ${c.chosen.at}; the other sandboxes verified gone: ${c.chosen.others.every((o) => o.verified) ? 'yes' : 'NO'}`] : []),
    '',
    '| # | Agent | Model | Status | Check | Files | Lines | Tokens | Cost | Wall | Turns | Risky files | Run |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...c.attempts.map((a) =>
      [
        a.index + 1,
        a.agent,
        cell(a.model),
        a.status + (a.applied ? ' (applied)' : ''),
        cell(checkWords(a)),
        a.filesChanged,
        `+${a.linesAdded} −${a.linesRemoved}`,
        a.tokens.total,
        a.costUsd === null ? '—' : `$${a.costUsd.toFixed(4)}`,
        a.wallMs === null ? '—' : `${(a.wallMs / 1000).toFixed(1)} s`,
        a.turns,
        a.riskyFiles.length ? cell(a.riskyFiles.map((r) => `${r.path} (${r.reason})`).join(', ')) : '—',
        `\`${a.runId}\``,
      ].join(' | '),
    ).map((row) => `| ${row} |`),
    '',
    "Each attempt's diff: `airlock show <run>` or `airlock patch <run>`.",
    '',
  ];
  return lines.join('\n');
}
