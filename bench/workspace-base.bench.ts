import { spawn } from 'node:child_process';
import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { newRunId } from '../contracts/ids';
import { DEFAULT_LIMITS } from '../core/sandbox/driver';
import { DockerDriver } from '../core/sandbox/docker/docker-driver';
import { connectEngine, type Engine } from '../core/sandbox/docker/engine';
import { ensureSandboxImage } from '../core/sandbox/image';
import { SandboxManager, type Sandbox } from '../core/sandbox/sandbox';
import { createProjectBase, engineSupportsBases, findProjectBase, prepareBaseVolumes, pruneProjectBases } from '../core/sandbox/docker/project-base-volumes';
import { HostRepo } from '../core/workspace/host-repo';
import { hydrate } from '../core/workspace/hydrate';
import { hydrateFromBase } from '../core/workspace/hydrate-base';
import { BaseStore, RACY_MS } from '../core/workspace/project-base';
import { snapshotProject } from '../core/workspace/snapshot';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';
import { generatedRepo } from './workspace.bench';
import { testGit } from '../test/support/workspace-fixtures';

const ROUNDS = 3;
const FILES = 10_000;

function sh(cmd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn('sh', ['-c', cmd], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr.on('data', (d: Buffer) => (err += d.toString()));
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd}: exit ${code}: ${err.trim()}`))));
  });
}

const fileOf = (i: number) => path.join(`pkg${i % 100}`, 'src', `file${i}.ts`);

/** Rewrites `n` files (spread over the project) with new content of the same kind. */
async function change(dir: string, n: number, round: number): Promise<void> {
  for (let k = 0; k < n; k++) {
    const i = (k * 9973 + round * 31) % FILES;
    await writeFile(path.join(dir, fileOf(i)), `// round ${round} change ${k}\n`.repeat(400));
  }
}

const git = 'git -c user.name=bench -c user.email=bench@example.invalid -c init.defaultBranch=main';

/** The project as a git repository with a second branch: 500 files changed, 100 added, 100 deleted. */
async function withBranch(dir: string): Promise<void> {
  await sh(`cd ${dir} && ${git} init -q && ${git} add -A && ${git} commit -qm base && ${git} checkout -qb other`);
  for (let k = 0; k < 500; k++) await writeFile(path.join(dir, fileOf(k * 17)), `// on the other branch ${k}\n`.repeat(400));
  for (let k = 0; k < 100; k++) await writeFile(path.join(dir, `pkg${k}`, 'src', `added${k}.ts`), `// added ${k}\n`.repeat(400));
  for (let k = 0; k < 100; k++) await unlink(path.join(dir, fileOf(k * 17 + 3)));
  await sh(`cd ${dir} && ${git} add -A && ${git} commit -qm other && ${git} checkout -q main`);
}

const repeatBench: Benchmark = {
  name: 'workspace.hydrate.repeat',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const engine: Engine = await connectEngine(process.env);
    if (!(await engineSupportsBases(engine))) return [{ name: 'workspace.hydrate.repeat', value: Number.NaN, unit: '', note: 'not run: the engine has no overlay volumes (Podman or rootless)' }];
    const image = (await ensureSandboxImage({ env: process.env, engine })).ref;
    const manager = new SandboxManager(new DockerDriver({ env: process.env, engine }));
    const work = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-base-'));
    const store = new BaseStore(path.join(work, 'bases'));
    const dir = path.join(work, 'project');
    await sh(`cp -a ${await generatedRepo()}/. ${dir}/`);
    // A project is not written the moment before its first run: its files are older than the racy window when the first base reads them.
    await new Promise((r) => setTimeout(r, RACY_MS + 100));
    const sandboxes: Sandbox[] = [];
    const create = async (runId: string) => {
      const sb = await manager.create({ runId, image, limits: DEFAULT_LIMITS, network: 'none' });
      sandboxes.push(sb);
      return sb;
    };
    const full: number[] = [];
    const fullWithSandbox: number[] = [];
    /** The whole hydrate of the project as it is now, as `workspace.hydrate` times it (and with the sandbox's start). */
    const timeFull = async () => {
      const objects = await mkdtemp(path.join(work, 'objects-'));
      const t0 = performance.now();
      const sb = await create(newRunId());
      const t1 = performance.now();
      const snapshot = await snapshotProject(testGit, dir);
      const repo = await HostRepo.create(testGit, path.join(objects, 'objects.git'));
      const h = await hydrate(sb.channel, snapshot, { waitForBaseline: false, hostRepo: repo });
      const t2 = performance.now();
      full.push(t2 - t1);
      fullWithSandbox.push(t2 - t0);
      // Untimed: the host's baseline is still writing its pack into `objects` (removed below).
      await Promise.all([h.baselineReady, h.hostBaseline]);
      await sb.destroy();
      await rm(objects, { recursive: true, force: true });
    };
    /**
     * A second run as the app starts one: the project's scan runs beside the base's lookup, the overlay
     * volumes and the run's object store; then the sandbox (timed apart), then the delta streams in.
     */
    const timeRepeat = async (into: number[], withSandbox: number[], streamed: number[]) => {
      const objects = await mkdtemp(path.join(work, 'objects-'));
      const runId = newRunId();
      const t0 = performance.now();
      const [snapshot, { record, repo }] = await Promise.all([
        snapshotProject(testGit, dir),
        (async () => {
          const found = await findProjectBase(engine, store, dir);
          if (!found.ok) throw new Error(`no base: ${found.reason}`);
          const [, made] = await Promise.all([
            prepareBaseVolumes(engine, { runId, record: found.record, image }),
            HostRepo.create(testGit, path.join(objects, 'objects.git'), { borrowFrom: store.objectsDir(found.record.key, found.record.volume) }),
          ]);
          return { record: found.record, repo: made };
        })(),
      ]);
      const ts0 = performance.now();
      const sb = await create(runId);
      const ts1 = performance.now();
      const h = await hydrateFromBase(sb.channel, snapshot, record, { waitForBaseline: false, hostRepo: repo });
      const t1 = performance.now();
      into.push(t1 - t0 - (ts1 - ts0));
      withSandbox.push(t1 - t0);
      streamed.push(h.delta.streamed);
      // Both baselines must come out right, untimed (they finish in the background in a run).
      await Promise.all([h.baselineReady, h.hostBaseline]);
      await sb.destroy();
      await rm(objects, { recursive: true, force: true });
    };
    const rows: Array<{ name: string; ms: number[]; total: number[]; streamed: number[]; budget?: string; what: string }> = [];
    try {
      const scenario = async (name: string, what: string, budget: string | undefined, before: (round: number) => Promise<void>, after: (round: number) => Promise<void>) => {
        const ms: number[] = [];
        const total: number[] = [];
        const streamed: number[] = [];
        for (let round = 0; round < ROUNDS; round++) {
          await before(round);
          // The first run's base, written after its copy-in (untimed: it is off the next run's path).
          await createProjectBase({ engine, git: testGit, image, store, projectDir: dir });
          await after(round);
          await timeRepeat(ms, total, streamed);
          await timeFull();
        }
        rows.push({ name, ms, total, streamed, ...(budget ? { budget } : {}), what });
      };
      await scenario('workspace.hydrate.repeat', '10 files changed', '≤ 0.1×', async () => undefined, (r) => change(dir, 10, r));
      await scenario('workspace.hydrate.repeat.1000', '1,000 files changed', '≤ 0.3×', async () => undefined, (r) => change(dir, 1000, r + 100));
      await withBranch(dir);
      await scenario(
        'workspace.hydrate.repeat.branch',
        'after `git checkout` of a branch with 500 files changed, 100 added, 100 deleted',
        undefined,
        // The files the checkout wrote are older than the racy window when the base is read, as in real use.
        async () => {
          await sh(`cd ${dir} && ${git} checkout -q main`);
          await new Promise((r) => setTimeout(r, RACY_MS + 100));
        },
        () => sh(`cd ${dir} && ${git} checkout -q other`),
      );
    } finally {
      for (const sb of sandboxes) await sb.destroy().catch(() => undefined);
      await pruneProjectBases(engine, store, { all: true }).catch(() => undefined);
      manager.dispose();
      engine.dispose();
      await rm(work, { recursive: true, force: true });
    }
    const baseline = percentile(full, 50);
    const baselineTotal = percentile(fullWithSandbox, 50);
    return [
      ...rows.map((r) =>
        withRatio({
          name: r.name,
          value: percentile(r.ms, 50),
          unit: 'ms',
          baseline,
          ...(r.budget ? { budget: r.budget } : {}),
          note: `${r.what} since the base (${percentile(r.streamed, 50)} streamed): the scan beside the base's lookup and overlay volumes, then the delta streamed until the agent can start, sandbox start excluded as in workspace.hydrate; baseline workspace.hydrate of the same project, interleaved (median of ${full.length})`,
        }),
      ),
      ...rows.map((r) =>
        withRatio({
          name: `${r.name}.with-sandbox`,
          value: percentile(r.total, 50),
          unit: 'ms',
          baseline: baselineTotal,
          note: 'the same with the sandbox start on both sides',
        }),
      ),
    ];
  },
};

export const benchmarks: Benchmark[] = [repeatBench];
