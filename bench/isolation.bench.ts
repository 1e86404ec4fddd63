/**
 * Isolation levels and engines (docs/architecture.md §8), each against a baseline measured in the same run:
 * - sandbox.ready.gvisor: hardened create → `true` through the channel under gVisor (runsc), vs the
 *   same hardened sandbox under runc, interleaved sample by sample
 * - sandbox.ready.gvisor.bare: what gVisor itself costs for the same kind of start, without Airlock:
 *   `docker run --rm --runtime=runsc IMAGE node -e 0` vs the same under runc (the helper is Node)
 * - sandbox.ready.podman: the hardened sandbox on Podman's Docker-compatible API, vs the same on the
 *   Docker engine, interleaved
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { newRunId } from '../contracts/ids';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';
import { DockerDriver, type DockerDriverOptions } from '../core/sandbox/docker/docker-driver';
import { connectEngine, type Engine } from '../core/sandbox/docker/engine';
import { DEFAULT_LIMITS } from '../core/sandbox/driver';
import { ensureSandboxImage } from '../core/sandbox/image';
import { SandboxManager } from '../core/sandbox/sandbox';

const SAMPLES = Number(process.env.AIRLOCK_BENCH_SAMPLES ?? 7);

/** One way of running sandboxes, timed from create to the first command's exit. */
class ReadyTimer {
  private readonly manager: SandboxManager;
  constructor(
    opts: DockerDriverOptions,
    private readonly image: string,
  ) {
    this.manager = new SandboxManager(new DockerDriver(opts));
  }

  async once(): Promise<number> {
    const t0 = performance.now();
    const sandbox = await this.manager.create({ runId: newRunId(), image: this.image, limits: DEFAULT_LIMITS, network: 'none' });
    await sandbox.channel.run({ argv: ['true'] });
    const ms = performance.now() - t0;
    const proof = await sandbox.destroy();
    if (proof.leftovers.length) throw new Error(`wipe left ${proof.leftovers.join(', ')}`);
    return ms;
  }

  async dispose(): Promise<void> {
    await this.manager.shutdown();
  }
}

/** A bare `docker run --rm --network none [flags] IMAGE node -e 0` (Node, as the helper is). */
class BareRunTimer {
  constructor(
    private readonly image: string,
    private readonly flags: string[],
  ) {}

  async once(): Promise<number> {
    const t0 = performance.now();
    await promisify(execFile)('docker', ['run', '--rm', '--network', 'none', ...this.flags, this.image, 'node', '-e', '0']);
    return performance.now() - t0;
  }

  async dispose(): Promise<void> {}
}

type Timer = Pick<ReadyTimer, 'once' | 'dispose'>;

/** p50s of two timers, interleaved so load drift on a shared machine hits both alike (one warm-up each). */
async function interleaved(ours: Timer, base: Timer): Promise<{ ours: number; base: number }> {
  try {
    await ours.once();
    await base.once();
    const a: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < SAMPLES; i++) {
      b.push(await base.once());
      a.push(await ours.once());
    }
    return { ours: percentile(a, 50), base: percentile(b, 50) };
  } finally {
    await ours.dispose();
    await base.dispose();
  }
}

async function imageOn(engine?: Engine): Promise<string> {
  return (await ensureSandboxImage({ env: process.env, engine: engine ?? connectEngine(process.env) })).ref;
}

const readyGvisor: Benchmark = {
  name: 'sandbox.ready.gvisor',
  requires: ['docker', 'runsc'],
  async run(): Promise<BenchResult[]> {
    const image = await imageOn();
    const { ours, base } = await interleaved(new ReadyTimer({ env: process.env, engine: connectEngine(process.env), isolation: 'gvisor' }, image), new ReadyTimer({ env: process.env, engine: connectEngine(process.env) }, image));
    const bare = await interleaved(new BareRunTimer(image, ['--runtime=runsc']), new BareRunTimer(image, []));
    return [
      withRatio({ name: 'sandbox.ready.gvisor', value: ours, unit: 'ms', baseline: base, budget: '≤ 2×', note: `p50 of ${SAMPLES}; baseline the hardened runc sandbox (sandbox.ready's path)` }),
      withRatio({ name: 'sandbox.ready.gvisor.bare', value: bare.ours, unit: 'ms', baseline: bare.base, note: `gVisor's own cost, no Airlock: docker run --runtime=runsc IMAGE node -e 0 vs runc, p50 of ${SAMPLES}` }),
    ];
  },
};

const readyPodman: Benchmark = {
  name: 'sandbox.ready.podman',
  requires: ['docker', 'podman'],
  async run(): Promise<BenchResult[]> {
    const podman = await connectEngine(process.env, { host: `unix://${process.env.AIRLOCK_TEST_PODMAN_SOCKET || '/run/podman/podman.sock'}` });
    const docker = await connectEngine(process.env, { choice: 'docker' });
    try {
      const [podmanImage, dockerImage] = await Promise.all([imageOn(podman), imageOn(docker)]);
      const { ours, base } = await interleaved(new ReadyTimer({ env: process.env, engine: podman }, podmanImage), new ReadyTimer({ env: process.env, engine: docker }, dockerImage));
      return [withRatio({ name: 'sandbox.ready.podman', value: ours, unit: 'ms', baseline: base, budget: 'reported', note: `p50 of ${SAMPLES}; rootful Podman 4 API vs the Docker engine, same hardened sandbox` })];
    } finally {
      podman.dispose();
      docker.dispose();
    }
  },
};

export const benchmarks: Benchmark[] = [readyGvisor, readyPodman];
