import { ENGINE_CHOICES } from '../sandbox/docker/engine-choice';
import { CliUsageError } from './args';
import { ExitCode, type CliCommand, type CliIo } from './command';
import { commandHelp } from './command-help';

/** Every command by name; they load lazily so `airlock doctor` does not pay for the proxy or the UI host. */
export const commands: Readonly<Record<string, () => Promise<CliCommand>>> = {
  doctor: async () => (await import('./commands/doctor')).doctorCommand,
  sandbox: async () => (await import('./commands/sandbox')).sandboxCommand,
  run: async () => (await import('./commands/run')).runCommand,
  runs: async () => (await import('./commands/history')).runsCommand,
  compare: async () => (await import('./commands/compare')).compareCommand,
  show: async () => (await import('./commands/history')).showCommand,
  apply: async () => (await import('./commands/history')).applyCommand,
  patch: async () => (await import('./commands/history')).patchCommand,
  checkpoints: async () => (await import('./commands/history')).checkpointsCommand,
  audit: async () => (await import('./commands/audit')).auditCommand,
  serve: async () => (await import('./commands/serve')).serveCommand,
  mcp: async () => (await import('./commands/mcp')).mcpCommand,
  keys: async () => (await import('./commands/keys')).keysCommand,
  providers: async () => (await import('./commands/providers')).providersCommand,
  network: async () => (await import('./commands/network')).networkCommand,
  secrets: async () => (await import('./commands/secrets')).secretsCommand,
  'mcp-servers': async () => (await import('./commands/mcp-servers')).mcpServersCommand,
  env: async () => (await import('./commands/env')).envCommand,
};

function usage(): string {
  const names = Object.keys(commands).join(', ');
  return `usage: airlock <command> [options]\ncommands: ${names}\nRun 'airlock <command> --help' for a command's options.\nAny command: --engine-host ssh://user@host | tcp://host:2376 | unix:///path | <docker context> picks the container engine;\n  --debug prints the errors Airlock handles by itself (best-effort cleanups that failed), as they happen.\n`;
}

/** Runs the CLI and returns its exit code. */
export async function main(argv: string[], io: CliIo): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') {
    io.stdout.write(usage());
    return name ? ExitCode.ok : ExitCode.usage;
  }
  const load = commands[name];
  if (!load) {
    io.stderr.write(`airlock: unknown command '${name}'\n${usage()}`);
    return ExitCode.usage;
  }
  // Only before `--`: what follows is a command to run in the sandbox, its flags its own.
  const dash = rest.indexOf('--');
  const own = dash < 0 ? rest : rest.slice(0, dash);
  // A heavy command's --help is printed without loading its module (cli.start.run_help).
  const help = own.includes('--help') || own.includes('-h') ? commandHelp(name) : undefined;
  if (help) {
    io.stdout.write(`${help.summary}\n\nusage: ${help.usage}\n`);
    return ExitCode.ok;
  }
  const command = await load();
  // `--debug` (any command) or AIRLOCK_DEBUG=1: errors Airlock handles by itself are printed as they happen.
  const debug = own.includes('--debug') || io.env.AIRLOCK_DEBUG === '1';
  const { debugLog } = await import('../common/debug-log');
  const debugSubs = debug ? [debugLog.onDidNote((n) => io.stderr.write(`[debug] ${n.where}: ${n.message}\n`)), debugLog.onDidStack((s) => io.stderr.write(`[debug] ${s.where}: ${s.stack}\n`))] : [];
  try {
    const { host, choice, args } = takeEngineHost([...own.filter((a) => a !== '--debug'), ...(dash < 0 ? [] : rest.slice(dash))]);
    if (args.includes('--help') || args.includes('-h')) {
      io.stdout.write(`${command.summary}\n\nusage: ${command.usage}\n`);
      return ExitCode.ok;
    }
    const env = { ...io.env, ...(host === undefined ? {} : { AIRLOCK_ENGINE_HOST: host }), ...(choice === undefined ? {} : { AIRLOCK_ENGINE: choice }) };
    // One set of shared pieces for the whole command line, from this one environment.
    const { createAppContext } = await import('../app-context');
    const app = createAppContext({ env });
    try {
      return await command.run(args, { ...io, env, app });
    } finally {
      await app.close();
    }
  } catch (err) {
    if (err instanceof CliUsageError) {
      io.stderr.write(`airlock ${name}: ${err.message}\nusage: ${command.usage}\n`);
      return ExitCode.usage;
    }
    // Loaded only on failure: the error contracts pull in zod, which `--help` and a good run's start do not need.
    const [{ toErrorInfo }, { ERROR_ACTION_CLI, describeError }] = await Promise.all([import('../../contracts/errors'), import('../../contracts/error-help')]);
    const info = toErrorInfo(err);
    const help = describeError(info);
    io.stderr.write(`airlock ${name}: ${help.title}: ${help.message}\n${help.actions.map((a) => `  → ${ERROR_ACTION_CLI[a]}\n`).join('')}`);
    return info.kind === 'INVALID_INPUT' ? ExitCode.usage : ExitCode.failure;
  } finally {
    for (const sub of debugSubs) sub.dispose();
  }
}

/**
 * `--engine-host ADDRESS|CONTEXT` works with every command: the container engine for this command
 * (over the `engineHost` setting, DOCKER_HOST and the Docker context), passed on as AIRLOCK_ENGINE_HOST.
 * So does `--engine docker|podman|auto` (over the `engine` setting), passed on as AIRLOCK_ENGINE.
 */
function takeEngineHost(args: string[]): { host: string | undefined; choice: string | undefined; args: string[] } {
  const out: string[] = [];
  let host: string | undefined;
  let choice: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--') {
      out.push(...args.slice(i));
      break;
    }
    if (a === '--engine-host' || a.startsWith('--engine-host=')) {
      const value = a === '--engine-host' ? args[++i] : a.slice('--engine-host='.length);
      if (!value || value.startsWith('-')) throw new CliUsageError('--engine-host needs an address (ssh://user@host, tcp://host:2376, unix:///path) or a Docker context name');
      host = value;
      continue;
    }
    if (a === '--engine' || a.startsWith('--engine=')) {
      const value = a === '--engine' ? args[++i] : a.slice('--engine='.length);
      if (!value || !(ENGINE_CHOICES as readonly string[]).includes(value)) throw new CliUsageError(`--engine needs one of ${ENGINE_CHOICES.join(', ')}`);
      choice = value;
      continue;
    }
    out.push(a);
  }
  return { host, choice, args: out };
}
