import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFinalStatus } from '../../contracts/runs';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, leftoversOf, treeDigest, type RunFixture } from '../support/run-fixture';

/**
 * What an MCP client may do (docs/architecture.md §17, issue 36): only the folders, network and runs
 * the user granted; asked in the app otherwise; caps that hold under concurrency; cancellation that
 * leaves nothing; --allow-apply never for a flagged file. The official SDK client against the real
 * `airlock mcp` over stdio and a real engine.
 */

const docker = await requirePrerequisite('docker');
const cli = fileURLToPath(new URL('../../bin/airlock.js', import.meta.url));

type Structured = Record<string, unknown>;

async function call(client: Client, name: string, args: Record<string, unknown>, opts: { signal?: AbortSignal; onProgress?: (m: string) => void } = {}): Promise<CallToolResult> {
  return (await client.callTool({ name, arguments: args }, undefined, { timeout: 600_000, ...(opts.signal ? { signal: opts.signal } : {}), ...(opts.onProgress ? { onprogress: (p) => opts.onProgress?.(p.message ?? '') } : {}) })) as CallToolResult;
}
async function ok<T extends Structured>(client: Client, name: string, args: Record<string, unknown>): Promise<T> {
  const r = await call(client, name, args);
  if (r.isError) throw new Error(`${name} failed: ${JSON.stringify(r.content)}`);
  return r.structuredContent as T;
}
function errorText(r: CallToolResult): string {
  expect(r.isError).toBe(true);
  return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('\n');
}

describe.skipIf(!docker.ok)('a client does only what the user granted (airlock mcp over stdio, SDK client, real engine)', () => {
  let fx: RunFixture;
  let granted: string;
  const clients: Client[] = [];

  const connect = async (args: string[], name = 'grants-client'): Promise<Client> => {
    const client = new Client({ name, version: '1.0.0' });
    await client.connect(new StdioClientTransport({ command: process.execPath, args: [cli, 'mcp', ...args], env: { ...(process.env as Record<string, string>), AIRLOCK_HOME: fx.home }, stderr: 'pipe' }));
    clients.push(client);
    return client;
  };
  const runCount = async () => (await fx.core.store.list()).runs.length;

  beforeAll(async () => {
    fx = await createRunFixture({ asksForMcp: true });
    granted = await fx.project({ 'README.md': '# granted\n' });
  }, 600_000);
  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await fx?.close();
  });

  it('the home folder, /, /proc/1, Airlock\'s data and a folder holding .ssh are refused, even when granted; nothing is recorded', async () => {
    const keyed = await fx.project({ 'README.md': '# keys\n', '.ssh/id_ed25519': 'not really\n' });
    const client = await connect(['--project', granted, '--project', os.homedir(), '--project', '/', '--project', keyed]);
    const before = await runCount();
    for (const [dir, why] of [[os.homedir(), /your home folder|holds your home folder/], ['/', /root of the file system/], ['/proc/1', /system folder \(\/proc\)/], [fx.home, /Airlock's own data/], [keyed, /holding \.ssh/]] as const) {
      const text = errorText(await call(client, 'sandbox_create', { projectDir: dir }));
      expect(text, dir).toMatch(/^FORBIDDEN: /);
      expect(text, dir).toMatch(why);
    }
    // run_start is held to the same rule.
    expect(errorText(await call(client, 'run_start', { projectDir: '/', task: 'x', provider: 'anthropic', model: 'claude-sonnet-4-5' }))).toMatch(/^FORBIDDEN: .*root of the file system/);
    // A folder that does not exist: a clear error and no failed run in History.
    expect(errorText(await call(client, 'sandbox_create', { projectDir: path.join(granted, 'no-such-dir') }))).toMatch(/^INVALID_INPUT: .*is not a folder/);
    expect(await runCount()).toBe(before);
    // Every refusal is audited, in the process's grant log.
    const logs = path.join(fx.home, 'mcp', 'grants');
    const text = (await Promise.all((await readdir(logs)).map((f) => readFile(path.join(logs, f), 'utf8')))).join('');
    expect(text).toContain('"event":"refused"');
    expect(text).toContain('/proc/1');
  }, 300_000);

  it('an ungranted folder waits for the user in the app and is refused on no; a yes makes the sandbox', async () => {
    const other = await fx.project({ 'README.md': '# other\n' });
    const client = await connect(['--project', granted], 'Claude Code');
    const before = await runCount();
    const asking = call(client, 'sandbox_create', { projectDir: other });
    const req = await waitFor(async () => (await fx.services.mcp.folderRequests({}))[0]);
    expect(req).toMatchObject({ client: 'Claude Code 1.0.0', projectDir: other, purpose: 'sandbox' });
    expect(await fx.services.mcp.answerFolder({ requestId: req.requestId, approved: false })).toEqual({ answered: true });
    expect(errorText(await asking)).toMatch(/^FORBIDDEN: The user refused Claude Code 1\.0\.0 access to /);
    expect(await runCount()).toBe(before);

    const again = call(client, 'sandbox_create', { projectDir: other });
    const req2 = await waitFor(async () => (await fx.services.mcp.folderRequests({}))[0]);
    expect(await fx.services.mcp.answerFolder({ requestId: req2.requestId, approved: true, remember: true })).toEqual({ answered: true });
    const made = await again;
    expect(made.isError).toBeFalsy();
    const id = (made.structuredContent as { sandboxId: string }).sandboxId;
    expect((await fx.services.settings.get({})).mcpProjects).toEqual([{ dir: other }]);
    await ok(client, 'sandbox_destroy', { sandboxId: id });
    expect(await leftoversOf(id)).toEqual([]);
  }, 300_000);

  it('network: open refused without the setting, an allowlist only within the user\'s; allowed once set', async () => {
    const client = await connect(['--project', granted]);
    expect(errorText(await call(client, 'sandbox_create', { projectDir: granted, network: 'open' }))).toMatch(/^FORBIDDEN: network "open" is not allowed for MCP clients/);
    expect(errorText(await call(client, 'sandbox_create', { projectDir: granted, network: 'allowlist', allow: ['evil.invalid'] }))).toMatch(/^FORBIDDEN: evil\.invalid is not in the allowlist/);
    await fx.services.settings.update({ mcpProjects: [{ dir: granted, openNetwork: true }] });
    try {
      const { sandboxId, network } = await ok<{ sandboxId: string; network: string }>(client, 'sandbox_create', { projectDir: granted, network: 'open' });
      expect(network).toBe('open');
      await ok(client, 'sandbox_destroy', { sandboxId });
    } finally {
      await fx.services.settings.update({ mcpProjects: [] });
    }
  }, 300_000);

  it("another client's run cannot be continued", async () => {
    const a = await connect(['--project', granted], 'client-a');
    const b = await connect(['--project', granted], 'client-b');
    const { sandboxId } = await ok<{ sandboxId: string }>(a, 'sandbox_create', { projectDir: granted });
    await ok(a, 'sandbox_destroy', { sandboxId });
    const refused = errorText(await call(b, 'run_continue', { runId: sandboxId, task: 'do more' }));
    expect(refused).toMatch(/^FORBIDDEN: Run .* was not started by this client/);
  }, 300_000);

  it('8 concurrent sandbox_create calls with a cap of 4 make 4', async () => {
    const client = await connect(['--project', granted]);
    const results = await Promise.all(Array.from({ length: 8 }, () => call(client, 'sandbox_create', { projectDir: granted })));
    const made = results.filter((r) => !r.isError).map((r) => (r.structuredContent as { sandboxId: string }).sandboxId);
    const refused = results.filter((r) => r.isError).map(errorText);
    expect(made).toHaveLength(4);
    expect(refused).toHaveLength(4);
    for (const t of refused) expect(t).toMatch(/cap is 4/);
    for (const id of made) await ok(client, 'sandbox_destroy', { sandboxId: id });
    for (const id of made) expect(await leftoversOf(id)).toEqual([]);
  }, 600_000);

  it('a cancelled sandbox_create leaves no container on the engine', async () => {
    const client = await connect(['--project', granted]);
    const before = new Set((await fx.core.store.list()).runs.map((r) => r.id));
    const abort = new AbortController();
    const cancelled = call(client, 'sandbox_create', { projectDir: granted }, { signal: abort.signal, onProgress: (m) => m === 'creating the sandbox' && abort.abort() });
    await expect(cancelled).rejects.toThrow(/abort|cancel/i);
    // The session the server had begun ends and is wiped (checked on the engine by its label).
    const run = await waitFor(async () => {
      const fresh = (await fx.core.store.list()).runs.find((r) => !before.has(r.id));
      return fresh && isFinalStatus(fresh.status) && fresh.wipe ? fresh : undefined;
    });
    expect(run.wipe?.verified).toBe(true);
    expect(await leftoversOf(run.id)).toEqual([]);
    // The client holds nothing: its cap is whole again.
    const list = await ok<{ sandboxes: unknown[] }>(client, 'sandbox_list', {});
    expect(list.sandboxes).toEqual([]);
  }, 300_000);

  it('--allow-apply never writes a flagged file without the user; an unflagged one in a granted folder goes ahead', async () => {
    const project = await fx.project({ 'README.md': '# apply\n' });
    const client = await connect(['--allow-apply', '--project', project]);
    const before = await treeDigest(project);
    const { sandboxId } = await ok<{ sandboxId: string }>(client, 'sandbox_create', { projectDir: project });
    await ok(client, 'sandbox_write_file', { sandboxId, path: '.github/workflows/ci.yml', content: 'on: push\njobs: {}\n' });
    await ok(client, 'sandbox_write_file', { sandboxId, path: 'README.md', content: '# apply, changed\n' });
    await ok(client, 'sandbox_destroy', { sandboxId });
    const flagged = await fx.services.diffs.preview({ runId: sandboxId, files: ['.github/workflows/ci.yml'] });
    const refused = errorText(await call(client, 'run_apply', { runId: sandboxId, reviewedSha256: flagged.sha256, files: ['.github/workflows/ci.yml'], waitSec: 1 }));
    expect(refused).toMatch(/^FORBIDDEN: Not applied: .*--allow-apply does not cover it: flagged by review — \.github\/workflows\/ci\.yml: CI pipeline/);
    expect(await treeDigest(project)).toBe(before);
    const plain = await fx.services.diffs.preview({ runId: sandboxId, files: ['README.md'] });
    const applied = await ok<{ approvedBy: string; applied: string[] }>(client, 'run_apply', { runId: sandboxId, reviewedSha256: plain.sha256, files: ['README.md'] });
    expect(applied).toMatchObject({ approvedBy: 'server-flag', applied: ['README.md'] });
    expect(await readFile(path.join(project, 'README.md'), 'utf8')).toBe('# apply, changed\n');
    await expect(readFile(path.join(project, '.github/workflows/ci.yml'))).rejects.toThrow();
  }, 300_000);
});

/** Polls a condition (no fixed sleep decides the outcome). */
async function waitFor<T>(probe: () => Promise<T | undefined>, tries = 1200): Promise<T> {
  for (let i = 0; i < tries; i++) {
    const v = await probe();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the condition never held');
}
