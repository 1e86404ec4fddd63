import type { RunEnvironment } from '../../contracts/environments';
import type { ChangedFile, RunSummary, Usage } from '../../contracts';
import { isFinalStatus, type EnvironmentEvent, type SetupEvent } from '../../contracts/runs';
import { formatElapsed } from '../runs/setup-watch';

export const isFinal = isFinalStatus;

export function usageLine(u: Usage): string {
  const cost = u.costUsd !== undefined ? `, $${u.costUsd.toFixed(4)}` : '';
  const cached = u.cacheReadTokens || u.cacheWriteTokens ? ` (+ ${u.cacheReadTokens} cache read, ${u.cacheWriteTokens} cache write)` : '';
  return `usage: ${u.requests} model call${u.requests === 1 ? '' : 's'}, ${u.inputTokens} in${cached} / ${u.outputTokens} out tokens${cost}`;
}

const MARK: Record<ChangedFile['status'], string> = { added: 'A', modified: 'M', deleted: 'D', renamed: 'R', 'type-changed': 'T' };

/** Changed files, risky ones first with their reason (they are not applied unless named). */
export function printChangedFiles(out: NodeJS.WritableStream, files: ChangedFile[]): void {
  if (!files.length) {
    out.write('no files changed\n');
    return;
  }
  out.write(`${files.length} file${files.length === 1 ? '' : 's'} changed:\n`);
  for (const f of files) {
    const stat = f.binary ? 'binary' : `+${f.additions} -${f.deletions}`;
    const from = f.oldPath ? `${f.oldPath} → ` : '';
    out.write(`  ${MARK[f.status]} ${from}${f.path}  (${stat}${f.modeChange ? `, mode ${f.modeChange}` : ''})${f.risky ? `\n      ⚠ ${f.risky}` : ''}\n`);
  }
}

export function summaryRow(r: RunSummary): string {
  const cost = r.usage.costUsd !== undefined ? `$${r.usage.costUsd.toFixed(3)}` : `${r.usage.inputTokens + r.usage.outputTokens} tok`;
  const task = r.task.replace(/\s+/g, ' ').slice(0, 50);
  // A follow-up turn names the run it continues (docs/architecture.md §15).
  const turn = r.thread ? `  (turn ${r.thread.turn}, continues ${r.thread.parentRunId})` : '';
  return `${r.id}  ${r.status.padEnd(11)} ${r.agent.padEnd(11)} ${cost.padEnd(10)} ${String(r.changedFiles).padStart(3)} files  ${task}${turn}`;
}

/**
 * What `airlock run` prints once the environment is resolved (docs/architecture.md §16): which one
 * runs, `auto`'s fallback to Airlock's image with its reason (one line), and each option not applied.
 */
export function environmentLines(e: EnvironmentEvent): string[] {
  // Airlock's own image, chosen or found by default, needs no line.
  if (e.kind === 'airlock' && !e.fallback && !e.notApplied.length) return [];
  const lines = [e.fallback ? `environment: Airlock's own image — ${e.fallback.config} ${e.fallback.reason}` : `environment: ${e.name}`];
  for (const n of e.notApplied) if (!e.fallback || n.field !== e.fallback.config) lines.push(`  not applied: ${n.field}: ${n.reason}`);
  return lines;
}

/** A setup event as the CLI shows it: commands and their end with elapsed time, output as printed. */
export function setupLine(e: SetupEvent): string | undefined {
  switch (e.phase) {
    case 'started':
      return `$ [setup ${e.step}] ${e.command}`;
    case 'output':
      return e.data ?? '';
    case 'still_running':
      return `… [setup ${e.step}] still running (${formatElapsed(e.elapsedMs)})`;
    case 'exited':
      return `[setup ${e.step}] ${e.exitCode === 0 ? 'done' : `exit ${e.exitCode ?? 'killed'}`} in ${formatElapsed(e.elapsedMs)}`;
    case 'stopped':
      return `[setup ${e.step}] stopped after ${formatElapsed(e.elapsedMs)}`;
    default:
      return undefined;
  }
}

/** The environment line of a run's report: which environment ran and whether setup ran or a prepared environment was used (§16). */
export function environmentLine(env: RunEnvironment | undefined): string | undefined {
  if (env?.fallback) return `environment: Airlock's own image (${env.fallback.config} ${env.fallback.reason})`;
  if (!env || env.kind === 'airlock') return undefined;
  const p = env.prepared;
  const prepared = !p
    ? ''
    : p.status === 'reused'
      ? `; started from the prepared environment ${p.image ?? p.key} (setup not run again)`
      : p.status === 'created'
        ? `; setup ran and was kept as the prepared environment ${p.image ?? p.key}`
        : p.status === 'failed'
          ? `; setup ran, keeping it failed (${p.reason ?? 'unknown'})`
          : `; setup ran (not kept: ${p.reason ?? ''})`;
  return `environment: ${env.name}${prepared}`;
}
