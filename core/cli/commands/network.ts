import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import type { AppContext } from '../../app-context';
import { formatAllowEntry, parseAllowEntry } from '../../network/allowlist';
import { derivePresets, PRESET_NAMES } from '../../network/presets';
import { ProjectNetworkStore } from '../../network/project-network-store';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand } from '../command';
import { withApp } from '../with-app';

const USAGE = `airlock network presets [--json]
       airlock network list   (--project DIR | --run RUN_ID) [--json]
       airlock network allow  HOST[:PORT,…]|URL … (--project DIR | --run RUN_ID)
       airlock network remove HOST_PATTERN … (--project DIR | --run RUN_ID)`;

/** The project a `--project`/`--run` option names; a run is looked up in the run history. */
async function projectFor(values: { project?: string; run?: string }, app: AppContext): Promise<string> {
  if (values.project && values.run) throw new AirlockError('INVALID_INPUT', 'give either --project or --run, not both');
  if (values.project) return path.resolve(values.project);
  if (values.run) {
    return (await app.store.get(values.run)).projectDir;
  }
  throw new AirlockError('INVALID_INPUT', 'name the project with --project DIR or a run with --run RUN_ID');
}

/**
 * `airlock network …`: shows the presets derived from this machine's tool configuration, and
 * lists / adds / removes the hosts remembered for a project. Hosts added here reach running
 * allow-list runs of that project at once (their proxy re-reads the project list before denying).
 */
export const networkCommand: CliCommand = {
  name: 'network',
  summary: 'Network presets and the hosts allowed for a project (allow-list policy).',
  usage: USAGE,
  async run(args, io) {
    const { values, positionals } = parseCliArgs(args, {
      project: { type: 'string' },
      run: { type: 'string' },
      json: { type: 'boolean', default: false },
    });
    const [sub, ...rest] = positionals;
    const print = (text: string) => io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    switch (sub) {
      case 'presets': {
        const presets = await derivePresets(PRESET_NAMES);
        if (values.json) {
          print(JSON.stringify(presets));
        } else {
          for (const p of presets) {
            print(`${p.name}: ${p.entries.map(formatAllowEntry).join(' ') || '(none)'}`);
            for (const s of p.sources) print(`  from ${s}`);
            for (const n of p.notes) print(`  note: ${n}`);
          }
        }
        return ExitCode.ok;
      }
      case 'list':
      case 'allow':
      case 'remove': {
        const { project, store } = await withApp(io, async (app) => {
          const dir = await projectFor(values, app);
          return { project: dir, store: new ProjectNetworkStore(dir, app.home) };
        });
        if (sub !== 'list' && rest.length === 0) throw new CliUsageError(`name at least one host to ${sub}`);
        let entries = await store.load();
        if (sub === 'allow') {
          // Validate everything before writing anything.
          const parsed = rest.map((r) => parseAllowEntry(r));
          for (const e of parsed) entries = await store.add(e);
        } else if (sub === 'remove') {
          for (const r of rest) entries = await store.remove(r);
        }
        if (values.json) print(JSON.stringify({ project, file: store.file, allow: entries.map(formatAllowEntry) }));
        else {
          print(`hosts allowed for ${project}:`);
          print(entries.length ? entries.map((e) => `  ${formatAllowEntry(e)}`).join('\n') : '  (none)');
        }
        return ExitCode.ok;
      }
      default:
        throw new CliUsageError(sub ? `unknown subcommand '${sub.slice(0, 40)}'` : 'name a subcommand');
    }
  },
};
