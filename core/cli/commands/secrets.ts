import { AirlockError } from '../../../contracts/errors';
import type { AppContext } from '../../app-context';
import { presetBinding, SECRET_PRESETS, SecretStore, type InjectForm, type SecretBindingInput, type SecretPreset } from '../../network/gateway/secret-store';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { commandText, parseCommandLine } from '../../network/gateway/host-command-secret';
import { withApp } from '../with-app';
import { readSecretFromStdin } from './keys';

const USAGE = `airlock secrets set NAME (--preset github|npm | --host HOST… --form bearer|basic:USER|header:NAME…) [--host HOST]… [--path /PREFIX]… [--env VAR]… [--git] [--npm]   (value on stdin)
       airlock secrets set NAME … --command 'gh auth token' [--ttl SECONDS]   (no value stored: the command prints it when a run needs it)
       airlock secrets list [--json]
       airlock secrets rm NAME`;

export function secretStoreFor(app: Pick<AppContext, 'home' | 'keychainService'>): SecretStore {
  // The same keychain service as provider keys (its own account namespace), so CLI and app agree.
  return new SecretStore({ home: app.home, service: app.keychainService });
}

function parseForm(text: string): InjectForm {
  const [kind, arg] = [text.split(':')[0], text.split(':').slice(1).join(':')];
  if (kind === 'bearer' && !arg) return { type: 'bearer' };
  if (kind === 'basic' && arg) return { type: 'basic', username: arg };
  if (kind === 'header' && arg) return { type: 'header', name: arg };
  throw new CliUsageError(`--form ${text}: write bearer, basic:USER or header:NAME`);
}

/**
 * `airlock secrets …`: credentials the egress gateway puts on requests toward their bound hosts
 * (docs/architecture.md §2.8). The value is read from stdin only, stored in the OS keychain, and
 * never printed; a run uses a secret only when it is chosen for it (`airlock run --secret NAME`).
 */
export const secretsCommand: CliCommand = {
  name: 'secrets',
  summary: 'Credentials the egress gateway injects toward their hosts (values in the OS keychain).',
  usage: USAGE,
  async run(args, io: CliIo) {
    const { values, positionals } = parseCliArgs(args, {
      preset: { type: 'string' },
      host: { type: 'string', multiple: true },
      path: { type: 'string', multiple: true },
      form: { type: 'string', multiple: true },
      env: { type: 'string', multiple: true },
      git: { type: 'boolean', default: false },
      npm: { type: 'boolean', default: false },
      json: { type: 'boolean', default: false },
      command: { type: 'string' },
      ttl: { type: 'string' },
    });
    const [sub, name, ...extra] = positionals;
    return withApp(io, (app) => secretsSub(sub, name, extra, values, secretStoreFor(app), io));
  },
};

async function secretsSub(
  sub: string | undefined,
  name: string | undefined,
  extra: string[],
  values: { preset?: string; host?: string[]; path?: string[]; form?: string[]; env?: string[]; git: boolean; npm: boolean; json: boolean; command?: string; ttl?: string },
  store: SecretStore,
  io: CliIo,
): Promise<number> {
  const print = (text: string) => io.stdout.write(`${text}\n`);
  switch (sub) {
    case 'set': {
      if (!name || extra.length) throw new CliUsageError('name one secret: airlock secrets set NAME … (the value on stdin, never as an argument)');
      let binding: SecretBindingInput;
      if (values.preset) {
        if (!(SECRET_PRESETS as readonly string[]).includes(values.preset)) throw new CliUsageError(`--preset is one of ${SECRET_PRESETS.join(', ')}`);
        if ((values.host?.length ?? 0) > 1) throw new CliUsageError('a preset takes at most one --host');
        binding = presetBinding(values.preset as SecretPreset, name, values.host?.[0]);
      } else {
        if (!values.host?.length || !values.form?.length) throw new CliUsageError('without --preset, give --host and --form');
        binding = { name, hosts: values.host, forms: values.form.map(parseForm), env: values.env ?? [], git: values.git, npm: values.npm };
      }
      if (values.path?.length) binding = { ...binding, pathPrefixes: values.path };
      if (values.env?.length && values.preset) binding = { ...binding, env: values.env };
      if (values.ttl !== undefined && values.command === undefined) throw new CliUsageError('--ttl goes with --command (a stored value has no life of its own)');
      if (values.command !== undefined) {
        // No value is read or stored: the command prints it on the host when a run needs it.
        const ttl = values.ttl === undefined ? undefined : Number(values.ttl);
        if (ttl !== undefined && !(Number.isInteger(ttl) && ttl >= 1 && ttl <= 30 * 86_400)) throw new CliUsageError('--ttl is a whole number of seconds from 1 to 2592000 (30 days)');
        const argv = parseCommandLine(values.command);
        const saved = await store.setCommand({ ...binding, command: { argv, ...(ttl ? { ttlSeconds: ttl } : {}) } });
        print(`stored ${saved.name}: \`${commandText(argv)}\` prints its value on this machine when a run first needs it${ttl ? ` (again after ${ttl} s)` : ''} and again after a 401; sent only to ${saved.hosts.join(', ')}${saved.pathPrefixes ? ` under ${saved.pathPrefixes.join(', ')}` : ''}; choose it for a run with --secret ${saved.name}`);
        return ExitCode.ok;
      }
      const value = await readSecretFromStdin(io, `value for ${name}: `);
      const saved = await store.set(binding, value.reveal());
      print(`stored ${saved.name} in the OS keychain, sent only to ${saved.hosts.join(', ')}${saved.pathPrefixes ? ` under ${saved.pathPrefixes.join(', ')}` : ''}; choose it for a run with --secret ${saved.name}`);
      return ExitCode.ok;
    }
    case 'list': {
      const all = await store.list();
      if (values.json) print(JSON.stringify(all));
      else if (all.length === 0) print('no secrets; add one with `airlock secrets set NAME --preset github` (value on stdin)');
      else
        for (const s of all) {
          const forms = s.forms.map((f) => (f.type === 'bearer' ? 'bearer' : f.type === 'basic' ? `basic:${f.username}` : `header:${f.name}`)).join(',');
          const source = s.command ? `  command ${commandText(s.command.argv)}${s.command.ttlSeconds ? ` (ttl ${s.command.ttlSeconds} s)` : ''}` : '';
          print(`${s.name}${s.hasValue ? '' : ' (value missing from the keychain)'}${source}  hosts ${s.hosts.join(',')}${s.pathPrefixes ? `  paths ${s.pathPrefixes.join(',')}` : ''}  as ${forms}${s.env.length ? `  env ${s.env.join(',')}` : ''}`);
        }
      return ExitCode.ok;
    }
    case 'rm': {
      if (!name) throw new CliUsageError('name the secret to remove');
      if (!(await store.remove(name))) throw new AirlockError('NOT_FOUND', `no secret named "${name}" (see \`airlock secrets list\`)`);
      print(`removed ${name}`);
      return ExitCode.ok;
    }
    default:
      throw new CliUsageError(sub ? `unknown subcommand '${sub.slice(0, 40)}'` : 'name a subcommand: set, list or rm');
  }
}
