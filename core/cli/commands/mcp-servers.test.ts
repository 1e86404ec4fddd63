/**
 * `airlock mcp-servers` against the real OS keychain (a service of this test's own, so no real entry
 * is touched): the token goes to the keychain only, never into a file or the command's output.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { captureIo } from '../../../test/support/cli-io';
import { MCP_CANARY, startLoopbackMcpServer } from '../../../test/support/mcp-upstream';
import { requirePrerequisite } from '../../../test/support/prerequisites';
import { projectDataDir } from '../../network/project-network-store';
import { mcpServerRegistryFor, mcpServersCommand } from './mcp-servers';

const keychain = await requirePrerequisite('keychain');
const homes: string[] = [];
const service = `airlock-test-mcp-servers-${randomBytes(4).toString('hex')}`;
const env = { ...process.env, AIRLOCK_KEYCHAIN_SERVICE: service };
afterAll(async () => {
  for (const h of homes) await rm(h, { recursive: true, force: true });
});

async function run(args: string[], home: string, stdin = '') {
  const { io, out, err } = captureIo({ ...env, AIRLOCK_HOME: home });
  const withStdin = { ...io, stdin: Object.assign(Readable.from([Buffer.from(stdin)]), { isTTY: false }) };
  const code = await mcpServersCommand.run(args, withStdin);
  return { code, out: out(), err: err() };
}

describe.skipIf(!keychain.ok)('airlock mcp-servers', () => {
  it('add (token from stdin) pins the tools it shows / list / rm: the token in the keychain only, never printed or in a file', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    homes.push(home);
    const server = await startLoopbackMcpServer();
    try {
      const token = MCP_CANARY;
      const origin = new URL(server.url).origin;
      const added = await run(['add', 'tracker', '--url', server.url], home, `${token}\n`);
      expect(added.out).toContain(`added tracker (${origin}, http, bearer from the OS keychain); give it to a run with --mcp tracker`);
      expect(added.out).toContain('tracker offers 5 tool(s), pinned as shown');
      expect(added.out).toContain('  echo  ask [says: read-only]  Echoes the text back.\n');
      expect(added.out).toContain('every tool asks before each call; allow one with: airlock mcp-servers policy tracker TOOL allow');
      // Unreachable (a closed loopback port): kept, unpinned, and said so.
      const local = await run(['add', 'local', '--url', 'http://127.0.0.1:9/mcp', '--auth', 'header:X-Api-Key', '--transport', 'sse'], home, 'another-token-value\n');
      expect(local.err).toContain("note: could not list local's tools now");
      expect(local.err).toContain('airlock mcp-servers pin local');
      const policy = await run(['policy', 'tracker', 'echo', 'allow'], home);
      expect(policy.out).toBe('tracker: echo is allow; rules: echo=allow; 5 tools pinned\n');
      expect((await run(['policy', 'tracker', '*', 'deny'], home)).out).toContain('rules: echo=allow *=deny');
      expect((await run(['policy', 'tracker', 'nope', 'ask'], home)).out).toContain("note: nope is not among tracker's pinned tools");
      await expect(run(['policy', 'tracker', 'echo', 'maybe'], home)).rejects.toThrow(/allow, ask, deny or default/);
      await expect(run(['policy', 'nosuch', 'echo', 'allow'], home)).rejects.toThrow(/no MCP server named "nosuch"/);
      const listed = await run(['list'], home);
      expect(listed.out).toBe(`tracker  ${server.url}  http  auth bearer  rules: echo=allow *=deny nope=ask; 5 tools pinned\nlocal  http://127.0.0.1:9/mcp  sse  auth header:X-Api-Key  rules: none (every tool asks); tools not pinned yet\n`);
      const json = await run(['list', '--json'], home);
      const file = await readFile(path.join(home, 'mcp-servers.json'), 'utf8');
      expect(JSON.parse(file).servers[0].pins.echo).toMatch(/^[0-9a-f]{64}$/);
      expect(file + added.out + added.err + listed.out + json.out).not.toContain(token);
      const [resolved] = await mcpServerRegistryFor({ home, keychainService: service }).resolve(['tracker']);
      expect(resolved!.credential!.reveal()).toBe(token);
      expect(JSON.stringify(resolved)).not.toContain(token);
      // Re-pinning after the server changed a description records the new hash.
      const before = JSON.parse(file).servers[0].pins.echo as string;
      server.setDescription('echo', 'Echoes, and more.');
      expect((await run(['pin', 'tracker'], home)).out).toContain('  echo  allow [says: read-only]  Echoes, and more.');
      const after = JSON.parse(await readFile(path.join(home, 'mcp-servers.json'), 'utf8')).servers[0].pins.echo as string;
      expect(after).not.toBe(before);
      expect((await run(['rm', 'tracker'], home)).out).toContain('removed tracker and its token');
      expect((await run(['rm', 'local'], home)).out).toContain('removed local');
      await expect(mcpServerRegistryFor({ home, keychainService: service }).resolve(['tracker'])).rejects.toMatchObject({ kind: 'NOT_FOUND', message: expect.stringContaining('airlock mcp-servers add tracker') });
    } finally {
      await server.close();
    }
  });

  it("list --project shows the project's .mcp.json as proposed, never enabled, without a header or env value", async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    const project = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-project-'));
    homes.push(home, project);
    const secret = `proj-secret-${randomBytes(8).toString('hex')}`;
    await writeFile(
      path.join(project, '.mcp.json'),
      JSON.stringify({
        mcpServers: {
          linear: { type: 'http', url: `https://mcp.linear.test/mcp?token=${secret}`, headers: { Authorization: `Bearer ${secret}` } },
          files: { command: 'npx', args: ['-y', '@modelcontextprotocol/server-filesystem', '.'], env: { API_KEY: secret } },
        },
      }),
    );
    const listed = await run(['list', '--project', project], home);
    expect(listed.out).toContain(`proposed by the project (${path.join(project, '.mcp.json')}), not enabled:`);
    expect(listed.out).toContain('  linear  https://mcp.linear.test/mcp (query/credential hidden)  http  sets Authorization (values not shown)  to use it: airlock mcp-servers add linear --url URL');
    expect(listed.out).toContain('  files  stdio: npx -y @modelcontextprotocol/server-filesystem .  sets API_KEY (values not shown)  to use it (in its own sidecar): airlock mcp-servers add files --stdio -- COMMAND');
    const json = JSON.parse((await run(['list', '--json', '--project', project], home)).out) as { servers: unknown[]; project: { proposed: Array<{ name: string; enabled: boolean }> } };
    expect(json.servers).toEqual([]);
    expect(json.project.proposed.map((p) => [p.name, p.enabled])).toEqual([['linear', false], ['files', false]]);
    expect(listed.out + JSON.stringify(json)).not.toContain(secret);
    // Listed is not enabled: a run naming it finds no server of the user's.
    await expect(mcpServerRegistryFor({ home, keychainService: service }).resolve(['linear'])).rejects.toMatchObject({ kind: 'NOT_FOUND', message: expect.stringContaining('airlock mcp-servers add linear') });
    await writeFile(path.join(project, '.mcp.json'), '{ not json');
    await expect(run(['list', '--project', project], home)).rejects.toThrow(/\.mcp\.json is not valid JSON; fix it or remove it/);
  });

  it("project DIR [NAME…] enables the user's servers for a project (names only, under the home), --none clears, an unknown name is refused", async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    homes.push(home);
    const project = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-project-'));
    homes.push(project);
    await run(['add', 'open', '--url', 'http://127.0.0.1:9/mcp', '--auth', 'none'], home);
    expect((await run(['project', project], home)).out).toBe(`${project}: no MCP servers enabled; runs get one only with --mcp NAME\n`);
    expect((await run(['project', project, 'open'], home)).out).toBe(`${project}: runs get open unless --mcp names others (--no-mcp: none)\n`);
    const stored = JSON.parse(await readFile(path.join(projectDataDir(project, home), 'mcp-servers.json'), 'utf8')) as { servers: string[]; project: string };
    expect(stored).toMatchObject({ servers: ['open'], project });
    expect(JSON.parse((await run(['project', project, '--json'], home)).out)).toEqual({ projectDir: project, servers: ['open'] });
    await expect(run(['project', project, 'nosuch'], home)).rejects.toThrow(/no MCP server named "nosuch"/);
    // A server removed later is no longer listed for the project.
    await run(['rm', 'open'], home);
    expect((await run(['project', project], home)).out).toContain('no MCP servers enabled');
    await run(['add', 'open', '--url', 'http://127.0.0.1:9/mcp', '--auth', 'none'], home);
    expect((await run(['project', project, '--none'], home)).out).toContain('no MCP servers enabled');
    expect((await run(['project', project], home)).out).toContain('no MCP servers enabled');
  });

  it("list --proposals prints what the user's other clients configure: names, sources and variable names, never values", async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    homes.push(home);
    const userHome = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-user-'));
    homes.push(userHome);
    const secret = `client-secret-${'7e1a'.repeat(6)}`;
    await writeFile(path.join(userHome, '.claude.json'), JSON.stringify({ mcpServers: { notes: { type: 'http', url: 'https://notes.invalid/mcp?key=query-secret', headers: { 'X-Api-Key': secret } } } }));
    await mkdir(path.join(userHome, '.codex'));
    await writeFile(path.join(userHome, '.codex', 'config.toml'), `[mcp_servers.docs]\nurl = "https://docs.invalid/mcp"\nbearer_token_env_var = "DOCS_TOKEN"\n\n[mcp_servers.shell]\ncommand = "npx"\nargs = ["-y", "shell-server"]\n\n[mcp_servers.shell.env]\nSHELL_TOKEN = "${secret}"\n`);
    const { io, out } = captureIo({ ...env, AIRLOCK_HOME: home, HOME: userHome });
    expect(await mcpServersCommand.run(['list', '--proposals'], io)).toBe(0);
    const text = out();
    expect(text).toContain('configured by your other MCP clients (not enabled; add one yourself to use it):');
    expect(text).toMatch(/ {2}notes {2}https:\/\/notes\.invalid\/mcp.* {2}http {2}from Claude Code.* {2}sets X-Api-Key \(values not shown\) {2}to use it: airlock mcp-servers add notes --url URL/);
    expect(text).toMatch(/ {2}docs {2}https:\/\/docs\.invalid\/mcp {2}http {2}from Codex.* {2}sets DOCS_TOKEN \(values not shown\)/);
    expect(text).toMatch(/ {2}shell {2}stdio: npx -y shell-server {2}from Codex.* {2}sets SHELL_TOKEN \(values not shown\)/);
    expect(text).not.toContain(secret);
    expect(text).not.toContain('query-secret');
    const json = captureIo({ ...env, AIRLOCK_HOME: home, HOME: userHome });
    await mcpServersCommand.run(['list', '--proposals', '--json'], json.io);
    const parsed = JSON.parse(json.out()) as { proposed: Array<{ name: string; enabled: boolean }> };
    expect(parsed.proposed.map((p) => [p.name, p.enabled]).sort()).toEqual([['docs', false], ['notes', false], ['shell', false]]);
    expect(json.out()).not.toContain(secret);
    // Listing changed nothing: the user has no servers.
    expect(await mcpServerRegistryFor({ home, keychainService: service }).list()).toEqual([]);
  });

  it('refuses plain http off loopback, a credential in the URL, a bad name and a token given as an argument', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    homes.push(home);
    await expect(run(['add', 'web', '--url', 'http://mcp.example.test/mcp'], home, 'tokentoken\n')).rejects.toThrow(/must be https \(plain http only to this machine's loopback\)/);
    await expect(run(['add', 'web', '--url', 'https://user:pw@mcp.example.test/mcp'], home, 'tokentoken\n')).rejects.toThrow(/not in the URL/);
    await expect(run(['add', 'Bad Name', '--url', 'https://mcp.example.test/mcp'], home, 'tokentoken\n')).rejects.toThrow(/lower-case letters/);
    await expect(run(['add', 'web', 'tokentoken', '--url', 'https://mcp.example.test/mcp'], home)).rejects.toThrow(/token goes on stdin/);
    expect((await run(['list'], home)).out).toContain('no MCP servers');
  });

  it('add --stdio: the command after --, npx as a package fetched on the host, a secret env value from stdin to the keychain only', async () => {
    const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-servers-'));
    homes.push(home);
    const secret = `stdio-canary-${randomBytes(6).toString('hex')}`;
    const added = await run(['add', 'everything', '--stdio', '--env', 'MODE=ro', '--secret-env', 'API_TOKEN', '--', 'npx', '-y', '@modelcontextprotocol/server-everything@2026.8.31', 'stdio'], home, `${secret}\n`);
    expect(added.code).toBe(0);
    expect(added.out).toContain("added everything (stdio: npm @modelcontextprotocol/server-everything@2026.8.31, fetched on the host with scripts off; runs in its own sidecar container on Airlock's image, no network, API_TOKEN from the OS keychain)");
    expect(added.out + added.err).not.toContain(secret);
    const file = await readFile(path.join(home, 'mcp-servers.json'), 'utf8');
    expect(file).not.toContain(secret);
    expect(JSON.parse(file).servers[0]).toMatchObject({ name: 'everything', transport: 'stdio', stdio: { package: '@modelcontextprotocol/server-everything@2026.8.31', command: ['stdio'], env: { MODE: 'ro' }, secretEnv: ['API_TOKEN'] } });
    const listed = await run(['list'], home);
    expect(listed.out).toContain('everything  npm @modelcontextprotocol/server-everything@2026.8.31 (sidecar, airlock image, secrets: API_TOKEN)  stdio');
    await expect(run(['add', 'bad', '--stdio'], home)).rejects.toThrow(/give the server command after --/);
    await expect(run(['add', 'bad', '--', 'node', 'x.js'], home)).rejects.toThrow(/add --stdio/);
    expect((await run(['rm', 'everything'], home)).out).toContain('removed everything');
  });
});
