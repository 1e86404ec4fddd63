import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, afterEach, describe, expect, it } from 'vitest';
import type { AgentEvent } from '../../../contracts/agent-events';
import { loadAgentBundle } from '../../../core/agents/agent-bundle';
import { builtinAdapter } from '../../../core/agents/builtin-adapter';
import { ChannelClient } from '../../../core/channel/channel-client';
import { startLocalHelper, type LocalHelper } from '../../../core/channel/local-helper';
import { runHostCommand } from '../../../core/runs/host-command';
import type { LiveAgentRun } from '../../../core/runs/run-context';
import { Secret } from '../../../core/keys/secret';
import type { ResolvedMcpServer } from '../../../core/network/mcp-gateway/mcp-server-registry';
import { GATEWAY_PATH, openRunMcpGateway, SCRUBBED, type RunMcpGateway } from '../../../core/network/mcp-gateway/run-mcp-gateway';
import { startFakeUpstream, type FakeUpstream, type ScriptedTurn } from '../../../test/fixtures/fake-upstream';
import { MCP_CANARY, startLoopbackMcpServer, type LoopbackMcpServer } from '../../../test/support/mcp-upstream';

/**
 * The built-in agent, bundled exactly as it ships, run on the host as a child process with a temp
 * folder standing in for /workspace, against the scripted fake upstream in both wire formats. The
 * commands it asks for are run as in a run: by the host's own code (runHostCommand) through a
 * channel, here to a helper on this machine.
 */

const TOKEN = `airlock-run-token-${'c0ffee'.repeat(8)}`;
let bundleDir: string;
let workspace: string;
let upstream: FakeUpstream;
let helper: LocalHelper;
let channel: ChannelClient;

beforeAll(async () => {
  helper = await startLocalHelper({ env: process.env });
  channel = await ChannelClient.connect(helper.stream);
  const { files } = await loadAgentBundle();
  bundleDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-agent-bundle-'));
  for (const [name, content] of Object.entries(files)) await writeFile(path.join(bundleDir, name), content);
});
afterAll(async () => {
  channel?.dispose();
  await helper?.dispose();
  await rm(bundleDir, { recursive: true, force: true });
});
beforeEach(async () => {
  workspace = await mkdtemp(path.join(os.tmpdir(), 'airlock-agent-ws-'));
});
afterEach(async () => {
  await upstream?.close();
  await rm(workspace, { recursive: true, force: true });
});

interface AgentRun {
  code: number | null;
  events: AgentEvent[];
  stdout: string;
  stderr: string;
}

type Format = 'anthropic' | 'openai';

async function runAgent(format: Format, opts: { env?: Record<string, string>; commandEnv?: Record<string, string>; answer?: (req: { id: string; command: string }) => boolean } = {}): Promise<AgentRun> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: workspace,
    AIRLOCK_TASK: 'Change the greeting in hello.txt to say airlock.',
    AIRLOCK_PROVIDER_FORMAT: format,
    AIRLOCK_MODEL: 'fake-model',
    AIRLOCK_WORKSPACE: workspace,
    AIRLOCK_RETRIES: '0',
    ...(format === 'anthropic' ? { ANTHROPIC_BASE_URL: upstream.url, ANTHROPIC_API_KEY: TOKEN } : { OPENAI_BASE_URL: `${upstream.url}/v1`, OPENAI_API_KEY: TOKEN }),
    ...opts.env,
  };
  const child = spawn(process.execPath, [path.join(bundleDir, 'agent.js')], { cwd: workspace, env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  // The host's own parser, and the host's own way of running the commands the agent asks for.
  const parser = builtinAdapter.createParser();
  const events: AgentEvent[] = [];
  const run = {
    kind: 'agent',
    made: { sandbox: { channel } },
    agent: { process: { write: (d: string) => child.stdin.write(d) }, grant: { tokenBytes: Buffer.from(TOKEN) } },
    hostCommands: new Set(),
    commandEnv: { PATH: env.PATH, HOME: workspace, ...opts.commandEnv },
  } as unknown as LiveAgentRun;
  const commands: Promise<void>[] = [];
  const take = (batch: AgentEvent[]) => {
    for (const event of batch) {
      events.push(event);
      if (event.type === 'approval_request' && opts.answer) {
        child.stdin.write(`${JSON.stringify({ type: 'approval_response', id: event.id, approved: opts.answer(event) })}\n`);
      }
      if (event.type === 'command_request') commands.push(runHostCommand(run, event, (e) => events.push(e)));
    }
  };
  child.stdout.on('data', (d: Buffer) => {
    stdout += d.toString('latin1');
    take(parser.push(d));
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
  take(parser.end());
  await Promise.all(commands);
  return { code, events, stdout, stderr };
}

function ofType<T extends AgentEvent['type']>(run: AgentRun, type: T): Extract<AgentEvent, { type: T }>[] {
  return run.events.filter((e): e is Extract<AgentEvent, { type: T }> => e.type === type);
}

/** The tool results the agent sent back to the model in request `n`. */
function toolResultsSent(format: Format, n: number): string[] {
  const body = upstream.requests.filter((r) => r.method === 'POST')[n]!.body as { messages: Record<string, unknown>[] };
  if (format === 'anthropic') {
    const last = body.messages[body.messages.length - 1]!;
    return (last.content as { type: string; content: string }[]).filter((c) => c.type === 'tool_result').map((c) => c.content);
  }
  const trailing: string[] = [];
  for (let i = body.messages.length - 1; i >= 0 && body.messages[i]!.role === 'tool'; i--) trailing.unshift(body.messages[i]!.content as string);
  return trailing;
}

async function start(script: ScriptedTurn[], expectedKey = TOKEN): Promise<void> {
  upstream = await startFakeUpstream({ script, expectedKey });
}

describe.each<Format>(['anthropic', 'openai'])('built-in agent, %s format', (format) => {
  it('keeps its conversation in AIRLOCK_TRANSCRIPT and continues it in a follow-up turn (docs/architecture.md §15)', async () => {
    const transcript = path.join(workspace, '.session', 'transcript.json');
    await start([
      { toolCalls: [{ name: 'write_file', input: { path: 'plan.md', content: 'turn-one-plan\n' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'wrote the plan' } }] },
      { toolCalls: [{ name: 'read_file', input: { path: 'plan.md' } }] },
      { text: 'Both turns done.' },
    ]);
    const first = await runAgent(format, { env: { AIRLOCK_TRANSCRIPT: transcript } });
    expect(first.code).toBe(0);
    const kept = JSON.parse(await readFile(transcript, 'utf8')) as { version: number; format: string; messages: unknown[] };
    expect(kept).toMatchObject({ version: 1, format });
    const second = await runAgent(format, { env: { AIRLOCK_TRANSCRIPT: transcript, AIRLOCK_RESUME: '1', AIRLOCK_TASK: 'Also handle the empty case.' } });
    expect(second.code).toBe(0);
    expect(ofType(second, 'agent_error')).toEqual([]);
    // The follow-up's first request carries the first turn: its task, its tool call, its result; then the new task.
    const posts = upstream.requests.filter((r) => r.method === 'POST');
    const sent = JSON.stringify((posts[2]!.body as { messages: unknown[] }).messages);
    expect(sent).toContain('Change the greeting in hello.txt');
    expect(sent).toContain('turn-one-plan');
    expect(sent.indexOf('Also handle the empty case.')).toBeGreaterThan(sent.indexOf('turn-one-plan'));
    expect((posts[2]!.body as { messages: unknown[] }).messages.length).toBeGreaterThan((posts[1]!.body as { messages: unknown[] }).messages.length);
    // A transcript in the other wire format is refused and said, and the turn starts fresh.
    await writeFile(transcript, JSON.stringify({ ...kept, format: format === 'anthropic' ? 'openai' : 'anthropic' }));
    upstream.setScript([{ text: 'fresh' }]);
    const third = await runAgent(format, { env: { AIRLOCK_TRANSCRIPT: transcript, AIRLOCK_RESUME: '1' } });
    expect(third.code).toBe(0);
    expect(ofType(third, 'agent_error')[0]?.message).toMatch(/could not be continued.*format/);
  });

  it('reads a file, runs a command, edits a file and finishes', async () => {
    await writeFile(path.join(workspace, 'hello.txt'), 'hello world\nsecond line\n');
    await start([
      { text: 'Let me look.', toolCalls: [{ name: 'read_file', input: { path: 'hello.txt' } }], usage: { input: 100, output: 10 } },
      { toolCalls: [{ name: 'run_command', input: { command: 'echo "k=${ANTHROPIC_API_KEY}${OPENAI_API_KEY}end"; ls; echo oops >&2; exit 3' } }], usage: { input: 120, output: 12 } },
      { toolCalls: [{ name: 'edit_file', input: { path: 'hello.txt', old_text: 'hello world', new_text: 'hello airlock' } }] },
      { text: 'All done.', toolCalls: [{ name: 'finish', input: { summary: 'Changed the greeting.' } }] },
    ]);
    const run = await runAgent(format);
    expect(run.code).toBe(0);
    expect(await readFile(path.join(workspace, 'hello.txt'), 'utf8')).toBe('hello airlock\nsecond line\n');

    expect(ofType(run, 'assistant_text').map((e) => e.delta).join('')).toBe('Let me look.All done.');
    expect(ofType(run, 'tool_call').map((e) => e.name)).toEqual(['read_file', 'run_command', 'edit_file', 'finish']);
    const results = ofType(run, 'tool_result');
    expect(results[0]).toMatchObject({ ok: true, output: '1\thello world\n2\tsecond line' });
    expect(results[1]!.ok).toBe(false);
    expect(results[1]!.output).toMatch(/^exit code 3\n/);
    expect(results[2]).toMatchObject({ ok: true });

    const started = ofType(run, 'command_started');
    expect(started).toHaveLength(1);
    expect(started[0]).toMatchObject({ cwd: workspace, argv: ['bash', '-lc', expect.stringContaining('echo')] });
    const output = ofType(run, 'command_output');
    // The run token stays with the agent: commands do not see it.
    expect(output.filter((e) => e.stream === 'stdout').map((e) => e.data).join('')).toBe('k=end\nhello.txt\n');
    expect(output.filter((e) => e.stream === 'stderr').map((e) => e.data).join('')).toBe('oops\n');
    expect(ofType(run, 'command_exited')[0]).toMatchObject({ id: started[0]!.id, exitCode: 3, timedOut: false, outputBytes: 21 });
    expect(ofType(run, 'file_changed')).toEqual([{ type: 'file_changed', paths: ['hello.txt'] }]);
    expect(ofType(run, 'usage').slice(0, 2)).toEqual([
      { type: 'usage', inputTokens: 100, outputTokens: 10 },
      { type: 'usage', inputTokens: 120, outputTokens: 12 },
    ]);
    expect(ofType(run, 'finished')).toEqual([{ type: 'finished', summary: 'Changed the greeting.', reason: 'finish' }]);
    expect(run.events[run.events.length - 1]!.type).toBe('finished');

    // The model saw the tool results, and every call carried the run token the provider's way.
    const posts = upstream.requests.filter((r) => r.method === 'POST');
    expect(posts).toHaveLength(4);
    expect(toolResultsSent(format, 1)[0]).toContain('1\thello world');
    expect(toolResultsSent(format, 2).join('')).toContain('exit code 3');
    for (const r of posts) {
      if (format === 'anthropic') {
        expect(r.path).toBe('/v1/messages');
        expect(r.headers['x-api-key']).toBe(TOKEN);
      } else {
        expect(r.path).toBe('/v1/chat/completions');
        expect(r.headers.authorization).toBe(`Bearer ${TOKEN}`);
      }
      expect((r.body as { stream: boolean }).stream).toBe(true);
    }
    expect(run.stdout).not.toContain(TOKEN);
    expect(run.stderr).not.toContain(TOKEN);
  });

  it('reports edit_file no-match and multi-match to the model, then ends with the model', async () => {
    await writeFile(path.join(workspace, 'a.txt'), 'x = 1\nx = 1\n');
    await start([
      { toolCalls: [{ name: 'edit_file', input: { path: 'a.txt', old_text: 'y = 2', new_text: 'y = 3' } }] },
      { toolCalls: [{ name: 'edit_file', input: { path: 'a.txt', old_text: 'x = 1', new_text: 'x = 2' } }] },
      { text: 'I could not make a unique edit.' },
    ]);
    const run = await runAgent(format);
    expect(run.code).toBe(0);
    const results = ofType(run, 'tool_result');
    expect(results[0]).toMatchObject({ ok: false, output: expect.stringContaining('old_text was not found in a.txt') });
    expect(results[1]).toMatchObject({ ok: false, output: expect.stringContaining('old_text matches 2 times in a.txt') });
    expect(toolResultsSent(format, 1)[0]).toContain('not found');
    expect(toolResultsSent(format, 2)[0]).toContain('matches 2 times');
    expect(await readFile(path.join(workspace, 'a.txt'), 'utf8')).toBe('x = 1\nx = 1\n');
    expect(ofType(run, 'file_changed')).toEqual([]);
    expect(ofType(run, 'finished')).toEqual([{ type: 'finished', summary: 'I could not make a unique edit.', reason: 'end_turn' }]);
  });

  it('stops at the step limit', async () => {
    await start([
      { toolCalls: [{ name: 'run_command', input: { command: 'echo 1' } }] },
      { toolCalls: [{ name: 'run_command', input: { command: 'echo 2' } }] },
      { toolCalls: [{ name: 'run_command', input: { command: 'echo 3' } }] },
    ]);
    const run = await runAgent(format, { env: { AIRLOCK_MAX_STEPS: '2' } });
    expect(run.code).toBe(2);
    expect(ofType(run, 'command_started')).toHaveLength(2);
    expect(upstream.requests.filter((r) => r.method === 'POST')).toHaveLength(2);
    expect(ofType(run, 'finished')[0]).toMatchObject({ reason: 'max_steps' });
  });

  it('asks before each command: a denied one does not run, an approved one does', async () => {
    await start([
      { toolCalls: [{ name: 'run_command', input: { command: 'touch denied.txt' } }] },
      { toolCalls: [{ name: 'run_command', input: { command: 'touch approved.txt' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'ok' } }] },
    ]);
    const asked: string[] = [];
    const run = await runAgent(format, {
      env: { AIRLOCK_APPROVAL: 'ask' },
      answer: (req) => {
        asked.push(req.command);
        return req.command.includes('approved');
      },
    });
    expect(run.code).toBe(0);
    expect(asked).toEqual(['touch denied.txt', 'touch approved.txt']);
    await expect(stat(path.join(workspace, 'denied.txt'))).rejects.toThrow();
    expect((await stat(path.join(workspace, 'approved.txt'))).isFile()).toBe(true);
    expect(ofType(run, 'approval_request').map((e) => e.command)).toEqual(['touch denied.txt', 'touch approved.txt']);
    expect(ofType(run, 'tool_result')[0]).toMatchObject({ ok: false, output: expect.stringContaining('denied') });
    expect(ofType(run, 'command_started').map((e) => e.command)).toEqual(['touch approved.txt']);
  });

  it('turns an upstream 401 into a clear agent_error without the token', async () => {
    await start([{ text: 'never served' }], 'some-other-key');
    const run = await runAgent(format);
    expect(run.code).toBe(1);
    const errors = ofType(run, 'agent_error');
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatchObject({ status: 401, message: expect.stringContaining('HTTP 401, authentication failed') });
    expect(run.stdout).not.toContain(TOKEN);
  });

  it('turns a 429 into agent_error when retries are exhausted, and retries it otherwise', async () => {
    await start([{ status: 429 }]);
    const failed = await runAgent(format);
    expect(failed.code).toBe(1);
    expect(ofType(failed, 'agent_error')[0]).toMatchObject({ status: 429, message: expect.stringContaining('rate limited') });
    upstream.setScript([{ status: 503 }, { toolCalls: [{ name: 'finish', input: { summary: 'after retry' } }] }]);
    const retried = await runAgent(format, { env: { AIRLOCK_RETRIES: '1' } });
    expect(retried.code).toBe(0);
    expect(ofType(retried, 'finished')[0]).toMatchObject({ summary: 'after retry' });
  });
});

describe('built-in agent tools', () => {
  it('kills a command at its timeout, lists and searches files, refuses paths outside the workspace', async () => {
    await writeFile(path.join(workspace, 'notes.md'), 'alpha\nneedle here\nomega\n');
    await writeFile(path.join(workspace, 'blob.bin'), Buffer.from([1, 0, 2, 0, 3]));
    await start([
      { toolCalls: [{ name: 'run_command', input: { command: 'sleep 30 & sleep 30; echo never' } }] },
      { toolCalls: [{ name: 'list_files', input: {} }, { name: 'search', input: { pattern: 'need+le' } }, { name: 'read_file', input: { path: '../../etc/passwd' } }] },
      { toolCalls: [{ name: 'read_file', input: { path: 'notes.md', start_line: 2, end_line: 2 } }, { name: 'write_file', input: { path: 'sub/new.txt', content: 'new' } }, { name: 'read_file', input: { path: 'blob.bin' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] },
    ]);
    const run = await runAgent('anthropic', { env: { AIRLOCK_COMMAND_TIMEOUT_SEC: '1' } });
    expect(run.code).toBe(0);
    expect(ofType(run, 'command_exited')[0]).toMatchObject({ exitCode: null, timedOut: true });
    const results = ofType(run, 'tool_result');
    expect(results[0]).toMatchObject({ ok: false, output: expect.stringContaining('timed out after 1s') });
    expect(results[1]).toMatchObject({ ok: true, output: 'blob.bin\nnotes.md' });
    expect(results[2]).toMatchObject({ ok: true, output: expect.stringMatching(/notes\.md:2:needle here/) });
    expect(results[3]).toMatchObject({ ok: false, output: expect.stringContaining('outside the workspace') });
    expect(results[4]).toMatchObject({ ok: true, output: '2\tneedle here' });
    expect(results[6]).toMatchObject({ ok: false, output: expect.stringContaining('blob.bin is a binary file (5 bytes)') });
    expect(await readFile(path.join(workspace, 'sub/new.txt'), 'utf8')).toBe('new');
    expect(ofType(run, 'file_changed')).toEqual([{ type: 'file_changed', paths: ['sub/new.txt'] }]);
  });

  it('streams all of a long output from the host, and gives the model its head and tail', async () => {
    await start([{ toolCalls: [{ name: 'run_command', input: { command: 'seq 1 20000; printf "caf\\xc3\\xa9 \\xff end"' } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] }]);
    const run = await runAgent('anthropic', { env: { AIRLOCK_OUTPUT_CAP: '2000' } });
    expect(run.code).toBe(0);
    const all = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join('');
    const streamed = ofType(run, 'command_output').map((e) => e.data).join('');
    expect(streamed).toBe(`${all}café \ufffd end`);
    // The output never passes through the agent (which only sees head and tail): the host read it first-hand.
    expect(run.stdout).not.toContain('\n10000\n');
    const bytes = Buffer.byteLength(all) + Buffer.byteLength('café ') + 1 + Buffer.byteLength(' end');
    expect(ofType(run, 'command_exited')[0]).toMatchObject({ exitCode: 0, outputBytes: bytes });
    const sent = toolResultsSent('anthropic', 1)[0]!;
    expect(sent.startsWith('exit code 0\n1\n2\n3\n')).toBe(true);
    expect(sent).toContain(`[${bytes} bytes of output; middle cut]`);
    expect(sent).toMatch(/19999\n20000\ncafé \ufffd end$/);
    expect(sent).not.toContain('\n10000\n');
  });

  it('redacts the run token from command output even when it comes in two pieces', async () => {
    // A command can read the agent's environment (same user); here it prints the token in two writes, apart.
    const command = `printf 'token=%s' "\${LEAK:0:25}"; sleep 0.3; printf '%s!\\n' "\${LEAK:25}"; printf '%s' "\${LEAK:0:10}" >&2`;
    await start([{ toolCalls: [{ name: 'run_command', input: { command } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] }]);
    const run = await runAgent('anthropic', { commandEnv: { LEAK: TOKEN } });
    expect(run.code).toBe(0);
    const output = ofType(run, 'command_output');
    expect(output.filter((e) => e.stream === 'stdout').map((e) => e.data).join('')).toBe('token=[REDACTED]!\n');
    // A start of the token at the very end is not the token: it comes out when the stream ends.
    expect(output.filter((e) => e.stream === 'stderr').map((e) => e.data).join('')).toBe(TOKEN.slice(0, 10));
    expect(run.stdout).not.toContain(TOKEN.slice(0, 25));
    expect(run.stdout).not.toContain(TOKEN.slice(25));
  });

  it('elides the oldest tool outputs when the history outgrows its limit', async () => {
    const big = { name: 'run_command', input: { command: "head -c 1500 /dev/zero | tr '\\0' x" } };
    await start([...Array.from({ length: 6 }, () => ({ toolCalls: [big] })), { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] }]);
    const run = await runAgent('anthropic', { env: { AIRLOCK_CONTEXT_CHARS: '4000' } });
    expect(run.code).toBe(0);
    const last = upstream.requests.filter((r) => r.method === 'POST')[6]!.body as { messages: { role: string; content: unknown }[] };
    const results = last.messages.flatMap((m) => (Array.isArray(m.content) ? (m.content as { type: string; content: string }[]).filter((c) => c.type === 'tool_result') : []));
    expect(results).toHaveLength(6);
    expect(results[0]!.content).toMatch(/^\[elided to save context: \d+ characters/);
    expect(results[5]!.content).toContain('x'.repeat(1500));
    // The first requests went out whole.
    const second = upstream.requests.filter((r) => r.method === 'POST')[1]!.body as { messages: { content: unknown }[] };
    expect(JSON.stringify(second.messages)).toContain('x'.repeat(1500));
  });

  it('drops stream_options for an OpenAI-compatible server that rejects it', async () => {
    await start([
      { status: 400, errorBody: { error: { message: "Unrecognized request argument supplied: stream_options", type: 'invalid_request_error' } } },
      { toolCalls: [{ name: 'finish', input: { summary: 'local server ok' } }] },
    ]);
    const run = await runAgent('openai');
    expect(run.code).toBe(0);
    const posts = upstream.requests.filter((r) => r.method === 'POST');
    expect((posts[0]!.body as Record<string, unknown>).stream_options).toEqual({ include_usage: true });
    expect((posts[1]!.body as Record<string, unknown>).stream_options).toBeUndefined();
    expect(ofType(run, 'finished')[0]).toMatchObject({ summary: 'local server ok' });
  });

  it('reports missing configuration as agent_error', async () => {
    upstream = await startFakeUpstream();
    const run = await runAgent('anthropic', { env: { AIRLOCK_MODEL: '' } });
    expect(run.code).toBe(1);
    expect(ofType(run, 'agent_error')[0]!.message).toContain('AIRLOCK_MODEL');
  });
});

/**
 * The built-in agent as a client of the run's MCP gateway (docs/architecture.md §20 "Agents"): the real
 * gateway in front of a real SDK server that takes only a bearer canary. The agent lists the gateway's
 * tools to the model, calls them there, and never sees the server's token; a deny is a tool error.
 */
describe.each<Format>(['anthropic', 'openai'])('built-in agent with the MCP gateway, %s format', (format) => {
  let mcp: LoopbackMcpServer;
  let gw: RunMcpGateway;
  beforeAll(async () => {
    mcp = await startLoopbackMcpServer();
    const server: ResolvedMcpServer = { entry: { name: 'demo', url: mcp.url, transport: 'http', auth: { type: 'bearer' }, addedAt: new Date().toISOString() }, credential: new Secret(MCP_CANARY) };
    gw = await openRunMcpGateway({ runId: 'run-agent-test', servers: [server], policy: async (tool) => (tool.tool === 'delete_item' ? { decision: 'deny', by: 'policy' } : { decision: 'allow', by: 'policy' }) });
  });
  afterAll(async () => {
    gw?.dispose();
    await mcp?.close();
  });

  it('lists the gateway tools to the model and calls them through it; the token stays at the gateway', async () => {
    await start([
      { toolCalls: [{ name: 'demo__echo', input: { text: 'via the gateway' } }] },
      { toolCalls: [{ name: 'demo__whoami', input: {} }, { name: 'demo__delete_item', input: { id: '9' } }] },
      { toolCalls: [{ name: 'finish', input: { summary: 'used the tools' } }] },
    ]);
    const run = await runAgent(format, { env: { AIRLOCK_MCP_URL: `http://127.0.0.1:${gw.port}${GATEWAY_PATH}`, AIRLOCK_MCP_TOKEN: gw.token } });
    expect(run.code, run.stderr).toBe(0);
    expect(ofType(run, 'agent_error')).toEqual([]);
    // The model was offered the gateway's tools beside the agent's own.
    const first = JSON.stringify(upstream.requests.find((r) => r.method === 'POST')!.body);
    for (const name of ['demo__echo', 'demo__whoami', 'demo__fetch_page', 'run_command']) expect(first).toContain(`"${name}"`);
    // The server got the calls the policy allowed, with its token, from the gateway; never the denied one.
    expect(mcp.calls.slice(-2)).toEqual([
      { tool: 'echo', args: { text: 'via the gateway' }, authorization: `Bearer ${MCP_CANARY}` },
      { tool: 'whoami', args: {}, authorization: `Bearer ${MCP_CANARY}` },
    ]);
    const results = ofType(run, 'tool_result');
    expect(results[0]).toMatchObject({ ok: true, output: 'echo: via the gateway' });
    expect(results[1]!.output).toContain(`Bearer ${SCRUBBED}`);
    expect(results[2]).toMatchObject({ ok: false });
    // The answers went back to the model as tool results.
    expect(toolResultsSent(format, 1)).toEqual(['echo: via the gateway']);
    // Neither the server's token nor the gateway's is in anything the agent wrote.
    expect(run.stdout + run.stderr).not.toContain(MCP_CANARY);
    expect(run.stdout).not.toContain(gw.token);
  });

  it('goes on without MCP tools when the gateway refuses it, and says so', async () => {
    await start([{ toolCalls: [{ name: 'finish', input: { summary: 'no tools' } }] }]);
    const run = await runAgent(format, { env: { AIRLOCK_MCP_URL: `http://127.0.0.1:${gw.port}${GATEWAY_PATH}`, AIRLOCK_MCP_TOKEN: 'not-the-run-token-0000' } });
    expect(run.code).toBe(0);
    expect(ofType(run, 'agent_error')[0]!.message).toMatch(/MCP tools are not available.*401/);
    expect(JSON.stringify(upstream.requests.find((r) => r.method === 'POST')!.body)).not.toContain('demo__echo');
  });
});
