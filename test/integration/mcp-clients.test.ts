import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostAgentClisDir, requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, leftoversOf, treeDigest, type RunFixture } from '../support/run-fixture';

/**
 * The real Claude Code and Codex CLIs on the host, configured the way a user does it (`claude mcp
 * add airlock -- airlock mcp`; Codex's `config.toml` `[mcp_servers.airlock]`), driven by the scripted
 * fake upstream: each creates a sandbox through Airlock's tools, runs a command in it and reads its
 * diff; the session is recorded and wiped when the CLI exits (docs/architecture.md §17).
 */
const docker = await requirePrerequisite('docker');
const clis = await requirePrerequisite('host-agent-clis');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));
const run = promisify(execFile);

/** The sandbox id an earlier tool result carried (the CLI sends tool results back to the model). */
const sandboxIdIn = (requestBody: string) => /r-[0-9a-z]+-[0-9a-f]{8}/.exec(requestBody)?.[0] ?? 'no-sandbox-id-yet';

/** Runs a host CLI to its exit, collecting stdout and stderr together. */
function runToExit(bin: string, args: string[], opts: { env: NodeJS.ProcessEnv; cwd: string }): Promise<{ code: number | null; text: string }> {
  return new Promise((resolve) => {
    const child = spawn(bin, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.stderr.on('data', (d: Buffer) => (text += d.toString()));
    child.on('exit', (code) => resolve({ code, text }));
  });
}

describe.skipIf(!docker.ok || !clis.ok)('host MCP clients drive Airlock (real Claude Code and Codex CLIs, real Docker)', () => {
  let fx: RunFixture;
  let cliHome: string;

  beforeAll(async () => {
    fx = await createRunFixture();
    cliHome = await mkdtemp(path.join(os.tmpdir(), 'airlock-mcp-client-home-'));
  }, 600_000);
  afterAll(async () => {
    await fx?.close();
    if (cliHome) await rm(cliHome, { recursive: true, force: true });
  });

  it('Claude Code: claude mcp add, then create a sandbox, run a command, read the diff', async () => {
    const projectDir = await fx.project({ 'README.md': '# demo\n' });
    const before = await treeDigest(projectDir);
    const marker = 'hello-from-claude-over-mcp';
    fx.upstream.setScript([
      { toolCalls: [{ name: 'mcp__airlock__sandbox_create', input: { projectDir } }] },
      { toolCalls: [{ name: 'mcp__airlock__sandbox_exec', input: (body) => ({ sandboxId: sandboxIdIn(body), command: `echo ${marker} > greeting.txt && cat greeting.txt` }) }] },
      { toolCalls: [{ name: 'mcp__airlock__sandbox_diff', input: (body) => ({ sandboxId: sandboxIdIn(body) }) }] },
      { text: 'All done here.' },
    ]);
    const claude = path.join(hostAgentClisDir(), 'node_modules/.bin/claude');
    const env = {
      ...process.env,
      HOME: cliHome,
      ANTHROPIC_BASE_URL: fx.upstream.url,
      ANTHROPIC_API_KEY: CANARY_KEY,
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      DISABLE_AUTOUPDATER: '1',
      DISABLE_TELEMETRY: '1',
      // Print mode waits for MCP servers to connect before the first turn (a loaded CI machine may take seconds).
      MCP_CONNECTION_NONBLOCKING: 'false',
      MCP_TIMEOUT: '60000',
    };
    // As the README says, with this checkout's airlock and the test's data folder.
    await run(claude, ['mcp', 'add', 'airlock', '--scope', 'user', '-e', `AIRLOCK_HOME=${fx.home}`, '--', process.execPath, cli, 'mcp', '--project', projectDir], { env });
    const out = await runToExit(claude, ['-p', '--output-format', 'json', '--model', 'claude-sonnet-4-5', '--allowedTools', 'mcp__airlock', '--', 'Make a greeting file in a sandbox and show me the diff.'], { env, cwd: projectDir });
    expect(out.code, out.text.slice(-2000)).toBe(0);
    expect(JSON.parse(out.text.trim().split('\n').at(-1) as string)).toMatchObject({ is_error: false, result: 'All done here.' });
    await expectRecordedSession({ marker, projectDir, before, client: /claude/i });
  }, 600_000);

  it('Codex: [mcp_servers.airlock] in config.toml, then create a sandbox, run a command, read the diff', async () => {
    const projectDir = await fx.project({ 'README.md': '# demo\n' });
    const before = await treeDigest(projectDir);
    const marker = 'hello-from-codex-over-mcp';
    // Codex offers an MCP server's tools as a Responses `namespace` tool named `mcp__<server>` (seen in
    // its request's `tools`); a call names the namespace and the bare tool (fake upstream `ns/tool`).
    fx.upstream.setScript([
      { toolCalls: [{ name: 'mcp__airlock/sandbox_create', input: { projectDir } }] },
      { toolCalls: [{ name: 'mcp__airlock/sandbox_exec', input: (body) => ({ sandboxId: sandboxIdIn(body), command: `echo ${marker} > greeting.txt && cat greeting.txt` }) }] },
      { toolCalls: [{ name: 'mcp__airlock/sandbox_diff', input: (body) => ({ sandboxId: sandboxIdIn(body) }) }] },
      { text: 'All done here.' },
    ]);
    const codexHome = path.join(cliHome, '.codex');
    await mkdir(codexHome, { recursive: true });
    const toml = (v: string) => JSON.stringify(v);
    // As the README says (plus the test's provider and data folder). `required`: Codex waits for the
    // server at startup (an optional one gets 1 s, then its tools are silently left out); `codex exec`
    // runs with approval policy "never", so the server's tools are approved up front.
    await writeFile(
      path.join(codexHome, 'config.toml'),
      [
        'model_provider = "fake"',
        '[model_providers.fake]',
        'name = "scripted fake upstream"',
        `base_url = ${toml(`${fx.upstream.url}/v1`)}`,
        'env_key = "OPENAI_API_KEY"',
        'wire_api = "responses"',
        '',
        '[mcp_servers.airlock]',
        `command = ${toml(process.execPath)}`,
        `args = [${toml(cli)}, "mcp", "--project", ${toml(projectDir)}]`,
        'required = true',
        'startup_timeout_sec = 60',
        'tool_timeout_sec = 600',
        'default_tools_approval_mode = "approve"',
        `env = { AIRLOCK_HOME = ${toml(fx.home)} }`,
        '',
      ].join('\n'),
    );
    const codex = path.join(hostAgentClisDir(), 'node_modules/.bin/codex');
    const env = { ...process.env, HOME: cliHome, CODEX_HOME: codexHome, OPENAI_API_KEY: CANARY_KEY };
    const out = await runToExit(codex, ['exec', '--json', '--skip-git-repo-check', '--model', 'gpt-5', '--', 'Make a greeting file in a sandbox and show me the diff.'], { env, cwd: projectDir });
    expect(out.code, out.text.slice(-2000)).toBe(0);
    // What Codex offered the model: Airlock's tools as the `mcp__airlock` namespace.
    const first = fx.upstream.requests.find((r) => r.method === 'POST' && r.path === '/v1/responses')?.body as { tools?: { type?: string; name?: string; tools?: { name?: string }[] }[] } | undefined;
    const offered = first?.tools?.find((t) => t.type === 'namespace' && t.name === 'mcp__airlock')?.tools?.map((t) => t.name);
    expect(offered, out.text.slice(-2000)).toEqual(expect.arrayContaining(['sandbox_create', 'sandbox_exec', 'sandbox_diff']));
    // Codex reports each MCP call as an item; all three went to Airlock and none failed.
    const calls = out.text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { type?: string; item?: { type?: string; server?: string; tool?: string; status?: string } })
      .filter((e) => e.type === 'item.completed' && e.item?.type === 'mcp_tool_call')
      .map((e) => `${e.item?.server}.${e.item?.tool}:${e.item?.status}`);
    expect(calls, out.text.slice(-2000)).toEqual(['airlock.sandbox_create:completed', 'airlock.sandbox_exec:completed', 'airlock.sandbox_diff:completed']);
    await expectRecordedSession({ marker, projectDir, before, client: /codex/i });
  }, 600_000);

  /** The model saw the command's output and the host-derived diff; the session is recorded and wiped. */
  async function expectRecordedSession(opts: { marker: string; projectDir: string; before: string; client: RegExp }) {
    // Both CLIs send tool results back to the model.
    const last = fx.upstream.requests.filter((r) => r.method === 'POST').at(-1)?.raw ?? '';
    expect(last).toContain(`+${opts.marker}`);
    expect(last).toContain('patchSha256');
    const id = sandboxIdIn(last);

    // Recorded as an MCP session of this client, its command first-hand; wiped when the CLI exited.
    for (let i = 0; i < 100 && (await fx.services.runs.get({ runId: id })).status !== 'done'; i++) await new Promise((r) => setTimeout(r, 200));
    const record = await fx.services.runs.get({ runId: id });
    expect(record).toMatchObject({ agent: 'mcp', status: 'done', changedFiles: 1 });
    expect(record.mcpClient).toMatch(opts.client);
    expect(record.wipe?.verified).toBe(true);
    expect(await leftoversOf(id)).toEqual([]);
    const audit = await fx.services.audit.read({ runId: id, offset: 0, limit: 200 });
    expect(audit.records.some((r) => r.type === 'command' && JSON.stringify(r.data).includes(opts.marker))).toBe(true);
    expect(await treeDigest(opts.projectDir)).toBe(opts.before);
  }
});
