import { defaultDoctorChecks, runDoctorChecks, type DoctorOptions, type ReadinessCheck } from '../../doctor/doctor';
import { COMMAND_HELP } from '../command-help';
import type { DoctorCheck } from '../../../contracts/sandboxes';
import type { ImageProgress } from '../../sandbox/driver';
import { parseCliArgs, positionalsExactly } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { withApp } from '../with-app';

/** `airlock doctor`: the readiness checks of core/doctor, printed as they finish. */

function parseDoctorArgs(args: string[]): DoctorOptions & { json: boolean } {
  const { values, positionals } = parseCliArgs(args, {
    json: { type: 'boolean' },
    'no-build': { type: 'boolean' },
    agents: { type: 'boolean' },
    prune: { type: 'boolean' },
    image: { type: 'string' },
  });
  positionalsExactly(positionals);
  return {
    json: values.json === true,
    build: values['no-build'] !== true,
    agents: values.agents === true,
    ...(values.prune ? { prune: true } : {}),
    ...(values.image ? { image: values.image } : {}),
  };
}

const MARK: Record<DoctorCheck['status'], string> = { ok: 'ok  ', warn: 'warn', fail: 'FAIL', skipped: 'skip' };

/** Progress output: a redrawn bar on a TTY, one line per build step otherwise. */
function progressWriter(io: CliIo, json: boolean): { progress(p: ImageProgress): void; done(): void } {
  const out = io.stderr as NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  const tty = Boolean(out.isTTY) && !json;
  let lastStep = -1;
  let drawn = false;
  return {
    progress(p) {
      if (p.phase !== 'build') return;
      if (tty) {
        const width = 24;
        const frac = p.fraction ?? 0;
        const filled = Math.max(0, Math.min(width, Math.round(frac * width)));
        const steps = p.step ? ` ${p.step}/${p.totalSteps}` : '';
        const cols = out.columns ?? 100;
        const line = `  [${'#'.repeat(filled)}${'.'.repeat(width - filled)}]${steps} ${p.message}`.replace(/\s+/g, ' ');
        out.write(`\r\x1b[2K${line.slice(0, cols - 1)}`);
        drawn = true;
      } else if (p.step && p.step !== lastStep) {
        lastStep = p.step;
        out.write(`  building: ${p.message}\n`);
      } else if (!p.step && p.message.startsWith('building ')) {
        out.write(`  ${p.message}\n`);
      }
    },
    done() {
      if (drawn) out.write('\r\x1b[2K');
      drawn = false;
    },
  };
}

/** Runs `checks` in order, prints each with its fix as it finishes, and returns the exit code. */
export async function runDoctor(checks: ReadinessCheck[], io: CliIo, options: DoctorOptions & { json: boolean }): Promise<number> {
  const writer = progressWriter(io, options.json);
  // The core's home, settings, keychain service and engine: the check sees what a run would.
  const report = await withApp(io, (app) =>
    runDoctorChecks(checks, { app, env: io.env, options, progress: writer.progress, progressDone: writer.done }, (result) => {
      writer.done();
      if (options.json) return;
      io.stdout.write(`${MARK[result.status]}  ${result.label}: ${result.detail}\n`);
      if (result.fix && (result.status === 'fail' || result.status === 'warn')) io.stdout.write(`      fix: ${result.fix}\n`);
    }),
  );
  if (options.json) io.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  else io.stdout.write(report.ready ? 'Airlock is ready.\n' : 'Airlock is not ready: fix the checks marked FAIL and run `airlock doctor` again.\n');
  return report.ready ? ExitCode.ok : ExitCode.unavailable;
}

/** `airlock doctor` with a given list of checks (add keychain, VM checks here). */
export function createDoctorCommand(checks: () => ReadinessCheck[] = defaultDoctorChecks): CliCommand {
  return {
    name: 'doctor',
    summary: COMMAND_HELP.doctor.summary,
    usage: COMMAND_HELP.doctor.usage,
    run: async (args, io) => runDoctor(checks(), io, parseDoctorArgs(args)),
  };
}

export const doctorCommand: CliCommand = createDoctorCommand();
