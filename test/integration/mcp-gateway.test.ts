import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ProviderCatalog } from '../../core/keys/provider-catalog';
import { SCRUBBED } from '../../core/network/mcp-gateway/run-mcp-gateway';
import { startFakeUpstream, type FakeUpstream } from '../fixtures/fake-upstream';
import { MCP_CANARY, startLoopbackMcpServer, type LoopbackMcpServer } from '../support/mcp-upstream';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, exec, filesContaining, leftoversOf } from '../support/run-fixture';
import { enc, SEARCH_SCRIPT } from '../support/sandbox-search';

/**
 * The run's MCP gateway end to end (docs/architecture.md §20), through the real CLI: a real MCP server
 * on loopback (the official SDK) that answers only with a bearer canary is added with `airlock
 * mcp-servers add` (token on stdin), and `airlock run --agent claude-code --mcp demo` runs the real
 * Claude Code CLI in a hardened sandbox with no network. Claude Code lists the server's tools and
 * calls two of them through the gateway (the scripted fake model asks it to); the canary is found
 * nowhere in the sandbox (files, environ, cmdlines), the run's records or audit, or the CLI's output.
 */

const docker = await requirePrerequisite('docker');
const keychain = await requirePrerequisite('keychain');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

interface SearchResult {
  files: number;
  environs: number;
  hits: string[];
  mounts: string[];
  control: { environ: boolean; file: boolean };
}

describe.skipIf(!docker.ok || !keychain.ok)('MCP gateway: Claude Code, Codex and the built-in agent in the sandbox use a bearer-protected MCP server; the token stays on the host', () => {
  let home: string;
  let projectDir: string;
  let upstream: FakeUpstream;
  let mcp: LoopbackMcpServer;
  let env: NodeJS.ProcessEnv;
  let added: CliResult;

  function airlock(args: string[], stdin = ''): Promise<CliResult> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [cli, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
      child.stdin.end(stdin);
    });
  }

  beforeAll(async () => {
    home = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-gw-home-'));
    projectDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-gw-project-'));
    await writeFile(path.join(projectDir, 'search.cjs'), `${SEARCH_SCRIPT}\n`);
    await writeFile(path.join(projectDir, 'control.txt'), 'file-control-5a17\n');
    await exec('bash', ['-c', 'git init -q -b main && git add -A && git -c user.email=t@t.invalid -c user.name=t commit -qm init'], { cwd: projectDir });
    upstream = await startFakeUpstream({ expectedKey: CANARY_KEY });
    mcp = await startLoopbackMcpServer();
    const catalog = new ProviderCatalog({ home });
    await catalog.setBaseUrl('anthropic', upstream.url);
    await catalog.setBaseUrl('openai', `${upstream.url}/v1`);
    env = { ...process.env, AIRLOCK_HOME: home, AIRLOCK_TEST_KEY: CANARY_KEY, AIRLOCK_KEYCHAIN_SERVICE: `airlock-test-mcp-gw-${randomBytes(4).toString('hex')}` };
    // The server is added once (token on stdin) and two of its tools allowed; each agent's run uses it.
    added = await airlock(['mcp-servers', 'add', 'demo', '--url', mcp.url], `${MCP_CANARY}\n`);
    for (const tool of ['echo', 'whoami']) {
      const allowed = await airlock(['mcp-servers', 'policy', 'demo', tool, 'allow']);
      expect(allowed.stdout, allowed.stderr).toContain(`demo: ${tool} is allow`);
    }
  }, 120_000);
  afterAll(async () => {
    await airlock(['mcp-servers', 'rm', 'demo']).catch(() => undefined);
    await upstream?.close();
    await mcp?.close();
    await rm(home, { recursive: true, force: true });
    await rm(projectDir, { recursive: true, force: true });
  });

  it('lists and calls the server tools through the gateway; the canary is nowhere in the sandbox, the records or the output', async () => {
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toContain('added demo');
    // Enabling shows the tools (the server's words) and pins them; every tool asks until allowed.
    expect(added.stdout).toContain('demo offers 5 tool(s), pinned as shown');
    expect(added.stdout).toMatch(/ {2}delete_item {2}ask \[says: destructive\] {2}Deletes an item by id\./);
    const callsBefore = mcp.calls.length;

    const search = `node -e "$(cat search.cjs)" ${[enc('AIRLOCK_MCP_CONFIG='), enc('file-control-5a17'), enc(MCP_CANARY)].join(' ')}`;
    upstream.setScript([
      { toolCalls: [{ name: 'mcp__airlock__demo__echo', input: { text: 'hello through the gateway' } }] },
      { toolCalls: [{ name: 'mcp__airlock__demo__whoami', input: {} }] },
      // delete_item has no rule (ask) and this run has no one to answer (--json, no terminal): refused at once.
      { toolCalls: [{ name: 'mcp__airlock__demo__delete_item', input: { id: '7' } }] },
      { toolCalls: [{ name: 'Bash', input: { command: search, description: 'search for the token' } }] },
      { text: 'All done here.' },
    ]);
    const run = await airlock(['run', projectDir, '--agent', 'claude-code', '--provider', 'anthropic', '--model', 'claude-sonnet-4-5', '--key-env', 'AIRLOCK_TEST_KEY', '--mcp', 'demo', '--task', 'Use the demo tools.', '--json']);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type?: string; event?: Record<string, unknown>; runId?: string; status?: string });
    const summary = lines.at(-1) as { type: string; runId: string; status: string };
    const events = lines.filter((l) => l.event).map((l) => l.event as Record<string, unknown>);
    expect(summary.status, `${run.stderr.slice(-2000)}\n${JSON.stringify(events.slice(-12)).slice(0, 4000)}`).toBe('done');

    // Claude Code listed the server's tools before its first model request: that request names every
    // one under the gateway's names (as tools, or as deferred tools it offers through its tool search).
    const first = upstream.requests.find((r) => r.method === 'POST' && r.path === '/v1/messages')?.raw ?? '';
    const named = [...new Set(first.match(/mcp__airlock__[A-Za-z0-9_-]+/g) ?? [])].sort();
    expect(named).toEqual(['mcp__airlock__demo__big', 'mcp__airlock__demo__delete_item', 'mcp__airlock__demo__echo', 'mcp__airlock__demo__fetch_page', 'mcp__airlock__demo__whoami']);

    // The server got both allowed calls with the real token, from the gateway on the host; never the refused one.
    expect(mcp.calls.slice(callsBefore).map((c) => c.tool)).toEqual(['echo', 'whoami']);
    expect(mcp.calls[callsBefore]).toEqual({ tool: 'echo', args: { text: 'hello through the gateway' }, authorization: `Bearer ${MCP_CANARY}` });
    // The agent saw the answers; the echoed header arrived scrubbed.
    const results = events.filter((e) => e.type === 'tool_result').map((e) => String(e.output));
    expect(results.some((r) => r.includes('echo: hello through the gateway'))).toBe(true);
    expect(results.some((r) => r.includes(`Bearer ${SCRUBBED}`)), JSON.stringify(results)).toBe(true);
    expect(results.some((r) => r.includes('Airlock refused this call to demo/delete_item') && r.includes('airlock mcp-servers policy demo delete_item allow')), JSON.stringify(results)).toBe(true);
    expect(events.filter((e) => e.type === 'mcp_call').map((e) => [e.tool, e.decision, e.by])).toEqual([
      ['echo', 'allow', 'policy'],
      ['whoami', 'allow', 'policy'],
      ['delete_item', 'deny', 'no one to ask'],
    ]);

    // Inside the sandbox: no file, environment or command line held the token (controls found).
    const terminal = await readFile(path.join(home, 'runs', summary.runId, 'terminal.log'), 'utf8');
    const line = terminal.split(/\r?\n/).find((l) => l.includes('"control"'));
    expect(line, terminal.slice(-3000)).toBeDefined();
    const inside = JSON.parse(line!.slice(line!.indexOf('{'))) as SearchResult;
    expect(inside.control).toEqual({ environ: true, file: true });
    expect(inside.files).toBeGreaterThan(0);
    expect(inside.hits).toEqual([]);

    // The audit log has the gateway and each call (digests and sizes), and is intact.
    const audit = (await readFile(path.join(home, 'runs', summary.runId, 'audit.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
    const mcpRecords = audit.filter((r) => r.type === 'mcp').map((r) => r.data);
    expect(mcpRecords[0]).toMatchObject({ event: 'open', servers: [{ name: 'demo', transport: 'http', tools: 5 }] });
    expect(mcpRecords.filter((r) => r.event === 'call').map((r) => [r.tool, r.decision, r.by, r.isError])).toEqual([
      ['echo', 'allow', 'policy', false],
      ['whoami', 'allow', 'policy', false],
      ['delete_item', 'deny', 'no one to ask', true],
    ]);
    for (const r of mcpRecords.filter((x) => x.event === 'call')) expect(r.argsSha256).toMatch(/^[0-9a-f]{64}$/);
    const verify = await airlock(['audit', 'verify', summary.runId]);
    expect(verify.code, verify.stdout + verify.stderr).toBe(0);

    // Nowhere on the host side either: Airlock's home (records, events, audit, settings) and the CLI output.
    expect(run.stdout + run.stderr + added.stdout + added.stderr).not.toContain(MCP_CANARY);
    expect(await filesContaining(home, MCP_CANARY)).toEqual([]);
    expect(await leftoversOf(summary.runId)).toEqual([]);
  });
  /**
   * Codex (real CLI: `[mcp_servers.airlock]` set for the run, Streamable HTTP with the token from an
   * environment variable) and the built-in agent (its own MCP client) against the same server.
   */
  const otherAgents = [
    {
      agent: 'codex',
      provider: 'openai',
      model: 'gpt-5',
      path: '/v1/responses',
      // Codex offers an MCP server's tools as the Responses namespace `mcp__<its name>` (fake upstream: `ns/tool`).
      tool: (name: string) => `mcp__airlock/demo__${name}`,
      shell: (command: string) => ({ name: 'exec_command', input: { cmd: command } }),
      byProject: false,
      offered: (body: unknown) =>
        ((body as { tools?: { type?: string; name?: string; tools?: { name?: string }[] }[] }).tools ?? []).find((t) => t.type === 'namespace' && t.name === 'mcp__airlock')?.tools?.map((t) => t.name ?? '') ?? [],
    },
    {
      agent: 'builtin',
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
      path: '/v1/messages',
      tool: (name: string) => `demo__${name}`,
      shell: (command: string) => ({ name: 'run_command', input: { command } }),
      // No --mcp: the run gets the servers the user enabled for the project, and says so.
      byProject: true,
      offered: (body: unknown) => ((body as { tools?: { name?: string }[] }).tools ?? []).map((t) => t.name ?? '').filter((n) => n.startsWith('demo__')),
    },
  ] as const;

  for (const a of otherAgents) {
    it(`${a.agent}: lists and calls the server tools through the gateway without setup; the canary is nowhere`, async () => {
      const callsBefore = mcp.calls.length;
      const requestsBefore = upstream.requests.length;
      const search = `node -e "$(cat search.cjs)" ${[enc('AIRLOCK_MCP_TOKEN='), enc('file-control-5a17'), enc(MCP_CANARY)].join(' ')}`;
      upstream.setScript([
        { toolCalls: [{ name: a.tool('echo'), input: { text: `hello from ${a.agent}` } }] },
        { toolCalls: [{ name: a.tool('whoami'), input: {} }] },
        { toolCalls: [{ name: a.tool('delete_item'), input: { id: '7' } }] },
        { toolCalls: [a.shell(search)] },
        { text: 'All done here.' },
      ]);
      if (a.byProject) {
        const enabled = await airlock(['mcp-servers', 'project', projectDir, 'demo']);
        expect(enabled.stdout, enabled.stderr).toContain(`${projectDir}: runs get demo unless --mcp names others`);
      }
      const run = await airlock(['run', projectDir, '--agent', a.agent, '--provider', a.provider, '--model', a.model, '--key-env', 'AIRLOCK_TEST_KEY', ...(a.byProject ? [] : ['--mcp', 'demo']), '--task', 'Use the demo tools.', '--json']);
      if (a.byProject) await airlock(['mcp-servers', 'project', projectDir, '--none']);
      const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type?: string; message?: string; event?: Record<string, unknown>; runId?: string; status?: string });
      if (a.byProject) expect(lines.find((l) => l.type === 'note')?.message).toBe('MCP servers enabled for this project: demo (--mcp NAME picks others, --no-mcp none)');
      const summary = lines.at(-1) as { runId: string; status: string };
      const events = lines.filter((l) => l.event).map((l) => l.event as Record<string, unknown>);
      expect(summary.status, `${run.stderr.slice(-2000)}\n${JSON.stringify(events.slice(-12)).slice(0, 4000)}`).toBe('done');

      const terminal = await readFile(path.join(home, 'runs', summary.runId, 'terminal.log'), 'utf8');
      // The agent listed the gateway's tools before its first model request and offered them all.
      const first = upstream.requests.slice(requestsBefore).find((r) => r.method === 'POST' && r.path === a.path);
      expect([...a.offered(first?.body)].sort(), JSON.stringify(upstream.requests.slice(requestsBefore).map((r) => [r.method, r.path, ((r.body as { tools?: { type?: string; name?: string; tools?: { name?: string }[] }[] } | undefined)?.tools ?? []).map((t) => [t.type, t.name, t.tools?.map((x) => x.name)])]))).toEqual(['demo__big', 'demo__delete_item', 'demo__echo', 'demo__fetch_page', 'demo__whoami']);
      // The server got the two allowed calls with its token, from the gateway; never the refused one.
      expect(mcp.calls.slice(callsBefore)).toEqual([
        { tool: 'echo', args: { text: `hello from ${a.agent}` }, authorization: `Bearer ${MCP_CANARY}` },
        { tool: 'whoami', args: {}, authorization: `Bearer ${MCP_CANARY}` },
      ]);
      const results = events.filter((e) => e.type === 'tool_result').map((e) => String(e.output));
      expect(results.some((r) => r.includes(`echo: hello from ${a.agent}`)), JSON.stringify(results)).toBe(true);
      expect(results.some((r) => r.includes(`Bearer ${SCRUBBED}`)), JSON.stringify(results)).toBe(true);
      expect(events.filter((e) => e.type === 'mcp_call').map((e) => [e.tool, e.decision, e.by])).toEqual([
        ['echo', 'allow', 'policy'],
        ['whoami', 'allow', 'policy'],
        ['delete_item', 'deny', 'no one to ask'],
      ]);

      // Inside the sandbox: nothing held the server's token (the agent's environment and a file were searched).
      const line = terminal.split(/\r?\n/).find((l) => l.includes('"control"'));
      expect(line, terminal.slice(-3000)).toBeDefined();
      const inside = JSON.parse(line!.slice(line!.indexOf('{'))) as SearchResult;
      expect(inside.control).toEqual({ environ: true, file: true });
      expect(inside.hits).toEqual([]);

      const audit = (await readFile(path.join(home, 'runs', summary.runId, 'audit.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; data: Record<string, unknown> });
      expect(audit.filter((r) => r.type === 'mcp' && r.data.event === 'call').map((r) => [r.data.tool, r.data.decision])).toEqual([
        ['echo', 'allow'],
        ['whoami', 'allow'],
        ['delete_item', 'deny'],
      ]);
      expect(run.stdout + run.stderr).not.toContain(MCP_CANARY);
      expect(await filesContaining(home, MCP_CANARY)).toEqual([]);
      expect(await leftoversOf(summary.runId)).toEqual([]);
    });
  }
});
