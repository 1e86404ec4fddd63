import path from 'node:path';
import { AirlockError } from '../../../contracts/errors';
import { McpToolRule, serverOrigin, type McpAuth, type McpServerEntry, type McpServerRegistry } from '../../network/mcp-gateway/mcp-server-registry';
import { listMcpServers, mcpServerRegistryFor, pinServerTools, projectMcpServers, setProjectMcpServers } from '../../network/mcp-gateway/mcp-servers-admin';
import { toolStanding } from '../../network/mcp-gateway/mcp-tool-policy';
import { parseStdioCommand } from '../../network/mcp-gateway/stdio-command';
import { readProjectMcpConfig } from '../../network/mcp-gateway/project-mcp-config';
import type { ListedTool } from '../../network/mcp-gateway/run-mcp-gateway';
import { CliUsageError, parseCliArgs } from '../args';
import { ExitCode, type CliCommand, type CliIo } from '../command';
import { safeTerminalText as safe } from '../terminal-safe';
import { withApp } from '../with-app';
import { openInBrowser } from '../open-in-browser';
import { readSecretFromStdin } from './keys';

const USAGE = `airlock mcp-servers add NAME --url URL [--transport http|sse] [--auth bearer|header:NAME|oauth|none]   (a token on stdin)
       airlock mcp-servers add NAME --stdio [--image IMAGE] [--env K=V]… [--secret-env K] -- COMMAND ARGS…
                                            (runs in its own sidecar container, no network; npx -y PKG@VER is fetched on the host, scripts off; K's value on stdin)
       airlock mcp-servers login NAME [--no-browser]   (OAuth: sign in on the server's page; tokens go to the OS keychain)
       airlock mcp-servers list [--json] [--project DIR] [--proposals]   (--proposals: what Claude Code, Codex, Cursor and VS Code configure; names only, never values)
       airlock mcp-servers policy NAME TOOL|'*' allow|ask|deny|default
       airlock mcp-servers pin NAME          (shows the server's tools now and pins their descriptions)
       airlock mcp-servers rm NAME
       airlock mcp-servers project DIR [NAME…] [--none]   (the servers a project's runs get when none are named with --mcp)
A run uses a server only when named for it: airlock run … --agent claude-code --mcp NAME
Every tool asks before each call until you allow it; a tool whose description changed since it was pinned asks again.
A project's .mcp.json is only listed (--project DIR), never used until you add its servers yourself.`;

export { mcpServerRegistryFor };

function parseAuth(text: string | undefined): McpAuth {
  if (text === undefined || text === 'bearer') return { type: 'bearer' };
  if (text === 'none') return { type: 'none' };
  if (text === 'oauth') return { type: 'oauth' };
  if (text.startsWith('header:') && text.length > 'header:'.length) return { type: 'header', name: text.slice('header:'.length) };
  throw new CliUsageError(`--auth ${text.slice(0, 60)}: write bearer, header:NAME, oauth or none`);
}

function authText(a: McpAuth): string {
  return a.type === 'header' ? `header:${a.name}` : a.type;
}

function rulesText(e: McpServerEntry): string {
  const rules = Object.entries(e.policy ?? {}).map(([t, r]) => `${t}=${r}`);
  return `rules: ${rules.length ? rules.join(' ') : 'none (every tool asks)'}; ${e.pins ? `${Object.keys(e.pins).length} tools pinned` : 'tools not pinned yet'}`;
}

function hintText(t: ListedTool): string {
  const a = t.annotations;
  const words = [a.readOnlyHint ? 'read-only' : '', a.destructiveHint ? 'destructive' : '', a.openWorldHint ? 'open-world' : ''].filter(Boolean);
  return words.length ? ` [says: ${words.join(', ')}]` : '';
}

/** Connects with the stored credential, shows the tools (their rule, the server's own words) and pins them. */
async function pinTools(registry: McpServerRegistry, name: string, print: (t: string) => void): Promise<void> {
  const { entry, tools, cut } = await pinServerTools(registry, name);
  print(`${name} offers ${tools.length} tool(s)${cut ? ' (more were cut)' : ''}, pinned as shown (a changed description asks again):`);
  for (const t of tools) {
    const desc = t.description.replace(/\s+/g, ' ').slice(0, 160);
    print(safe(`  ${t.tool}  ${toolStanding(entry, t).rule}${hintText(t)}  ${desc}`));
  }
}

/** Signs in to an OAuth server: prints the sign-in page's address (and opens it), waits for the answer. */
/** `browser`: the host environment to find the opener with, or undefined for no browser. */
async function signIn(registry: McpServerRegistry, name: string, browser: NodeJS.ProcessEnv | undefined, print: (t: string) => void): Promise<void> {
  await registry.login(name, async (url) => {
    // The server's own page: printed whole, since the user must be able to open it by hand.
    print(`sign in to ${name} in your browser (waiting up to 5 minutes):`);
    print(`  ${safe(url.href)}`);
    if (browser) await openInBrowser(url.href, browser);
  });
  print(`signed in to ${name}; its tokens are in the OS keychain and are refreshed there (the sandbox never sees them)`);
}

/**
 * What the user's other MCP clients (and, with a project, its files) configure: the same reading as the
 * MCP servers screen (client-mcp-configs.ts). Listed to add by hand, never enabled; header and
 * environment values are never read out, only their names.
 */
async function printProposals(registry: McpServerRegistry, io: CliIo, projectDir: string | undefined, json: boolean, print: (text: string) => void): Promise<void> {
  const userHome = io.env.HOME || io.env.USERPROFILE;
  const clients = userHome ? { userHome, env: { CODEX_HOME: io.env.CODEX_HOME, APPDATA: io.env.APPDATA } } : undefined;
  const { proposed } = await listMcpServers(registry, projectDir ? path.resolve(projectDir) : undefined, clients);
  if (json) {
    print(JSON.stringify({ proposed: proposed.map((p) => ({ ...p, enabled: false })) }));
    return;
  }
  if (proposed.length === 0) {
    print(`nothing found in Claude Code, Codex, Cursor or VS Code${projectDir ? ' or the project' : ''}`);
    return;
  }
  print('configured by your other MCP clients (not enabled; add one yourself to use it):');
  for (const p of proposed) {
    const where = p.transport === 'stdio' ? `stdio: ${p.command ?? '?'}` : `${p.url ?? '(no url)'}  ${p.transport}`;
    const secrets = p.secretNames.length ? `  sets ${p.secretNames.join(', ')} (values not shown)` : '';
    const added = p.added ? '  (a server of yours has this name; only yours is used)' : p.transport === 'stdio' ? `  to use it: airlock mcp-servers add ${p.name} --stdio -- COMMAND` : `  to use it: airlock mcp-servers add ${p.name} --url URL`;
    print(safe(`  ${p.name}  ${where}  from ${p.source}${secrets}${added}`));
  }
}

const OPTIONS = {
  stdio: { type: 'boolean', default: false },
  image: { type: 'string' },
  env: { type: 'string', multiple: true },
  'secret-env': { type: 'string' },
  url: { type: 'string' },
  transport: { type: 'string' },
  auth: { type: 'string' },
  json: { type: 'boolean', default: false },
  project: { type: 'string' },
  'no-browser': { type: 'boolean', default: false },
  none: { type: 'boolean', default: false },
  proposals: { type: 'boolean', default: false },
} as const;

/** One `airlock mcp-servers` subcommand's call: its flags and words, and where it reads and writes. */
interface McpServersCall {
  registry: McpServerRegistry;
  io: CliIo;
  print: (text: string) => void;
  values: ReturnType<typeof parseCliArgs<typeof OPTIONS>>['values'];
  /** The word after the subcommand: a server's name (a project folder for `project`). */
  name: string | undefined;
  /** The words after it. */
  rest: string[];
  /** A stdio server's command, after `--`. */
  command: string[];
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
  async run(allArgs, io: CliIo) {
    // A stdio server's command follows `--` and is never read as options.
    const dashes = allArgs.indexOf('--');
    const args = dashes < 0 ? allArgs : allArgs.slice(0, dashes);
    const command = dashes < 0 ? [] : allArgs.slice(dashes + 1);
    const { values, positionals } = parseCliArgs(args, OPTIONS);
    const [sub, name, ...rest] = positionals;
    const extra = sub === 'policy' ? rest.slice(2) : sub === 'project' ? [] : rest;
    if (extra.length) throw new CliUsageError(`unexpected argument '${extra[0]!.slice(0, 40)}' (a token goes on stdin, never as an argument)`);
    return withApp(io, async (app) => {
      const registry = mcpServerRegistryFor(app);
      const print = (text: string) => io.stdout.write(`${text}\n`);
      const call: McpServersCall = { registry, io, print, values, name, rest, command };
      switch (sub) {
        case 'add':
          return values.stdio ? addStdioServer(call) : addRemoteServer(call);
        case 'login': {
          if (!name) throw new CliUsageError('name the server: airlock mcp-servers login NAME');
          await signIn(registry, name, values['no-browser'] ? undefined : io.env, print);
          return ExitCode.ok;
        }
        case 'pin': {
          if (!name) throw new CliUsageError('name the server: airlock mcp-servers pin NAME');
          await pinTools(registry, name, print);
          return ExitCode.ok;
        }
        case 'policy':
          return setToolPolicy(call);
        case 'list':
          return listServers(call);
        case 'project': {
          // Enabled per project by the user (§20); a project's own .mcp.json never writes here.
          if (!name) throw new CliUsageError('name the project folder: airlock mcp-servers project DIR [NAME…] [--none]');
          if (values.none && rest.length) throw new CliUsageError('--none clears the list; name servers or write --none, not both');
          const dir = path.resolve(name);
          const now = values.none || rest.length ? await setProjectMcpServers(registry, app.home, dir, values.none ? [] : rest) : await projectMcpServers(registry, app.home, dir);
          if (values.json) print(JSON.stringify(now));
          else print(safe(now.servers.length ? `${dir}: runs get ${now.servers.join(', ')} unless --mcp names others (--no-mcp: none)` : `${dir}: no MCP servers enabled; runs get one only with --mcp NAME`));
          return ExitCode.ok;
        }
        case 'rm': {
          if (!name) throw new CliUsageError('name the server to remove');
          if (!(await registry.remove(name))) throw new AirlockError('NOT_FOUND', `no MCP server named "${name.slice(0, 40)}" (see \`airlock mcp-servers list\`)`);
          print(`removed ${name} and its token`);
          return ExitCode.ok;
        }
        default:
          throw new CliUsageError(sub ? `unknown subcommand '${sub.slice(0, 40)}'` : 'name a subcommand: add, login, list, policy, pin, project or rm');
      }
    });
  },
};

/** `add NAME --stdio -- COMMAND`: a local server, run in its own sidecar; its secret's value from stdin. */
async function addStdioServer({ registry, io, print, values, name, command }: McpServersCall): Promise<number> {
  if (!name) throw new CliUsageError('name the server: airlock mcp-servers add NAME --stdio -- COMMAND ARGS…');
  if (values.url) throw new CliUsageError('a stdio server has no --url; its command follows --');
  const stdio = parseStdioCommand(command, { ...(values.image ? { image: values.image } : {}), env: values.env ?? [] });
  const secretName = values['secret-env'];
  const secrets = secretName ? { [secretName]: (await readSecretFromStdin(io, `value of ${secretName} for ${name}: `)).reveal() } : {};
  const saved = await registry.addStdio({ name, stdio }, secrets);
  const what = saved.stdio?.package ? `npm ${saved.stdio.package}, fetched on the host with scripts off` : safe((saved.stdio?.command ?? []).join(' ').slice(0, 200));
  print(`added ${saved.name} (stdio: ${what}; runs in its own sidecar container on ${saved.stdio?.image ?? "Airlock's image"}, no network${secretName ? `, ${secretName} from the OS keychain` : ''}); give it to a run with --mcp ${saved.name}`);
  print(`its tools are not pinned (a stdio server is only started beside a run): every tool asks before each call; allow one with: airlock mcp-servers policy ${saved.name} TOOL allow`);
  return ExitCode.ok;
}

/** `add NAME --url URL`: a remote server with its token from stdin (or OAuth sign-in), its tools pinned as listed now. */
async function addRemoteServer({ registry, io, print, values, name, command }: McpServersCall): Promise<number> {
  if (command.length) throw new CliUsageError('a command after -- is for a stdio server: add --stdio');
  if (!name) throw new CliUsageError('name the server: airlock mcp-servers add NAME --url URL (the token on stdin)');
  if (!values.url) throw new CliUsageError('give the server endpoint: --url https://…/mcp');
  const transport = values.transport ?? 'http';
  if (transport !== 'http' && transport !== 'sse') throw new CliUsageError('--transport is http (Streamable HTTP) or sse');
  const auth = parseAuth(values.auth);
  const credential = auth.type === 'none' || auth.type === 'oauth' ? undefined : (await readSecretFromStdin(io, `token for ${name}: `)).reveal();
  const saved = await registry.add({ name, url: values.url, transport, auth }, credential);
  print(`added ${saved.name} (${serverOrigin(saved)}, ${saved.transport}${auth.type === 'none' ? ', no credential' : `, ${authText(auth)} from the OS keychain`}); give it to a run with --mcp ${saved.name}`);
  if (auth.type === 'oauth') await signIn(registry, saved.name, values['no-browser'] ? undefined : io.env, print);
  try {
    await pinTools(registry, saved.name, print);
  } catch (err) {
    // Kept, unpinned: every tool asks until pinned, so nothing is trusted unseen.
    io.stderr.write(`note: could not list ${saved.name}'s tools now (${safe((err as Error).message.slice(0, 300))}); every tool asks until you pin them: airlock mcp-servers pin ${saved.name}\n`);
  }
  print(`every tool asks before each call; allow one with: airlock mcp-servers policy ${saved.name} TOOL allow`);
  return ExitCode.ok;
}

/** `policy NAME TOOL|'*' allow|ask|deny|default`: one tool's rule, or the server's default. */
async function setToolPolicy({ registry, print, name, rest }: McpServersCall): Promise<number> {
  const [tool, ruleText] = rest;
  if (!name || !tool || !ruleText) throw new CliUsageError("write: airlock mcp-servers policy NAME TOOL|'*' allow|ask|deny|default");
  const rule = ruleText === 'default' ? undefined : McpToolRule.safeParse(ruleText).data;
  if (ruleText !== 'default' && !rule) throw new CliUsageError(`the rule is allow, ask, deny or default (remove the tool's own rule), not '${ruleText.slice(0, 40)}'`);
  const entry = await registry.setPolicy(name, tool, rule);
  const known = tool === '*' || entry.pins?.[tool] !== undefined;
  print(safe(`${name}: ${tool === '*' ? 'every tool without its own rule' : tool} ${rule ? `is ${rule}` : 'follows the default again'}; ${rulesText(entry)}${known ? '' : `\nnote: ${tool} is not among ${name}'s pinned tools (see airlock mcp-servers pin ${name})`}`));
  return ExitCode.ok;
}

/** `list [--json] [--project DIR] [--proposals]`: the user's servers, and what a project's file proposes (never enabled by being there). */
async function listServers({ registry, io, print, values }: McpServersCall): Promise<number> {
  if (values.proposals) {
    await printProposals(registry, io, values.project, values.json, print);
    return ExitCode.ok;
  }
  const all = await registry.list();
  const project = values.project ? await readProjectMcpConfig(values.project) : undefined;
  if (values.json) {
    print(JSON.stringify(project ? { servers: all, project: { file: project.file, proposed: project.servers.map((p) => ({ ...p, enabled: false, added: all.some((s) => s.name === p.name) })) } } : all));
    return ExitCode.ok;
  }
  if (all.length === 0) print('no MCP servers; add one with `airlock mcp-servers add NAME --url URL` (the token on stdin)');
  else for (const s of all) print(safe(`${s.name}  ${s.transport === 'stdio' ? `${s.stdio?.package ? `npm ${s.stdio.package}` : (s.stdio?.command ?? []).join(' ').slice(0, 120)} (sidecar, ${s.stdio?.image ?? 'airlock image'}${s.stdio?.secretEnv?.length ? `, secrets: ${s.stdio.secretEnv.join(' ')}` : ''})` : s.url}  ${s.transport}  auth ${authText(s.auth)}${s.auth.type !== 'none' && !s.hasCredential ? ' (token missing from the keychain)' : ''}  ${rulesText(s)}`));
  if (project) {
    if (project.servers.length === 0) print(safe(`${project.file}: no MCP servers proposed`));
    else {
      // The project's file is a request: shown, never enabled by being there (§20).
      print(safe(`proposed by the project (${project.file}), not enabled:`));
      for (const p of project.servers) {
        const where = p.transport === 'stdio' ? `stdio: ${p.command ?? '?'}` : `${p.url ?? '(no url)'}  ${p.transport}`;
        const secrets = p.secretNames.length ? `  sets ${p.secretNames.join(', ')} (values not shown)` : '';
        const added = all.some((s) => s.name === p.name) ? '  (a server of yours has this name; only yours is used)' : p.transport === 'stdio' ? `  to use it (in its own sidecar): airlock mcp-servers add ${p.name} --stdio -- COMMAND` : `  to use it: airlock mcp-servers add ${p.name} --url URL`;
        print(safe(`  ${p.name}  ${where}${secrets}${added}`));
      }
    }
  }
  return ExitCode.ok;
}
