import type { PreparedEnvironmentInfo } from '../../../contracts/environments';
import { COMMAND_HELP } from '../command-help';
import { formatBytes } from '../../../contracts/format';
import { listPrepared, parseAge, PreparedUsage, prunePrepared } from '../../environment/prepared-environments';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { withApp } from '../with-app';
import type { AppContext } from '../../app-context';
import { formatPlan, planEnvironment, type EnvironmentPlan } from '../../environment/environment-plan';
import path from 'node:path';
import { baseInfo, listProjectBases, pruneProjectBases } from '../../sandbox/docker/project-base-volumes';
import { BaseStore } from '../../workspace/project-base';

const USAGE = COMMAND_HELP.env.usage;

/** How long ago, in the largest whole unit. */
function ago(iso: string | undefined, now: number): string {
  if (!iso) return 'never';
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 120) return `${s}s ago`;
  if (s < 7200) return `${Math.round(s / 60)}m ago`;
  if (s < 172_800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86_400)}d ago`;
}

function describe(p: PreparedEnvironmentInfo, now: number): string {
  const inputs = p.files.length ? p.files.join(', ') : 'no manifests';
  return `${p.key}  ${formatBytes(p.sizeBytes).padStart(9)}  made ${ago(p.createdAt, now)}, used ${ago(p.lastUsedAt, now)}\n    ${p.project} · ${p.config} · inputs: ${inputs} · base ${p.baseImageId.replace(/^sha256:/, '').slice(0, 12)}`;
}

/**
 * `airlock env list|prune` (docs/architecture.md §16, "Prepared environments"): what setup phases
 * left and later runs start from, kept as engine images labelled with their inputs.
 */
export const envCommand: CliCommand = {
  name: 'env',
  summary: COMMAND_HELP.env.summary,
  usage: COMMAND_HELP.env.usage,
  async run(args: string[], io: CliIo): Promise<number> {
    const [verb, ...rest] = args;
    if (verb === 'plan') return planCommand(rest, io);
    if (verb !== 'list' && verb !== 'prune') throw new CliUsageError(`give a subcommand: plan, list or prune\n${USAGE}`);
    const { values, positionals } = parseCliArgs(rest, { json: { type: 'boolean' }, 'older-than': { type: 'string' } });
    if (positionals.length) throw new CliUsageError(`unexpected argument '${positionals[0]}'\n${USAGE}`);
    if (verb === 'list' && values['older-than'] !== undefined) throw new CliUsageError('--older-than is an option of prune');
    const olderThanMs = values['older-than'] !== undefined ? parseAge(values['older-than']) : undefined;
    return withApp(io, async (app) => {
      const engine = await app.connectEngine();
      const docker = engine.docker;
      const store = new BaseStore(path.join(app.home, 'bases'));
      const usage = new PreparedUsage(app.home);
      const installation = await app.installationId();
      const now = Date.now();
      if (verb === 'list') {
        const all = await listPrepared(docker, usage, installation);
        const bases = (await listProjectBases(engine, store)).map(baseInfo);
        if (values.json) {
          io.stdout.write(`${JSON.stringify({ environments: all, totalBytes: all.reduce((n, p) => n + p.sizeBytes, 0), bases }, null, 2)}\n`);
          return ExitCode.ok;
        }
        if (!all.length) io.stdout.write('No prepared environments. A run whose devcontainer has setup commands keeps one after its setup.\n');
        for (const p of all) io.stdout.write(`${describe(p, now)}\n`);
        if (all.length) io.stdout.write(`${all.length} prepared environment(s), ${formatBytes(all.reduce((n, p) => n + p.sizeBytes, 0))} (images share their base layers; \`airlock env prune\` removes them)\n`);
        for (const b of bases) io.stdout.write(`project base  ${formatBytes(b.sizeBytes).padStart(9)}  ${b.files} files, made ${ago(b.createdAt, now)}${b.projectExists ? '' : ' (project folder gone)'}\n    ${b.project} · ${b.volume}\n`);
        if (bases.length) io.stdout.write(`${bases.length} project base(s): a run on one of these projects copies in only what changed (\`airlock env prune\` removes them)\n`);
        return ExitCode.ok;
      }
      const result = await prunePrepared(docker, usage, installation, olderThanMs === undefined ? {} : { olderThanMs });
      // Project bases go with them: every one without an age, else those whose project folder is gone (§11).
      const bases = await pruneProjectBases(engine, store, { all: olderThanMs === undefined, installation });
      result.removed.push(...bases.removed.map((p) => ({ key: `project base: ${p}`, sizeBytes: 0 })));
      if (olderThanMs === undefined) result.kept.push(...bases.kept.map((p) => ({ key: `project base: ${p}`, reason: 'a live run starts from it' })));
      result.freedBytes += bases.freedBytes;
      if (values.json) io.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
      else {
        io.stdout.write(`Removed ${result.removed.length} prepared environment(s), ${formatBytes(result.freedBytes)}.\n`);
        for (const k of result.kept) io.stdout.write(`  kept ${k.key}: ${k.reason}\n`);
      }
      return result.kept.length ? ExitCode.failure : ExitCode.ok;
    });
  },
};

/**
 * `airlock env plan [DIR]` (docs/architecture.md §16, "The plan"): what a run would build and run,
 * read on the host (nothing built, pulled or run), and whether a prepared environment exists.
 */
async function planCommand(args: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCliArgs(args, { json: { type: 'boolean' }, environment: { type: 'string' }, 'allow-local-env': { type: 'string', multiple: true } });
  if (positionals.length > 1) throw new CliUsageError(`env plan takes one project folder, not ${positionals.length}\n${USAGE}`);
  const dir = path.resolve(positionals[0] ?? process.cwd());
  return withApp(io, async (app) => {
    const plan = await planEnvironment(app, dir, values.environment, { allowLocalEnv: values['allow-local-env'] ?? [] });
    const prepared = plan.devcontainer?.setup.length ? await preparedFor(app, plan) : undefined;
    if (values.json) io.stdout.write(`${JSON.stringify({ ...plan, ...(prepared ? { prepared } : {}) }, null, 2)}\n`);
    else io.stdout.write(formatPlan(plan, prepared?.text));
    return ExitCode.ok;
  });
}

/** Prepared environments of this project and configuration on the engine (the run picks the one whose inputs match). */
async function preparedFor(app: AppContext, plan: EnvironmentPlan): Promise<{ status: 'found' | 'none' | 'unknown'; keys?: string[]; text: string }> {
  try {
    const docker = (await app.connectEngine()).docker;
    const all = (await listPrepared(docker, new PreparedUsage(app.home), await app.installationId())).filter((p) => p.project === plan.project && p.config === plan.devcontainer?.config);
    if (!all.length) return { status: 'none', text: 'none yet: the first run sets up and keeps one' };
    return { status: 'found', keys: all.map((p) => p.key), text: `${all.length} kept for this configuration (${all.map((p) => p.key.slice(0, 12)).join(', ')}); a run starts from the one whose inputs (image, setup commands, lockfiles) match, else sets up again` };
  } catch (err) {
    return { status: 'unknown', text: `unknown (the engine could not be asked: ${err instanceof Error ? err.message.split('\n')[0] : String(err)})` };
  }
}
