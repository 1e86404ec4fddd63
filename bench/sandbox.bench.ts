/**
 * Sandbox benchmarks (docs/architecture.md §8), each against a baseline measured in the same run:
 * - sandbox.ready: hardened create → `true` exits through the channel, vs `docker run --rm IMAGE true`
 * - sandbox.ready.warm: the same from the warm pool
 * - channel.roundtrip: `run(['true'])` through the channel vs `docker exec CONTAINER true`
 * - channel.echo: one line through a running `cat` over the channel, vs `docker exec CONTAINER true`
 * - sandbox.wipe: destroy + verify by label (ms), vs a bare forced remove of a plain container
 */
import { spawn } from 'node:child_process';
import { newRunId } from '../contracts/ids';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';
import { DockerDriver } from '../core/sandbox/docker/docker-driver';
import { DEFAULT_LIMITS, type SandboxSpec } from '../core/sandbox/driver';
import { ensureSandboxImage } from '../core/sandbox/image';
import { SandboxManager } from '../core/sandbox/sandbox';
import { connectEngine } from '../core/sandbox/docker/engine';

const SAMPLES = Number(process.env.AIRLOCK_BENCH_SAMPLES ?? 7);

let imagePromise: Promise<string> | undefined;
function image(): Promise<string> {
  imagePromise ??= ensureSandboxImage({ env: process.env, engine: connectEngine(process.env) }).then((r) => r.ref);
  return imagePromise;
}

function runId(): string {
  return newRunId();
}

function spec(ref: string): SandboxSpec {
  return { runId: runId(), image: ref, limits: DEFAULT_LIMITS, network: 'none' };
}

function docker(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`docker ${args[0]} exited ${code}: ${err.trim()}`))));
  });
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

const p50 = (xs: number[]) => percentile(xs, 50);

/**
 * Hardened create → first output of `true` through the channel, against a bare `docker run --rm
 * IMAGE true`, interleaved so load drift on a shared machine hits both sides alike. With `pool`,
 * sandboxes come pre-started from the warm pool (refilled between samples, outside the timing).
 */
async function measureReady(pool: boolean): Promise<{ ours: number; bare: number }> {
  const ref = await image();
  const manager = new SandboxManager(new DockerDriver({ env: process.env, engine: connectEngine(process.env) }));
  const base = spec(ref);
  if (pool) await manager.warm({ image: base.image, limits: base.limits, network: base.network }, 1);
  // Warm the engine's caches (image layers, node) once for both sides.
  else await docker(['run', '--rm', ref, 'true']);
  const ours: number[] = [];
  const bare: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    bare.push(await timed(() => docker(['run', '--rm', ref, 'true'])));
    if (pool) await manager.whenPoolReady();
    let sandbox: Awaited<ReturnType<SandboxManager['create']>> | undefined;
    ours.push(
      await timed(async () => {
        sandbox = await manager.create(spec(ref));
        await sandbox.channel.run({ argv: ['true'] });
      }),
    );
    await sandbox?.destroy();
  }
  await manager.shutdown();
  return { ours: p50(ours), bare: p50(bare) };
}

const ready: Benchmark = {
  name: 'sandbox.ready',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const { ours, bare } = await measureReady(false);
    return [withRatio({ name: 'sandbox.ready', value: ours, unit: 'ms', baseline: bare, budget: '≤ 0.8×', note: `p50 of ${SAMPLES}; baseline docker run --rm IMAGE true` })];
  },
};

const readyWarm: Benchmark = {
  name: 'sandbox.ready.warm',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const { ours, bare } = await measureReady(true);
    return [withRatio({ name: 'sandbox.ready.warm', value: ours, unit: 'ms', baseline: bare, budget: '≤ 0.2×', note: `p50 of ${SAMPLES}; pool of 1; baseline docker run --rm IMAGE true` })];
  },
};

const roundtrip: Benchmark = {
  name: 'channel.roundtrip',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const ref = await image();
    const manager = new SandboxManager(new DockerDriver({ env: process.env, engine: connectEngine(process.env) }));
    const sandbox = await manager.create(spec(ref));
    try {
      const id = sandbox.info.id;
      const execs: number[] = [];
      const runs: number[] = [];
      const echoes: number[] = [];
      // A long-running `cat`: one line out and back is the channel's own round trip.
      const cat = sandbox.channel.spawn({ argv: ['cat'] });
      let waiter: (() => void) | undefined;
      cat.onStdout(() => waiter?.());
      const echo = () =>
        new Promise<void>((resolve) => {
          waiter = resolve;
          cat.write('ping\n');
        });
      for (let i = 0; i < 3; i++) {
        await sandbox.channel.run({ argv: ['true'] });
        await echo();
      }
      await docker(['exec', id, 'true']);
      for (let i = 0; i < SAMPLES * 3; i++) {
        if (i % 3 === 0) execs.push(await timed(() => docker(['exec', id, 'true'])));
        runs.push(await timed(() => sandbox.channel.run({ argv: ['true'] })));
        for (let j = 0; j < 5; j++) echoes.push(await timed(echo));
      }
      cat.end();
      await cat.exited.catch(() => undefined);
      return [
        withRatio({ name: 'channel.roundtrip', value: p50(runs), unit: 'ms', baseline: p50(execs), budget: '≤ 0.05×', note: `p50 of ${runs.length} run(['true']) vs docker exec CONTAINER true` }),
        withRatio({ name: 'channel.echo', value: p50(echoes), unit: 'ms', baseline: p50(execs), budget: '≤ 0.05×', note: `p50 of ${echoes.length} line echoes through a running cat` }),
      ];
    } finally {
      await sandbox.destroy();
      await manager.shutdown();
    }
  },
};

const wipe: Benchmark = {
  name: 'sandbox.wipe',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const ref = await image();
    const driver = new DockerDriver({ env: process.env, engine: connectEngine(process.env) });
    const engine = (await driver.engine()).docker;
    const manager = new SandboxManager(driver);
    const ours: number[] = [];
    const bare: number[] = [];
    let leftovers = 0;
    for (let i = 0; i < SAMPLES; i++) {
      const sandbox = await manager.create(spec(ref));
      await sandbox.channel.run({ argv: ['true'] });
      const t0 = performance.now();
      const proof = await sandbox.destroy();
      ours.push(performance.now() - t0);
      leftovers += proof.leftovers.length;
      // Baseline: a forced remove of a plain running container (no volumes, no verification).
      const plain = await engine.createContainer({ Image: ref, Cmd: ['sleep', 'infinity'], HostConfig: { NetworkMode: 'none' }, Labels: { 'airlock.kind': 'bench' } });
      await plain.start();
      bare.push(await timed(() => plain.remove({ force: true })));
    }
    await manager.shutdown();
    return [
      withRatio({
        name: 'sandbox.wipe',
        value: p50(ours),
        unit: 'ms',
        baseline: p50(bare),
        budget: '≤ 150 ms, nothing left',
        note: `p50 of ${SAMPLES}; leftovers ${leftovers}; baseline a bare forced remove`,
      }),
    ];
  },
};

export const benchmarks: Benchmark[] = [ready, readyWarm, roundtrip, wipe];
