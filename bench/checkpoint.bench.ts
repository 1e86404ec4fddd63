import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Checkpointer } from '../core/runs/checkpoints';
import type { RunStore } from '../core/runs/run-store';
import { watchChanges } from '../core/workspace/changes';
import { collectResult } from '../core/workspace/collect';
import { HostRepo } from '../core/workspace/host-repo';
import { hydrate } from '../core/workspace/hydrate';
import { snapshotProject } from '../core/workspace/snapshot';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';
import { freshSandbox, generatedRepo } from './workspace.bench';
import { testGit } from '../test/support/workspace-fixtures';

const CHANGED = 10;
const ROUNDS = 5;

/**
 * `checkpoint.cost` (docs/architecture.md §19): one per-turn checkpoint of the 10k-file project
 * with 10 files changed in the turn — the cheap scan, the host-derived collect into its own ref,
 * the listing, patch and index written beside the run — against `collectResult` of the same
 * workspace in the same run (what the end of a run does). `checkpoint.cost` has the live change
 * feed on, as a run does (the sandbox helper's watcher says the turn wrote, so no walk);
 * `checkpoint.cost.scan` is the same without the feed (the cheap scan walks until its first hit) and
 * `checkpoint.idle` a turn that changed nothing (the scan walks the whole tree, nothing is collected).
 */
const checkpointBench: Benchmark = {
  name: 'checkpoint.cost',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const dir = await generatedRepo();
    const sb = await freshSandbox();
    const objects = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-cp-'));
    try {
      const snapshot = await snapshotProject(testGit, dir);
      const repo = await HostRepo.create(testGit, path.join(objects, 'objects.git'));
      const hydrated = await hydrate(sb.channel, snapshot, { hostRepo: repo });
      const baseCommit = await (hydrated.hostBaseline as Promise<string>);
      const collect = (extra: { ref?: string; maxResultBytes?: number } = {}) => collectResult(sb.channel, { repo, baseCommit, manifest: hydrated.manifest, isIgnored: snapshot.isIgnored, ...extra });
      const store = { paths: () => ({ artifacts: objects }) } as unknown as RunStore;
      const cp = new Checkpointer({ store, runId: 'bench', shell: sb.channel, collect, baseCommit, tracksDeps: false, audit: { append: async () => ({}) as never } });
      // The real feed (the helper's watcher in the sandbox), switched on for the first row only.
      let feedOn = false;
      let fed: (() => void) | undefined;
      const feed = await watchChanges(sb.channel, () => {
        if (!feedOn) return;
        cp.markChanged();
        fed?.();
      });
      const files = Array.from({ length: CHANGED }, (_, i) => `pkg${(i * 7) % 100}/src/file${i * 911}.ts`);
      // A turn: the agent edits the same 10 files again (a new tree each time).
      const edit = (k: number) => sb.channel.run({ argv: ['sh', '-c', ['set -e', 'cd /workspace', ...files.map((f) => `printf '  turn ${k};\\n' >> ${f}`)].join('\n')] });
      /** A turn's edits; with the feed on, until the feed has told of them (as it does while the model answers). */
      const turn = async (k: number) => {
        const told = feedOn ? new Promise<void>((resolve) => (fed = resolve)) : undefined;
        await edit(k);
        await told;
      };
      await cp.turnEnded(); // the first request places the marker
      for (let k = 0; k < 2; k++) {
        await turn(k);
        await cp.turnEnded();
        await collect();
      }
      const measure = async (from: number, withEdit: boolean) => {
        const ours: number[] = [];
        const base: number[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          if (withEdit) await turn(from + round);
          let t0 = performance.now();
          await cp.turnEnded();
          ours.push(performance.now() - t0);
          t0 = performance.now();
          const { result } = await collect();
          base.push(performance.now() - t0);
          if (result.changes.length !== CHANGED) throw new Error(`expected ${CHANGED} changes, got ${result.changes.length}`);
        }
        return { value: percentile(ours, 50), baseline: percentile(base, 50) };
      };
      feedOn = true;
      const withFeed = await measure(10, true);
      feedOn = false;
      const scan = await measure(20, true);
      const idle = await measure(0, false);
      feed.dispose();
      return [
        withRatio({ name: 'checkpoint.cost', ...withFeed, unit: 'ms', budget: '≤ 1.2×', note: `per-turn checkpoint as a run takes it (change feed on: host-derived collect + stored listing and patch), ${CHANGED} of 10000 files changed, vs workspace collect of the same tree (median of ${ROUNDS})` }),
        withRatio({ name: 'checkpoint.cost.scan', ...scan, unit: 'ms', budget: 'reported', note: 'the same without the change feed: the cheap scan walks until its first hit, then the collect' }),
        withRatio({ name: 'checkpoint.idle', ...idle, unit: 'ms', budget: 'reported', note: 'a turn that changed nothing: the scan walks the whole tree, nothing is collected (baseline: a collect of the same tree)' }),
      ];
    } finally {
      await sb.destroy();
      await rm(objects, { recursive: true, force: true });
    }
  },
};

export const benchmarks: Benchmark[] = [checkpointBench];
