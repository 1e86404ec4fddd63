import { AirlockError } from '../../../contracts/errors';
import { verifyRunLogs } from '../../audit/audit-reader';
import { isFinalStatus } from '../../../contracts/runs';
import type { StoredRun } from '../../runs/run-record';
import { CliUsageError, parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand } from '../command';
import { withApp } from '../with-app';

/**
 * `airlock audit verify <runId> [--json]`: checks a run's hash-chained audit log, and its apply
 * log when it has one, and prints "intact (n records)" or the first broken record. Exit 0 intact,
 * 1 broken (bad usage: 2, through `main`).
 */
export const auditCommand: CliCommand = {
  name: 'audit',
  summary: "Verify a run's tamper-evident audit log.",
  usage: 'airlock audit verify <runId> [--json]',
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, { json: { type: 'boolean' } });
    const json = values.json === true;
    const [sub, runId] = positionalsExactly(positionals, 'verify', '<runId>');
    if (sub !== 'verify') throw new CliUsageError(`unknown subcommand '${sub.slice(0, 40)}'`);
    return withApp(io, async ({ store }) => {
      const paths = store.paths(runId); // INVALID_INPUT for a malformed id
      let record: StoredRun | undefined;
      try {
        record = await store.get(runId);
      } catch (err) {
        // The log is checked even when run.json is gone or damaged; it stands on its own.
        if (!(err instanceof AirlockError)) throw err;
      }
      const result = await verifyRunLogs({ ...paths, anchors: { ...(record?.audit ? { audit: record.audit } : {}), ...(record?.applyLog ? { applyLog: record.applyLog } : {}) } });
      if (!record && !result.ok && result.reason.includes('does not exist')) {
        throw new AirlockError('NOT_FOUND', `No run ${runId} (no ${paths.audit}). 'airlock runs' lists the runs.`);
      }
      const unsealedEnded = result.ok && !result.sealed && record !== undefined && isFinalStatus(record.status);
      if (json) {
        io.stdout.write(`${JSON.stringify({ runId, file: result.ok || result.log !== 'apply' ? paths.audit : paths.applyLog, ...result, ...(unsealedEnded ? { warning: 'not sealed' } : {}) })}\n`);
      } else if (result.ok) {
        io.stdout.write(`audit log of ${runId}: intact (${result.count} record${result.count === 1 ? '' : 's'}${result.sealed ? ', sealed' : ''})\n`);
        if (result.applies !== undefined) io.stdout.write(`apply log: intact (${result.applies} record${result.applies === 1 ? '' : 's'}, chained from the seal)\n`);
        if (unsealedEnded) io.stdout.write(`note: the run has ended but its log has no seal record; records after the last one shown may have been cut\n`);
      } else {
        const file = result.log === 'apply' ? paths.applyLog : paths.audit;
        io.stdout.write(`${result.log === 'apply' ? 'apply' : 'audit'} log of ${runId}: BROKEN at record ${result.index}: ${result.reason}\n`);
        io.stdout.write(`file: ${file}\n`);
      }
      return result.ok ? ExitCode.ok : ExitCode.failure;
    });
  },
};
