import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startMcpHttpServer, type McpHttpServer } from '../../core/mcp/mcp-http';
import { ApplyApprovals } from '../../core/mcp/apply-approvals';
import { ClientGrants } from '../../core/runs/client-grants';
import { parseEnvironmentChoice, resolveEnvironment } from '../../core/environment/environment-choice';
import { EnvironmentTrust } from '../../core/environment/environment-trust';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, leftoversOf, treeDigest, type RunFixture } from '../support/run-fixture';

const docker = await requirePrerequisite('docker');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

const TOOLS = ['run_apply', 'run_cancel', 'run_continue', 'run_result', 'run_start', 'run_status', 'sandbox_create', 'sandbox_destroy', 'sandbox_diff', 'sandbox_exec', 'sandbox_list', 'sandbox_list_files', 'sandbox_publish_port', 'sandbox_read_file', 'sandbox_write_file'];

type Structured = Record<string, unknown>;

async function call(client: Client, name: string, args: Record<string, unknown>, onProgress?: (message: string) => void): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, { timeout: 600_000, ...(onProgress ? { onprogress: (p) => onProgress(p.message ?? '') } : {}) })) as CallToolResult;
}

/** A tool result's structured value; fails the test with the tool's own words when it errored. */
async function ok<T extends Structured>(client: Client, name: string, args: Record<string, unknown>, onProgress?: (message: string) => void): Promise<T> {
  const r = await call(client, name, args, onProgress);
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
  expect(r.content[0]?.type).toBe('text');
  return r.structuredContent as T;
}

function errorText(r: CallToolResult): string {
  expect(r.isError).toBe(true);
  return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

function stdioClient(home: string, extraArgs: string[] = []): { client: Client; transport: StdioClientTransport } {
  const transport = new StdioClientTransport({ command: process.execPath, args: [cli, 'mcp', ...extraArgs], env: { ...(process.env as Record<string, string>), AIRLOCK_HOME: home }, stderr: 'pipe' });
  const client = new Client({ name: 'airlock-test-client', version: '1.0.0' });
  return { client, transport };
}

describe.skipIf(!docker.ok)('airlock mcp over stdio, driven by the official SDK client (real Docker)', () => {
  let fx: RunFixture;
  let client: Client;
  let transport: StdioClientTransport;
  let projectDir: string;

  beforeAll(async () => {
    fx = await createRunFixture();
    projectDir = await fx.project({ 'README.md': '# demo\n', 'src/app.js': 'export const answer = 1;\n', '.env': `SECRET=${CANARY_KEY}\n` });
    ({ client, transport } = stdioClient(fx.home, ['--project', projectDir]));
    await client.connect(transport);
  }, 600_000);
  afterAll(async () => {
    await client?.close();
    await fx?.close();
  });

  it('lists exactly the tools of the interface, each with an output schema, a title and behaviour hints', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(TOOLS);
    for (const t of tools) {
      expect(t.outputSchema, t.name).toBeTruthy();
      expect(t.title, t.name).toBeTruthy();
      for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const) expect(typeof t.annotations?.[hint], `${t.name} ${hint}`).toBe('boolean');
    }
    const byName = new Map(tools.map((t) => [t.name, t]));
    // Clients confirm destructive tools: reading a status is not one, applying to the project is.
    expect(byName.get('run_status')?.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false });
    expect(byName.get('run_apply')?.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
  });

  it('create → exec (streamed) → write/read/list → diff → publish → destroy, recorded as an MCP session; apply only with the user\'s yes', async () => {
    const before = await treeDigest(projectDir);
    const created = await ok<{ sandboxId: string; excludedFiles: Array<{ path: string }> }>(client, 'sandbox_create', { projectDir });
    const id = created.sandboxId;
    expect(created.excludedFiles.map((f) => f.path)).toContain('.env');

    const progress: string[] = [];
    // The pause keeps the first line's progress note apart from the result: the SDK client drops a note
    // that reaches it in the same read as its request's response (it handles the note a tick later).
    const ran = await ok<{ exitCode: number; stdout: string; stderr: string; truncated: boolean }>(client, 'sandbox_exec', { sandboxId: id, command: "echo out-$((6*7)); sleep 2; printf '\\033[31mred-mark\\033[0m\\n'; echo err >&2; cat README.md; env; exit 3" }, (m) => progress.push(m));
    expect(ran.exitCode).toBe(3);
    expect(ran.stdout).toContain('out-42');
    expect(ran.stdout).toContain('# demo');
    expect(ran.stderr).toContain('err');
    expect(progress.join('')).toContain('out-42');
    // No run token, no provider settings, no key: the session has none.
    expect(ran.stdout).not.toMatch(/ANTHROPIC|OPENAI|AIRLOCK_|TOKEN/);
    expect(ran.stdout).not.toContain(CANARY_KEY);

    await ok(client, 'sandbox_write_file', { sandboxId: id, path: 'src/new/thing.txt', content: 'made over mcp\n' });
    await ok(client, 'sandbox_exec', { sandboxId: id, command: "sed -i 's/1/2/' src/app.js" });
    const read = await ok<{ content: string; encoding: string }>(client, 'sandbox_read_file', { sandboxId: id, path: '/workspace/src/new/thing.txt' });
    expect(read).toMatchObject({ content: 'made over mcp\n', encoding: 'utf8' });
    const listed = await ok<{ entries: Array<{ name: string; type: string }> }>(client, 'sandbox_list_files', { sandboxId: id, path: 'src' });
    expect(listed.entries.map((e) => e.name).sort()).toEqual(['app.js', 'new']);

    const diff = await ok<{ files: Array<{ path: string; status: string }>; patch: string; patchSha256: string }>(client, 'sandbox_diff', { sandboxId: id });
    expect(diff.files.map((f) => f.path).sort()).toEqual(['src/app.js', 'src/new/thing.txt']);
    expect(diff.patch).toContain('+export const answer = 2;');
    // Issue 39: over sandbox_read_file's cap, the read is refused as the limit it is (a LimitError), saying what to do instead.
    await ok(client, 'sandbox_exec', { sandboxId: id, command: 'head -c 10485761 /dev/zero > big.bin' });
    expect(errorText(await call(client, 'sandbox_read_file', { sandboxId: id, path: 'big.bin' }))).toBe('INVALID_INPUT: /workspace/big.bin is larger than the 10485760-byte cap of sandbox_read_file; read part of it with sandbox_exec (head, tail, sed).');
    await ok(client, 'sandbox_exec', { sandboxId: id, command: 'rm big.bin' });

    // A preview port: a server in the sandbox, reached from the host on 127.0.0.1 only.
    await ok(client, 'sandbox_exec', { sandboxId: id, command: `nohup node -e "require('http').createServer((q,s)=>s.end('preview-ok')).listen(8123)" >/dev/null 2>&1 & for i in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/8123) 2>/dev/null && exit 0; sleep 0.1; done; exit 1` });
    const pub = await ok<{ url: string }>(client, 'sandbox_publish_port', { sandboxId: id, port: 8123 });
    expect(pub.url).toMatch(/^http:\/\/(127\.0\.0\.1|localhost):\d+/);
    expect(await httpGet(pub.url)).toBe('preview-ok');

    const destroyed = await ok<{ status: string; wipe: { verified: boolean }; patchSha256: string; changedFiles: number }>(client, 'sandbox_destroy', { sandboxId: id });
    expect(destroyed).toMatchObject({ status: 'done', wipe: { verified: true }, changedFiles: 2 });
    expect(await leftoversOf(id)).toEqual([]);
    expect(destroyed.patchSha256).toBe(diff.patchSha256);
    errorText(await call(client, 'sandbox_exec', { sandboxId: id, command: 'true' }));

    // History: an MCP session with its commands, first-hand, in a verified audit log.
    const record = await fx.services.runs.get({ runId: id });
    expect(record).toMatchObject({ agent: 'mcp', mcpClient: 'airlock-test-client 1.0.0', status: 'done' });
    const audit = await fx.services.audit.read({ runId: id, offset: 0, limit: 500 });
    const commands = audit.records.filter((r) => r.type === 'command');
    expect(commands.length).toBeGreaterThanOrEqual(3);
    const verify = await ok<Structured>(client, 'run_status', { runId: id });
    expect(verify.agent).toBe('mcp');
    const auditRes = await client.readResource({ uri: `airlock://runs/${id}/audit` });
    expect(JSON.parse((auditRes.contents[0] as { text: string }).text)).toMatchObject({ intact: true });
    const terminal = await client.readResource({ uri: `airlock://runs/${id}/terminal` });
    const terminalText = (terminal.contents[0] as { text: string }).text;
    expect(terminalText).toContain('out-42');
    // Plain text: the colour codes the command printed are left out.
    expect(terminalText).toContain('red-mark');
    expect(terminalText).not.toContain('\x1b');
    const diffRes = await client.readResource({ uri: `airlock://runs/${id}/diff` });
    expect((diffRes.contents[0] as { text: string }).text).toContain('made over mcp');

    const result = await ok<{ patchSha256: string; files: unknown[] }>(client, 'run_result', { runId: id });
    expect(result.patchSha256).toBe(destroyed.patchSha256);

    // No answer: refused, saying how to approve; nothing written.
    const refused = errorText(await call(client, 'run_apply', { runId: id, reviewedSha256: result.patchSha256, waitSec: 1 }));
    expect(refused).toMatch(/user's yes/);
    expect(refused).toMatch(/Airlock app/);
    expect(await treeDigest(projectDir)).toBe(before);
    // A digest other than the reviewed one: refused before anyone is asked.
    expect(errorText(await call(client, 'run_apply', { runId: id, reviewedSha256: 'a'.repeat(64) }))).toMatch(/does not match/);

    // The user refuses through the approval contract the UI uses.
    const refusing = call(client, 'run_apply', { runId: id, reviewedSha256: result.patchSha256, waitSec: 60 });
    const asked = await waitForRequest(fx);
    expect(asked).toMatchObject({ runId: id, client: 'airlock-test-client 1.0.0', reviewedSha256: result.patchSha256 });
    expect(asked.files.sort()).toEqual(['src/app.js', 'src/new/thing.txt']);
    expect(await fx.services.mcp.answerApply({ requestId: asked.requestId, approved: false })).toEqual({ answered: true });
    expect(errorText(await refusing)).toMatch(/refused/);
    expect(await treeDigest(projectDir)).toBe(before);

    // The user approves: exactly the reviewed bytes land in the project.
    const applying = call(client, 'run_apply', { runId: id, reviewedSha256: result.patchSha256, waitSec: 60 });
    const again = await waitForRequest(fx);
    expect(await fx.services.mcp.answerApply({ requestId: again.requestId, approved: true })).toEqual({ answered: true });
    const applied = await applying;
    expect(applied.isError).toBeFalsy();
    expect((applied.structuredContent as { approvedBy: string; applied: string[] }).approvedBy).toBe('user');
    expect(await readFile(path.join(projectDir, 'src/app.js'), 'utf8')).toBe('export const answer = 2;\n');
    expect(await readFile(path.join(projectDir, 'src/new/thing.txt'), 'utf8')).toBe('made over mcp\n');
    const applyLog = await fx.services.audit.read({ runId: id, offset: 0, limit: 500 });
    const apply = applyLog.records.find((r) => r.type === 'apply');
    expect(apply?.data).toMatchObject({ approval: { via: 'mcp', by: 'user', client: 'airlock-test-client 1.0.0' } });
    expect(await fx.services.mcp.answerApply({ requestId: again.requestId, approved: true })).toEqual({ answered: false });
  }, 600_000);

  it('a long output: the result carries head and tail sized for an agent, the whole kept output is a linked resource', async () => {
    const { sandboxId } = await ok<{ sandboxId: string }>(client, 'sandbox_create', { projectDir });
    try {
      // 3 MB of stdout: a result of this size would overflow a client's context (they cap near 25k tokens).
      const r = await call(client, 'sandbox_exec', { sandboxId, command: "echo START-MARK; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END-MARK; echo small-err >&2" });
      expect(r.isError).toBeFalsy();
      expect(JSON.stringify(r).length).toBeLessThan(64 * 1024);
      const value = r.structuredContent as { stdout: string; stderr: string; truncated: boolean; outputBytes: number; outputUris?: { stdout?: string; stderr?: string } };
      expect(value.truncated).toBe(true);
      expect(value.outputBytes).toBeGreaterThan(3_000_000);
      expect(value.stdout).toMatch(/^START-MARK\n/);
      expect(value.stdout).toMatch(/END-MARK\n$/);
      expect(value.stderr).toBe('small-err\n');
      expect(value.outputUris?.stderr).toBeUndefined();
      const uri = value.outputUris?.stdout;
      expect(uri).toMatch(new RegExp(`^airlock://runs/${sandboxId}/output/\\d+/stdout$`));
      expect(r.content).toContainEqual(expect.objectContaining({ type: 'resource_link', uri, mimeType: 'text/plain' }));
      const read = await client.readResource({ uri: uri! });
      const kept = (read.contents[0] as { text: string }).text;
      expect(kept.length).toBeGreaterThan(1_000_000);
      expect(kept.startsWith('START-MARK\n')).toBe(true);
      expect(kept).toContain('END-MARK');
      // Short output stays whole, with no link.
      const small = await call(client, 'sandbox_exec', { sandboxId, command: 'echo hi' });
      expect(small.content.map((c) => c.type)).toEqual(['text']);
      expect((small.structuredContent as { stdout: string }).stdout).toBe('hi\n');
    } finally {
      await ok(client, 'sandbox_destroy', { sandboxId });
    }
  });

  it('environment: a devcontainer only once the user accepted it (a client cannot), image:REF only when on the engine', async () => {
    const base = await fx.core.image('base');
    const envProject = await fx.project({ 'README.md': '# env\n', '.devcontainer/devcontainer.json': JSON.stringify({ image: base, containerEnv: { MCP_ENV_MARK: 'from-devcontainer' } }) });
    // Granted in Settings, as the user does (the server reads them on each call).
    await fx.services.settings.update({ mcpProjects: [{ dir: envProject }] });
    const runsBefore = (await fx.core.store.list()).runs.length;
    const mark = async (sandboxId: string) => (await ok<{ stdout: string }>(client, 'sandbox_exec', { sandboxId, command: 'echo "mark=${MCP_ENV_MARK:-unset}"' })).stdout.trim();

    // Asked for by name but not accepted: refused before anything is made, saying how the user accepts it.
    const refused = errorText(await call(client, 'sandbox_create', { projectDir: envProject, environment: 'devcontainer' }));
    expect(refused).toMatch(/^FORBIDDEN: The project environment is not trusted yet: \.devcontainer\/devcontainer\.json/);
    expect(refused).toContain('An MCP client cannot accept it');
    expect(refused).toContain('--trust-environment');
    expect(refused).toContain('environment "airlock"');
    // A client cannot slip the acceptance in either.
    expect(errorText(await call(client, 'sandbox_create', { projectDir: envProject, environment: 'devcontainer', trustEnvironment: true }))).toMatch(/trustEnvironment/);
    // Not on the engine: refused, never pulled.
    expect(errorText(await call(client, 'sandbox_create', { projectDir: envProject, environment: 'image:airlock-test-absent:never' }))).toMatch(/^NOT_FOUND: The image airlock-test-absent:never is not on the engine, and an MCP client cannot make Airlock pull one/);
    expect((await fx.core.store.list()).runs.length).toBe(runsBefore);

    // auto (absent) finds it untrusted: Airlock's own image runs, as for a run.
    const auto = await ok<{ sandboxId: string; environment: string }>(client, 'sandbox_create', { projectDir: envProject });
    expect(auto.environment).toBe('airlock');
    expect(await mark(auto.sandboxId)).toBe('mark=unset');
    await ok(client, 'sandbox_destroy', { sandboxId: auto.sandboxId });

    // The user accepts it (what the New run form and --trust-environment record): now it is used.
    const resolved = await resolveEnvironment(envProject, parseEnvironmentChoice('devcontainer'), { env: process.env });
    if (resolved.kind !== 'devcontainer') throw new Error('the devcontainer was not found');
    await new EnvironmentTrust(envProject, fx.home).accept(resolved.config);
    const dev = await ok<{ sandboxId: string; environment: string }>(client, 'sandbox_create', { projectDir: envProject, environment: 'devcontainer' });
    expect(dev.environment).toBe('devcontainer:.devcontainer/devcontainer.json');
    expect(await mark(dev.sandboxId)).toBe('mark=from-devcontainer');
    const record = await fx.services.runs.get({ runId: dev.sandboxId });
    expect(record.environment).toMatchObject({ kind: 'devcontainer', baseImage: base });
    const destroyed = await ok<{ wipe: { verified: boolean } }>(client, 'sandbox_destroy', { sandboxId: dev.sandboxId });
    expect(destroyed.wipe.verified).toBe(true);
    expect(await leftoversOf(dev.sandboxId)).toEqual([]);
  }, 900_000);

  it('hostile input: paths outside the workspace, unknown tools and fields, an oversized write, 100 concurrent calls — clear errors, and it keeps serving', async () => {
    const { sandboxId } = await ok<{ sandboxId: string }>(client, 'sandbox_create', { projectDir });
    for (const p of ['../etc/passwd', '/etc/passwd', 'src/../../x', 'a\0b']) {
      expect(errorText(await call(client, 'sandbox_read_file', { sandboxId, path: p }))).toMatch(/outside the workspace|NUL/);
      expect(errorText(await call(client, 'sandbox_write_file', { sandboxId, path: p, content: 'x' }))).toMatch(/outside the workspace|NUL/);
    }
    expect(errorText(await call(client, 'sandbox_exec', { sandboxId, command: 'pwd', cwd: '/etc' }))).toMatch(/outside the workspace/);
    expect(errorText(await call(client, 'no_such_tool', {}))).toMatch(/not found|no_such_tool/i);
    expect(errorText(await call(client, 'sandbox_exec', { sandboxId, command: 'true', sneaky: 1 }))).toMatch(/sneaky|unrecognized/i);
    expect(errorText(await call(client, 'sandbox_exec', { sandboxId: 'not-an-id', command: 'true' }))).toMatch(/run id|sandboxId/);
    const big = 'x'.repeat(10 * 1024 * 1024 + 1);
    expect(errorText(await call(client, 'sandbox_write_file', { sandboxId, path: 'big.txt', content: big }))).toMatch(/at most \d+.*Nothing was written/);
    expect((await ok<{ exitCode: number }>(client, 'sandbox_exec', { sandboxId, command: 'test ! -e big.txt' })).exitCode).toBe(0);

    const many = await Promise.all(Array.from({ length: 100 }, (_, i) => ok<{ stdout: string; exitCode: number }>(client, 'sandbox_exec', { sandboxId, command: `echo n${i}` })));
    many.forEach((r, i) => expect(r.stdout.trim()).toBe(`n${i}`));

    // Caps: sandboxes per client.
    const more = [];
    for (let i = 0; i < 3; i++) more.push((await ok<{ sandboxId: string }>(client, 'sandbox_create', { projectDir })).sandboxId);
    expect(errorText(await call(client, 'sandbox_create', { projectDir }))).toMatch(/cap is 4/);
    for (const id of [sandboxId, ...more]) await ok(client, 'sandbox_destroy', { sandboxId: id });
    for (const id of [sandboxId, ...more]) expect(await leftoversOf(id)).toEqual([]);
    expect((await client.listTools()).tools.length).toBe(TOOLS.length);
  }, 600_000);

  it('malformed JSON-RPC gets a parse error and the server keeps serving; a client that vanishes mid-exec leaves no sandbox', async () => {
    const child = spawn(process.execPath, [cli, 'mcp', '--project', projectDir], { env: { ...process.env, AIRLOCK_HOME: fx.home }, stdio: ['pipe', 'pipe', 'pipe'] });
    const lines: Array<Record<string, unknown>> = [];
    let buf = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      buf += d;
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        lines.push(JSON.parse(buf.slice(0, i)) as Record<string, unknown>);
        buf = buf.slice(i + 1);
      }
    });
    const send = (m: unknown) => child.stdin.write(`${typeof m === 'string' ? m : JSON.stringify(m)}\n`);
    const reply = async (id: number) => {
      for (let i = 0; i < 1200; i++) {
        const hit = lines.find((l) => l.id === id);
        if (hit) return hit;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`no reply to ${id}`);
    };
    send('{"jsonrpc":"2.0","id":1,"method":"initialize","params":{');
    send({ jsonrpc: '2.0', id: 2, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'vanishing', version: '0' } } });
    expect((await reply(2)).result).toBeTruthy();
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 3, method: 'no/such/method' });
    expect((await reply(3)).error).toMatchObject({ code: -32601 });
    send({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'sandbox_create', arguments: { projectDir } } });
    const created = (await reply(4)).result as { structuredContent: { sandboxId: string } };
    const id = created.structuredContent.sandboxId;
    // The command says it is running (a progress notification of its output) before the client goes.
    send({ jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'sandbox_exec', arguments: { sandboxId: id, command: 'echo running; exec sleep 300' }, _meta: { progressToken: 'exec-5' } } });
    await vi.waitFor(() => expect(lines.some((l) => l.method === 'notifications/progress' && JSON.stringify(l.params).includes('running'))).toBe(true), { timeout: 60_000, interval: 100 });
    child.stdin.end(); // the client goes away mid-exec
    const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    expect(await leftoversOf(id)).toEqual([]);
    const record = await fx.services.runs.get({ runId: id });
    expect(record.status).toBe('done');
    expect(record.agent).toBe('mcp');
  }, 600_000);

  it('a crashed airlock mcp: its sandbox is reaped and the session marked interrupted at the next start', async () => {
    // --foreground: no worker to finish the job when this process dies.
    const crashing = stdioClient(fx.home, ['--foreground', '--project', projectDir]);
    await crashing.client.connect(crashing.transport);
    const { sandboxId } = await ok<{ sandboxId: string }>(crashing.client, 'sandbox_create', { projectDir });
    expect((await leftoversOf(sandboxId)).length).toBeGreaterThan(0);
    process.kill(crashing.transport.pid as number, 'SIGKILL');
    await crashing.client.close().catch(() => undefined);
    // The next start (any Airlock process on this home) recovers.
    const next = stdioClient(fx.home);
    await next.client.connect(next.transport);
    try {
      // Tools answer once the core has started, recovery included.
      expect(await ok(next.client, 'run_status', { runId: sandboxId })).toMatchObject({ status: 'interrupted', agent: 'mcp' });
      expect(await leftoversOf(sandboxId)).toEqual([]);
    } finally {
      await next.client.close();
    }
  }, 600_000);
});

describe.skipIf(!docker.ok)('the MCP door over Streamable HTTP on loopback (real Docker, SDK client)', () => {
  let fx: RunFixture;
  let door: McpHttpServer;
  let projectDir: string;

  beforeAll(async () => {
    fx = await createRunFixture();
    projectDir = await fx.project();
    await fx.services.settings.update({ mcpProjects: [{ dir: projectDir }] });
    door = await startMcpHttpServer({ core: fx.core, services: fx.services, approvals: new ApplyApprovals(fx.home), grants: new ClientGrants({ home: fx.home, settings: fx.core.settings }), allowApply: false });
  }, 600_000);
  afterAll(async () => {
    await door?.close();
    await fx?.close();
  });

  const httpClient = async (headers: Record<string, string>, url = door.url) => {
    const client = new Client({ name: 'http-client', version: '2.0' });
    const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
    await client.connect(transport);
    return { client, transport };
  };
  const gone = async (runId: string) => {
    for (let i = 0; i < 150 && (await fx.services.activeRunIds()).includes(runId); i++) await new Promise((r) => setTimeout(r, 200));
    expect(await leftoversOf(runId)).toEqual([]);
    expect((await fx.services.runs.get({ runId })).wipe?.verified).toBe(true);
  };

  it('refuses a missing token, a foreign Origin and a foreign Host', async () => {
    await expect(httpClient({})).rejects.toThrow(/401|Unauthorized/);
    await expect(httpClient({ authorization: `Bearer ${door.token}`, origin: 'http://evil.invalid' })).rejects.toThrow(/403|Forbidden/);
    const status = await rawPost(door.port, { host: `evil.invalid:${door.port}`, authorization: `Bearer ${door.token}` });
    expect(status).toBe(403);
  });

  it('drives a sandbox end to end; the sandbox cannot reach the door; closing the session wipes its sandboxes', async () => {
    const { client, transport } = await httpClient({ authorization: `Bearer ${door.token}` });
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(TOOLS);
    const { sandboxId } = await ok<{ sandboxId: string }>(client, 'sandbox_create', { projectDir });
    const progress: string[] = [];
    const ran = await ok<{ exitCode: number; stdout: string }>(client, 'sandbox_exec', { sandboxId, command: 'for i in 1 2 3; do echo tick$i; sleep 0.2; done' }, (m) => progress.push(m));
    expect(ran.stdout).toBe('tick1\ntick2\ntick3\n');
    expect(progress.length).toBeGreaterThanOrEqual(2);
    // From inside: the door's port on loopback is the sandbox's own loopback — nothing listens.
    const probe = await ok<{ stdout: string }>(client, 'sandbox_exec', { sandboxId, command: `node -e "require('net').connect(${door.port},'127.0.0.1').on('connect',()=>console.log('REACHED')).on('error',e=>console.log(e.code))"` });
    expect(probe.stdout.trim()).toBe('ECONNREFUSED');
    await ok(client, 'sandbox_write_file', { sandboxId, path: 'notes.txt', content: 'changed\n' });
    const diff = await ok<{ files: Array<{ path: string }> }>(client, 'sandbox_diff', { sandboxId });
    expect(diff.files.map((f) => f.path)).toEqual(['notes.txt']);
    // The client ends its session (HTTP DELETE): its sandboxes are wiped.
    await transport.terminateSession();
    await client.close();
    await gone(sandboxId);
  }, 600_000);

  it('40 clients that connect and leave without ending their sessions, then a new client still works; localhost is a fine Host', async () => {
    for (let i = 0; i < 40; i++) {
      const { client } = await httpClient({ authorization: `Bearer ${door.token}` });
      await client.listTools();
      await client.close(); // no DELETE
    }
    expect(door.sessions).toBeLessThanOrEqual(32);
    const { client, transport } = await httpClient({ authorization: `Bearer ${door.token}` }, door.url.replace('127.0.0.1', 'localhost'));
    expect((await client.listTools()).tools.length).toBe(TOOLS.length);
    await transport.terminateSession();
    await client.close();
  }, 300_000);

  it('a client that vanishes without ending its session: its sandbox is wiped after the idle timeout', async () => {
    const idle = await startMcpHttpServer({ core: fx.core, services: fx.services, approvals: new ApplyApprovals(fx.home), grants: new ClientGrants({ home: fx.home, settings: fx.core.settings }), allowApply: false, limits: { idleMs: 1500 } });
    try {
      const { client } = await httpClient({ authorization: `Bearer ${idle.token}` }, idle.url);
      const { sandboxId } = await ok<{ sandboxId: string }>(client, 'sandbox_create', { projectDir });
      await client.close(); // no DELETE: the client just goes
      await gone(sandboxId);
      expect(JSON.stringify((await fx.services.audit.read({ runId: sandboxId, offset: 0, limit: 500 })).records)).toMatch(/MCP session ended: idle for \d+ s/);
    } finally {
      await idle.close();
    }
  }, 600_000);
});

async function waitForRequest(fx: RunFixture) {
  for (let i = 0; i < 300; i++) {
    const [first] = await fx.services.mcp.applyRequests({});
    if (first) return first;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('no apply request reached the app');
}

function httpGet(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    request(url, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d)).on('end', () => resolve(body));
    })
      .on('error', reject)
      .end();
  });
}

function rawPost(port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '0' } } }));
  });
}
