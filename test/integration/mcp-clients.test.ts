import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hostAgentClisDir, requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, leftoversOf, treeDigest, type RunFixture } from '../support/run-fixture';

/**
 * The real Claude Code CLI on the host, configured the way a user does it (`claude mcp add airlock
 * -- airlock mcp`), driven by the scripted fake upstream: it creates a sandbox through Airlock's
 * tools, runs a command in it and reads its diff; the session is recorded and wiped when the CLI
 * exits (docs/architecture.md §17).
 */
const docker = await requirePrerequisite('docker');
const clis = await requirePrerequisite('host-agent-clis');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));
const run = promisify(execFile);

/** The sandbox id an earlier tool result carried (the CLI sends tool results back to the model). */
const sandboxIdIn = (requestBody: string) => /r-[0-9a-z]+-[0-9a-f]{8}/.exec(requestBody)?.[0] ?? 'no-sandbox-id-yet';

describe.skipIf(!docker.ok || !clis.ok)('host MCP clients drive Airlock (real Claude Code CLI, real Docker)', () => {
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
    await run(claude, ['mcp', 'add', 'airlock', '--scope', 'user', '-e', `AIRLOCK_HOME=${fx.home}`, '--', process.execPath, cli, 'mcp'], { env });
    const out = await new Promise<{ code: number | null; text: string }>((resolve) => {
      const child = spawn(claude, ['-p', '--output-format', 'json', '--model', 'claude-sonnet-4-5', '--allowedTools', 'mcp__airlock', '--', 'Make a greeting file in a sandbox and show me the diff.'], { env, cwd: projectDir, stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (d: Buffer) => (text += d.toString()));
      child.stderr.on('data', (d: Buffer) => (text += d.toString()));
      child.on('exit', (code) => resolve({ code, text }));
    });
    expect(out.code, out.text.slice(-2000)).toBe(0);
    expect(JSON.parse(out.text.trim().split('\n').at(-1) as string)).toMatchObject({ is_error: false, result: 'All done here.' });

    // The model saw the command's output and the host-derived diff (Claude sends tool results back).
    const last = fx.upstream.requests.filter((r) => r.method === 'POST').at(-1)?.raw ?? '';
    expect(last).toContain(`+${marker}`);
    expect(last).toContain('patchSha256');
    const id = sandboxIdIn(last);

    // Recorded as an MCP session of Claude Code, its command first-hand; wiped when the CLI exited.
    for (let i = 0; i < 100 && (await fx.services.runs.get({ runId: id })).status !== 'done'; i++) await new Promise((r) => setTimeout(r, 200));
    const record = await fx.services.runs.get({ runId: id });
    expect(record).toMatchObject({ agent: 'mcp', status: 'done', changedFiles: 1 });
    expect(record.mcpClient).toMatch(/claude/i);
    expect(record.wipe?.verified).toBe(true);
    expect(await leftoversOf(id)).toEqual([]);
    const audit = await fx.services.audit.read({ runId: id, offset: 0, limit: 200 });
    expect(audit.records.some((r) => r.type === 'command' && JSON.stringify(r.data).includes(marker))).toBe(true);
    expect(await treeDigest(projectDir)).toBe(before);
  }, 600_000);
});
