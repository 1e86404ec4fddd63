import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Checkpointer } from '../core/runs/checkpoints';
import type { RunStore } from '../core/runs/run-store';
import { collectResult } from '../core/workspace/collect';
import { HostRepo } from '../core/workspace/host-repo';
import { hydrate } from '../core/workspace/hydrate';
import { snapshotProject } from '../core/workspace/snapshot';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';
import { freshSandbox, generatedRepo } from './workspace.bench';

const CHANGED = 10;
const ROUNDS = 5;

/**
 * `checkpoint.cost` (docs/architecture.md §19): one per-turn checkpoint of the 10k-file project
 * with 10 files changed in the turn — the cheap scan, the host-derived collect into its own ref,
 * the listing, patch and index written beside the run — against `collectResult` of the same
 * workspace in the same run (what the end of a run does). No change feed: the scan always walks.
 */
const checkpointBench: Benchmark = {
  name: 'checkpoint.cost',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const dir = await generatedRepo();
    const sb = await freshSandbox();
    const objects = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-cp-'));
    try {
      const snapshot = await snapshotProject(dir);
      const repo = await HostRepo.create(path.join(objects, 'objects.git'));
      const hydrated = await hydrate(sb.channel, snapshot, { hostRepo: repo });
      const baseCommit = await (hydrated.hostBaseline as Promise<string>);
      const collect = (extra: { ref?: string; maxResultBytes?: number } = {}) => collectResult(sb.channel, { repo, baseCommit, manifest: hydrated.manifest, isIgnored: snapshot.isIgnored, ...extra });
      const store = { paths: () => ({ artifacts: objects }) } as unknown as RunStore;
      const cp = new Checkpointer({ store, runId: 'bench', shell: sb.channel, collect, baseCommit, tracksDeps: false, audit: { append: async () => ({}) as never } });
      const files = Array.from({ length: CHANGED }, (_, i) => `pkg${(i * 7) % 100}/src/file${i * 911}.ts`);
      // A turn: the agent edits the same 10 files again (a new tree each time).
      const turn = (k: number) => sb.channel.run({ argv: ['sh', '-c', ['set -e', 'cd /workspace', ...files.map((f) => `printf '  turn ${k};\\n' >> ${f}`)].join('\n')] });
      await cp.turnEnded(); // the first request places the marker
      for (let k = 0; k < 2; k++) {
        await turn(k);
        await cp.turnEnded();
        await collect();
      }
      const ours: number[] = [];
      const base: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        await turn(10 + round);
        let t0 = performance.now();
        await cp.turnEnded();
        ours.push(performance.now() - t0);
        t0 = performance.now();
        const { result } = await collect();
        base.push(performance.now() - t0);
        if (result.changes.length !== CHANGED) throw new Error(`expected ${CHANGED} changes, got ${result.changes.length}`);
      }
      return [
        withRatio({
          name: 'checkpoint.cost',
          value: percentile(ours, 50),
          unit: 'ms',
          baseline: percentile(base, 50),
          budget: '≤ 1.2×',
          note: `per-turn checkpoint (cheap scan + host-derived collect + stored listing and patch), ${CHANGED} of 10000 files changed, vs workspace collect of the same tree (median of ${ROUNDS})`,
        }),
      ];
    } finally {
      await sb.destroy();
      await rm(objects, { recursive: true, force: true });
    }
  },
};

export const benchmarks: Benchmark[] = [checkpointBench];
