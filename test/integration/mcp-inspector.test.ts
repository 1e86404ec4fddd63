import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProcessAlive } from '../../core/common/process-alive';
import { listKeptRecords } from '../../core/mcp/kept-sandboxes';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, leftoversOf, type RunFixture } from '../support/run-fixture';

/**
 * MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`, a devDependency run from
 * node_modules: no network) against `airlock mcp` over stdio (docs/architecture.md §17, "Kept
 * sandboxes"). Each Inspector call is its own `airlock mcp` process and connection, so the workflow
 * create → exec → diff → destroy needs `keep: true`; a later connection re-attaches only when its
 * client is granted the sandbox's folder. The engine is checked at the end.
 */

const docker = await requirePrerequisite('docker');
const run = promisify(execFile);
const root = fileURLToPath(new URL('../..', import.meta.url));
const cli = path.join(root, 'bin', 'airlock.js');
// The Inspector needs Node ≥ 22.19: the `node` devDependency's binary, as for the conformance suite.
const node22 = path.join(root, 'node_modules', 'node', 'bin', 'node');
const inspector = path.join(root, 'node_modules', '@modelcontextprotocol', 'inspector', 'clients', 'launcher', 'build', 'index.js');

type Structured = Record<string, unknown>;
interface InspectorResult {
  isError?: boolean;
  content: Array<{ type: string; text?: string }>;
  structuredContent?: Structured;
}

describe.skipIf(!docker.ok)('MCP Inspector CLI over stdio: create (keep) → exec → diff → destroy, each its own process (real engine)', () => {
  let fx: RunFixture;
  let scratch: string;
  let granted: string;

  beforeAll(async () => {
    fx = await createRunFixture({ asksForMcp: true });
    scratch = await mkdtemp(path.join(os.tmpdir(), 'airlock-inspector-'));
    granted = await fx.project({ 'README.md': '# inspected\n', 'src/app.js': 'export const answer = 1;\n' });
  }, 600_000);
  afterAll(async () => {
    await fx?.close();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  /** One Inspector CLI call: its own `airlock mcp` (with these flags) and its own connection. */
  const inspect = async (flags: string[], tool: string, args: Structured): Promise<InspectorResult> => {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && /^(AIRLOCK_|DOCKER_|DBUS_|XDG_|CI$)/.test(k)) env[k] = v;
    env.AIRLOCK_HOME = fx.home;
    // A config file of the test's own: the Inspector's catalog in the user's home is never touched.
    const config = path.join(scratch, `config-${Date.now()}-${Math.random().toString(16).slice(2)}.json`);
    await writeFile(config, JSON.stringify({ mcpServers: { airlock: { command: process.execPath, args: [cli, 'mcp', ...flags], env, connectionTimeout: 300_000, requestTimeout: 600_000 } } }));
    const { stdout } = await run(node22, [inspector, '--cli', '--config', config, '--server', 'airlock', '--method', 'tools/call', '--tool-name', tool, '--tool-args-json', JSON.stringify(args)], {
      env: { ...process.env, HOME: scratch },
      maxBuffer: 64 * 1024 * 1024,
      timeout: 900_000,
    }).catch((err: { stdout?: string; stderr?: string; message: string }) => {
      // A tool error is a result too (the Inspector exits non-zero for it): keep its output.
      if (err.stdout?.trim().startsWith('{')) return { stdout: err.stdout };
      throw new Error(`Inspector failed: ${err.message}\n${err.stderr ?? ''}`);
    });
    return JSON.parse(stdout) as InspectorResult;
  };
  const text = (r: InspectorResult) => r.content.map((c) => c.text ?? '').join('\n');
  const workers = async () => (await readdir(path.join(fx.home, 'mcp', 'workers')).catch(() => [] as string[])).filter((n) => n.endsWith('.json')).map((n) => Number(n.slice(0, -5)));
  const until = async (probe: () => Promise<boolean>) => {
    for (let i = 0; i < 1200 && !(await probe()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(await probe()).toBe(true);
  };

  it('create (keep) → exec → diff → destroy, four Inspector processes; nothing is left on the engine', async () => {
    const flags = ['--project', granted];
    const made = await inspect(flags, 'sandbox_create', { projectDir: granted, keep: true });
    expect(made.isError, text(made)).toBeFalsy();
    const sandboxId = made.structuredContent?.sandboxId as string;
    expect(made.structuredContent).toMatchObject({ kept: true, projectDir: expect.stringContaining(path.basename(granted)) });
    // The Inspector process and its `airlock mcp` are gone; the sandbox is not, and it is recorded.
    expect((await leftoversOf(sandboxId)).length).toBeGreaterThan(0);
    expect((await listKeptRecords(fx.home)).map((k) => k.sandboxId)).toEqual([sandboxId]);

    const ran = await inspect(flags, 'sandbox_exec', { sandboxId, command: 'echo "export const answer = 42;" > src/app.js && echo done' });
    expect(ran.isError, text(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ exitCode: 0, stdout: 'done\n' });

    const diff = await inspect(flags, 'sandbox_diff', { sandboxId });
    expect(diff.isError, text(diff)).toBeFalsy();
    expect((diff.structuredContent?.files as Array<{ path: string }>).map((f) => f.path)).toEqual(['src/app.js']);
    expect(diff.structuredContent?.patch).toContain('+export const answer = 42;');

    const destroyed = await inspect(flags, 'sandbox_destroy', { sandboxId });
    expect(destroyed.isError, text(destroyed)).toBeFalsy();
    expect(destroyed.structuredContent).toMatchObject({ sandboxId, status: 'done', changedFiles: 1, wipe: { verified: true, leftovers: [] } });
    expect(await leftoversOf(sandboxId)).toEqual([]);
    expect(await listKeptRecords(fx.home)).toEqual([]);
    // The run is in History with its commands; every re-attach is audited in the run's log.
    const record = await fx.services.runs.get({ runId: sandboxId });
    expect(record).toMatchObject({ agent: 'mcp', status: 'done' });
    const audit = await readFile(fx.core.store.paths(sandboxId).audit, 'utf8');
    expect(audit.match(/re-attached to this kept sandbox/g)?.length).toBe(3);
    // Holding nothing and serving no one, the worker goes (its warm sandbox with it).
    await until(async () => (await workers()).every((pid) => !isProcessAlive(pid)));
  }, 900_000);

  it('a kept sandbox is refused to a connection whose client lacks the grant (asked, said no); the granted one still reaches it', async () => {
    await until(async () => (await workers()).every((pid) => !isProcessAlive(pid)));
    const made = await inspect(['--project', granted], 'sandbox_create', { projectDir: granted, keep: true });
    const sandboxId = made.structuredContent?.sandboxId as string;
    expect(sandboxId, text(made)).toBeTruthy();
    // No --project: the folder is not granted to this client, so the app is asked; the user says no.
    const asking = inspect([], 'sandbox_exec', { sandboxId, command: 'cat /workspace/README.md' });
    const answered = (async () => {
      for (let i = 0; i < 1200; i++) {
        const req = (await fx.services.mcp.folderRequests({}))[0];
        if (req) return fx.services.mcp.answerFolder({ requestId: req.requestId, approved: false });
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('no folder request came');
    })();
    const refused = await asking;
    await answered;
    expect(refused.isError).toBe(true);
    expect(text(refused)).toMatch(/^FORBIDDEN: The user refused .* access to /);
    // The refusal is audited; the sandbox is untouched and the granted client still uses it.
    const logs = path.join(fx.home, 'mcp', 'grants');
    const grantLog = (await Promise.all((await readdir(logs)).map((f) => readFile(path.join(logs, f), 'utf8')))).join('');
    expect(grantLog).toContain('"event":"refused"');
    expect(grantLog).toContain('"what":"reattach"');
    const ok = await inspect(['--project', granted], 'sandbox_exec', { sandboxId, command: 'cat README.md' });
    expect(ok.structuredContent).toMatchObject({ exitCode: 0, stdout: '# inspected\n' });
    const destroyed = await inspect(['--project', granted], 'sandbox_destroy', { sandboxId });
    expect(destroyed.structuredContent).toMatchObject({ wipe: { verified: true } });
    expect(await leftoversOf(sandboxId)).toEqual([]);
  }, 900_000);

  it('a kept sandbox nobody uses is wiped after the idle time, and its worker goes', async () => {
    const flags = ['--project', granted];
    // A fresh worker, which reads the idle time at its start.
    await until(async () => (await workers()).every((pid) => !isProcessAlive(pid)));
    const prev = process.env.AIRLOCK_MCP_KEEP_IDLE_SEC;
    process.env.AIRLOCK_MCP_KEEP_IDLE_SEC = '3';
    try {
      const made = await inspect(flags, 'sandbox_create', { projectDir: granted, keep: true });
      const sandboxId = made.structuredContent?.sandboxId as string;
      expect(sandboxId, text(made)).toBeTruthy();
      await until(async () => (await leftoversOf(sandboxId)).length === 0);
      await until(async () => (await fx.services.runs.get({ runId: sandboxId })).wipe?.verified === true);
      expect(await listKeptRecords(fx.home)).toEqual([]);
      await until(async () => (await workers()).every((pid) => !isProcessAlive(pid)));
    } finally {
      if (prev === undefined) delete process.env.AIRLOCK_MCP_KEEP_IDLE_SEC;
      else process.env.AIRLOCK_MCP_KEEP_IDLE_SEC = prev;
    }
  }, 900_000);
});
