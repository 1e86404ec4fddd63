import { AirlockError } from '../../../contracts/errors';
import type { AppContext } from '../../app-context';
import { McpServerRegistry, type McpAuth } from '../../network/mcp-gateway/mcp-server-registry';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { safeTerminalText as safe } from '../terminal-safe';
import { withApp } from '../with-app';
import { readSecretFromStdin } from './keys';

const USAGE = `airlock mcp-servers add NAME --url URL [--transport http|sse] [--auth bearer|header:NAME|none]   (the token on stdin)
       airlock mcp-servers list [--json]
       airlock mcp-servers rm NAME
A run uses a server only when named for it: airlock run … --agent claude-code --mcp NAME`;

export function mcpServerRegistryFor(app: Pick<AppContext, 'home' | 'keychainService'>): McpServerRegistry {
  // The same keychain service as provider keys (its own account namespace), so CLI and app agree.
  return new McpServerRegistry({ home: app.home, service: app.keychainService });
}

function parseAuth(text: string | undefined): McpAuth {
  if (text === undefined || text === 'bearer') return { type: 'bearer' };
  if (text === 'none') return { type: 'none' };
  if (text.startsWith('header:') && text.length > 'header:'.length) return { type: 'header', name: text.slice('header:'.length) };
  throw new CliUsageError(`--auth ${text.slice(0, 60)}: write bearer, header:NAME or none`);
}

function authText(a: McpAuth): string {
  return a.type === 'header' ? `header:${a.name}` : a.type;
}

/**
 * `airlock mcp-servers …`: the user's MCP servers a run's gateway may connect to (docs/architecture.md
 * §20). The credential is read from stdin only, stored in the OS keychain and never printed; the
 * sandbox never sees it, only the gateway's tools.
 */
export const mcpServersCommand: CliCommand = {
  name: 'mcp-servers',
  summary: "Your MCP servers for runs (--mcp NAME): tokens stay in the OS keychain, the agent reaches them through Airlock's gateway.",
  usage: USAGE,
  async run(args, io: CliIo) {
    const { values, positionals } = parseCliArgs(args, {
      url: { type: 'string' },
      transport: { type: 'string' },
      auth: { type: 'string' },
      json: { type: 'boolean', default: false },
    });
    const [sub, name, ...extra] = positionals;
    if (extra.length) throw new CliUsageError(`unexpected argument '${extra[0]!.slice(0, 40)}' (a token goes on stdin, never as an argument)`);
    return withApp(io, async (app) => {
      const registry = mcpServerRegistryFor(app);
      const print = (text: string) => io.stdout.write(`${text}\n`);
      switch (sub) {
        case 'add': {
          if (!name) throw new CliUsageError('name the server: airlock mcp-servers add NAME --url URL (the token on stdin)');
          if (!values.url) throw new CliUsageError('give the server endpoint: --url https://…/mcp');
          const transport = values.transport ?? 'http';
          if (transport !== 'http' && transport !== 'sse') throw new CliUsageError('--transport is http (Streamable HTTP) or sse');
          const auth = parseAuth(values.auth);
          const credential = auth.type === 'none' ? undefined : (await readSecretFromStdin(io, `token for ${name}: `)).reveal();
          const saved = await registry.add({ name, url: values.url, transport, auth }, credential);
          print(`added ${saved.name} (${new URL(saved.url).origin}, ${saved.transport}${auth.type === 'none' ? ', no credential' : `, ${authText(auth)} from the OS keychain`}); give it to a run with --mcp ${saved.name}`);
          return ExitCode.ok;
        }
        case 'list': {
          const all = await registry.list();
          if (values.json) print(JSON.stringify(all));
          else if (all.length === 0) print('no MCP servers; add one with `airlock mcp-servers add NAME --url URL` (the token on stdin)');
          else for (const s of all) print(safe(`${s.name}  ${s.url}  ${s.transport}  auth ${authText(s.auth)}${s.auth.type !== 'none' && !s.hasCredential ? ' (token missing from the keychain)' : ''}`));
          return ExitCode.ok;
        }
        case 'rm': {
          if (!name) throw new CliUsageError('name the server to remove');
          if (!(await registry.remove(name))) throw new AirlockError('NOT_FOUND', `no MCP server named "${name.slice(0, 40)}" (see \`airlock mcp-servers list\`)`);
          print(`removed ${name} and its token`);
          return ExitCode.ok;
        }
        default:
          throw new CliUsageError(sub ? `unknown subcommand '${sub.slice(0, 40)}'` : 'name a subcommand: add, list or rm');
      }
    });
  },
};
