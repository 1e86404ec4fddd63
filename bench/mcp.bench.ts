/**
 * The MCP door's benchmarks (docs/architecture.md §8, §17), each against a baseline measured in the
 * same run, interleaved so load drift on a shared machine hits both sides alike:
 * - mcp.exec.roundtrip: `sandbox_exec` of `true` on a live sandbox over stdio (the official SDK
 *   client → `airlock mcp` → host-run command → channel), vs `channel.roundtrip` (`run(['true'])`)
 * - mcp.sandbox.ready: `sandbox_create` (a one-file project) → the first `sandbox_exec` result, vs
 *   `sandbox.ready` (hardened create → `true` exits through the channel). `airlock mcp` keeps one
 *   started sandbox ready (as the app does); each sample starts once it is back (its refill never
 *   overlaps a measured section). `mcp.sandbox.ready.cold` is the same with `airlock mcp --cold`.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { newRunId } from '../contracts/ids';
import { installationId } from '../core/common/installation-id';
import { LABEL_INSTALLATION, LABEL_POOL } from '../core/sandbox/labels';
import { DockerDriver } from '../core/sandbox/docker/docker-driver';
import { DEFAULT_LIMITS } from '../core/sandbox/driver';
import { ensureSandboxImage } from '../core/sandbox/image';
import { SandboxManager } from '../core/sandbox/sandbox';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';
import { connectEngine } from '../core/sandbox/docker/engine';

const run = promisify(execFile);
const SAMPLES = Number(process.env.AIRLOCK_BENCH_SAMPLES ?? 7);
const cli = fileURLToPath(new URL('../bin/airlock.js', import.meta.url));
const p50 = (xs: number[]) => percentile(xs, 50);

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** `airlock mcp` on a scratch home, a one-file project, and the SDK client connected to it. */
async function mcpRig(opts: { cold?: boolean } = {}): Promise<{ client: Client; projectDir: string; call(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>>; poolReady(): Promise<void>; close(): Promise<void> }> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-mcp-'));
  // Outside Airlock's data (never granted to a client), and granted with --project (docs/architecture.md §17).
  const projectDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-mcp-project-'));
  await writeFile(path.join(projectDir, 'README.md'), '# bench\n');
  const client = new Client({ name: 'airlock-bench', version: '1' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [cli, 'mcp', '--project', projectDir, ...(opts.cold ? ['--cold'] : [])], env: { ...(process.env as Record<string, string>), AIRLOCK_HOME: home }, stderr: 'ignore' }));
  const installation = await installationId(home);
  return {
    client,
    projectDir,
    /** Waits until this server's warm sandbox is running again (a condition, polled). */
    async poolReady() {
      if (opts.cold) return;
      for (let i = 0; i < 600; i++) {
        const { stdout } = await run('docker', ['ps', '-q', '--filter', `label=${LABEL_POOL}`, '--filter', `label=${LABEL_INSTALLATION}=${installation}`]);
        if (stdout.trim()) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('the MCP server kept no warm sandbox within 60 s');
    },
    async call(name, args) {
      const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 600_000 })) as CallToolResult;
      if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
      return r.structuredContent as Record<string, unknown>;
    },
    async close() {
      await client.close();
      await rm(home, { recursive: true, force: true });
      await rm(projectDir, { recursive: true, force: true });
    },
  };
}

const spec = (image: string) => ({ runId: newRunId(), image, limits: DEFAULT_LIMITS, network: 'none' as const });

const execRoundtrip: Benchmark = {
  name: 'mcp.exec.roundtrip',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const { ref } = await ensureSandboxImage({ env: process.env, engine: connectEngine(process.env) });
    const manager = new SandboxManager(new DockerDriver({ env: process.env, engine: connectEngine(process.env) }));
    const sandbox = await manager.create(spec(ref));
    const rig = await mcpRig();
    try {
      const { sandboxId } = (await rig.call('sandbox_create', { projectDir: rig.projectDir })) as { sandboxId: string };
      const mcp: number[] = [];
      const channel: number[] = [];
      for (let i = 0; i < 3; i++) {
        await rig.call('sandbox_exec', { sandboxId, command: 'true' });
        await sandbox.channel.run({ argv: ['true'] });
      }
      for (let i = 0; i < SAMPLES * 3; i++) {
        channel.push(await timed(() => sandbox.channel.run({ argv: ['true'] })));
        mcp.push(await timed(() => rig.call('sandbox_exec', { sandboxId, command: 'true' })));
      }
      await rig.call('sandbox_destroy', { sandboxId });
      return [withRatio({ name: 'mcp.exec.roundtrip', value: p50(mcp), unit: 'ms', baseline: p50(channel), budget: '≤ 2×', note: `p50 of ${mcp.length} sandbox_exec of true over stdio (bash -c, recorded) vs channel.roundtrip run(['true'])` })];
    } finally {
      await rig.close();
      await sandbox.destroy();
      await manager.shutdown();
    }
  },
};

/** `sandbox_create` → first `sandbox_exec` against `sandbox.ready`, interleaved. */
function sandboxReady(name: string, cold: boolean): Benchmark {
  return {
    name,
    requires: ['docker'],
    async run(): Promise<BenchResult[]> {
      const { ref } = await ensureSandboxImage({ env: process.env, engine: connectEngine(process.env) });
      const manager = new SandboxManager(new DockerDriver({ env: process.env, engine: connectEngine(process.env) }));
      const rig = await mcpRig({ cold });
      try {
        const mcp: number[] = [];
        const bare: number[] = [];
        for (let i = 0; i < SAMPLES; i++) {
          await rig.poolReady();
          let s: Awaited<ReturnType<SandboxManager['create']>> | undefined;
          bare.push(
            await timed(async () => {
              s = await manager.create(spec(ref));
              await s.channel.run({ argv: ['true'] });
            }),
          );
          await s?.destroy();
          let id = '';
          mcp.push(
            await timed(async () => {
              id = ((await rig.call('sandbox_create', { projectDir: rig.projectDir })) as { sandboxId: string }).sandboxId;
              await rig.call('sandbox_exec', { sandboxId: id, command: 'true' });
            }),
          );
          await rig.call('sandbox_destroy', { sandboxId: id });
        }
        const how = cold ? 'airlock mcp --cold' : 'airlock mcp (one warm sandbox, as the app)';
        return [withRatio({ name, value: p50(mcp), unit: 'ms', baseline: p50(bare), budget: cold ? 'reported' : '≤ 1.2×', note: `p50 of ${SAMPLES} sandbox_create (recorded run, project copied in) → first sandbox_exec over ${how} vs sandbox.ready (cold create)` })];
      } finally {
        await rig.close();
        await manager.shutdown();
      }
    },
  };
}

export const benchmarks: Benchmark[] = [execRoundtrip, sandboxReady('mcp.sandbox.ready', false), sandboxReady('mcp.sandbox.ready.cold', true)];
