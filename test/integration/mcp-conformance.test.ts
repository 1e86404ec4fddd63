import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApplyApprovals } from '../../core/mcp/apply-approvals';
import { startMcpHttpServer, type McpHttpServer } from '../../core/mcp/mcp-http';
import { RESOURCE_NOT_FOUND } from '../../core/mcp/mcp-resources';
import { ClientGrants } from '../../core/runs/client-grants';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, type RunFixture } from '../support/run-fixture';
import { startTokenShim, type TokenShim } from '../support/token-shim';

const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
/** The suite needs Node ≥ 22; the `node` devDependency provides it whatever Node runs the tests. */
const node22 = path.join(root, 'node_modules', 'node', 'bin', 'node');
/** The suite (a devDependency); `AIRLOCK_TEST_CONFORMANCE_DIR` names another install of it. */
const suite = path.join(process.env.AIRLOCK_TEST_CONFORMANCE_DIR || path.join(root, 'node_modules', '@modelcontextprotocol', 'conformance'), 'dist', 'index.js');

/**
 * The official conformance suite's server scenarios that test Airlock's door: each must pass, every
 * check SUCCESS (or INFO), none FAILURE or WARNING.
 */
const APPLIES = ['server-initialize', 'ping', 'tools-list', 'tools-call-error', 'resources-list', 'server-sse-multiple-streams', 'dns-rebinding-protection'] as const;

/**
 * The others, and why they do not apply (docs/architecture.md §17). Most call tools, prompts or
 * resources of the suite's own reference server (`test_simple_text`, `test://static-text`, …).
 * A scenario a newer suite adds fails the test until it is put in one list or the other.
 */
const NOT_APPLICABLE: Record<string, string> = {
  'logging-set-level': 'Airlock sends no log messages, so it declares no logging capability (logging/setLevel is "method not found")',
  'completion-complete': 'no prompts and no completable arguments: Airlock declares no completions capability',
  'tools-call-simple-text': "calls the reference server's test_simple_text tool",
  'tools-call-image': "calls the reference server's test_image_content tool (Airlock's tools return text and structured content)",
  'tools-call-audio': "calls the reference server's test_audio_content tool",
  'tools-call-embedded-resource': "calls the reference server's test_embedded_resource tool",
  'tools-call-mixed-content': "calls the reference server's test_multiple_content_types tool",
  'tools-call-with-logging': "calls the reference server's test_tool_with_logging tool (Airlock reports progress, not log messages)",
  'tools-call-with-progress': "calls the reference server's test_tool_with_progress tool; Airlock's own progress is tested with the SDK client in mcp-server.test.ts",
  'tools-call-sampling': 'Airlock never asks the client for a model completion (sampling)',
  'tools-call-elicitation': 'Airlock never asks the client for input (elicitation): consent is asked of the user in the Airlock app, never of the client',
  'elicitation-sep1034-defaults': 'elicitation: not used (as above)',
  'elicitation-sep1330-enums': 'elicitation: not used (as above)',
  'json-schema-2020-12': "lists the reference server's json_schema_2020_12_tool",
  'server-sse-polling': "calls the reference server's test_reconnection tool; Airlock keeps no event store, so a dropped stream is not resumed (the call's sandbox stays the client's)",
  'resources-read-text': "reads the reference server's test://static-text",
  'resources-read-binary': "reads the reference server's test://static-binary",
  'resources-templates-read': "reads the reference server's test://template/{id}/data",
  'resources-subscribe': 'Airlock declares no resource subscriptions',
  'resources-unsubscribe': 'Airlock declares no resource subscriptions',
  'prompts-list': 'Airlock has no prompts',
  'prompts-get-simple': 'Airlock has no prompts',
  'prompts-get-with-args': 'Airlock has no prompts',
  'prompts-get-embedded-resource': 'Airlock has no prompts',
  'prompts-get-with-image': 'Airlock has no prompts',
};

interface Check {
  id: string;
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  errorMessage?: string;
}

const docker = await requirePrerequisite('docker');

describe.skipIf(!docker.ok)('the official MCP conformance suite against the HTTP door', () => {
  let fx: RunFixture;
  let door: McpHttpServer;
  let shim: TokenShim;
  let out: string;

  beforeAll(async () => {
    fx = await createRunFixture();
    door = await startMcpHttpServer({ core: fx.core, services: fx.services, approvals: new ApplyApprovals(fx.home), grants: new ClientGrants({ home: fx.home, settings: fx.core.settings }), allowApply: false });
    shim = await startTokenShim(door.port, door.token);
    out = await mkdtemp(path.join(os.tmpdir(), 'airlock-conformance-'));
  }, 600_000);
  afterAll(async () => {
    await shim?.close();
    await door?.close();
    await fx?.close();
    if (out) await rm(out, { recursive: true, force: true });
  });

  it('knows every server scenario of the suite: each applies or says why not', async () => {
    const list = await run(node22, [suite, 'list', '--server'], { cwd: out });
    const names = [...list.stdout.matchAll(/^\s+- ([a-z0-9-]+)/gm)].map((m) => m[1]!);
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((n) => !(APPLIES as readonly string[]).includes(n) && !(n in NOT_APPLICABLE))).toEqual([]);
  });

  it('what the suite does not judge: the latest protocol version, no logging declared, the specification\'s error codes', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(door.url), { requestInit: { headers: { authorization: `Bearer ${door.token}` } } });
    const client = new Client({ name: 'protocol-check', version: '1.0.0' });
    await client.connect(transport);
    try {
      expect(transport.protocolVersion).toBe(LATEST_PROTOCOL_VERSION);
      const caps = client.getServerCapabilities();
      expect(caps?.tools).toBeTruthy();
      expect(caps?.logging).toBeUndefined();
      await expect(client.setLoggingLevel('info')).rejects.toMatchObject({ code: -32601 });
      // A run that does not exist: the specification's "Resource not found", with the URI.
      const missing = 'airlock://runs/r-zzzz-0badc0de/terminal';
      const err = await client.readResource({ uri: missing }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(McpError);
      expect(err).toMatchObject({ code: RESOURCE_NOT_FOUND, data: { uri: missing } });
      expect(await client.readResource({ uri: 'airlock://runs/not-a-run/terminal' }).catch((e: unknown) => e)).toMatchObject({ code: -32602 });
      // An ended or unknown session: 404 with the transport's -32001, so clients start a new one.
      const res = await fetch(door.url, { method: 'POST', headers: { authorization: `Bearer ${door.token}`, 'mcp-session-id': 'no-such-session', 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32001);
    } finally {
      await transport.terminateSession();
      await client.close();
    }
  });

  it.each(APPLIES)('%s passes through the token shim, against the real door', async (scenario) => {
    const dir = path.join(out, scenario);
    const result = await run(node22, [suite, 'server', '--url', shim.url, '--scenario', scenario, '-o', dir], { cwd: out, timeout: 120_000 }).then(
      () => ({ code: 0, stderr: '' }),
      (e: { code: number; stderr: string }) => ({ code: e.code, stderr: e.stderr }),
    );
    const [saved] = await readdir(dir);
    const checks: Check[] = JSON.parse(await readFile(path.join(dir, saved!, 'checks.json'), 'utf8'));
    const judged = checks.filter((c) => c.status !== 'INFO');
    expect(judged.length, 'the scenario judged something').toBeGreaterThan(0);
    expect(judged.filter((c) => c.status !== 'SUCCESS').map((c) => `${c.id}: ${c.status} ${c.errorMessage ?? ''}`)).toEqual([]);
    expect(result.code, result.stderr.slice(-2000)).toBe(0);
  });
});
