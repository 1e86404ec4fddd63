import { spawn } from 'node:child_process';
import { newRunId } from '../contracts/ids';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DEFAULT_LIMITS } from '../core/sandbox/driver';
import { DockerDriver } from '../core/sandbox/docker/docker-driver';
import { connectEngine } from '../core/sandbox/docker/engine';
import { ensureSandboxImage } from '../core/sandbox/image';
import { SandboxManager, type Sandbox } from '../core/sandbox/sandbox';
import { finalPatch, listChanges } from '../core/workspace/changes';
import { collectResult } from '../core/workspace/collect';
import { ZERO_OID } from '../core/workspace/git-objects';
import { HostRepo } from '../core/workspace/host-repo';
import { hydrate } from '../core/workspace/hydrate';
import { SANDBOX_LAYOUT, gitArgv, gitEnv } from '../core/workspace/workspace-shell';
import { buildSandboxRepo, type GitHistory } from '../core/workspace/sandbox-repo';
import { snapshotProject } from '../core/workspace/snapshot';
import { startTlsEngine } from '../test/support/remote-engines';
import { percentile, sample, withRatio, type Benchmark, type BenchResult } from './harness';
import { testGit } from '../test/support/workspace-fixtures';

const FILES = 10_000;
const FILE_BYTES = 10_000; // 10k × 10 kB = 100 MB
const CHANGED = 100;
const WORDS = 'const let function return import export from await async if else for while class interface type extends new this value result error data index count item list map set get push length string number boolean'.split(' ');

/** Deterministic source-like text (compresses like code, not like zeros or random bytes). */
function sourceText(seed: number, bytes: number): string {
  let x = seed * 2654435761 + 1;
  const rnd = () => ((x = (x * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  let out = '';
  while (out.length < bytes) {
    const n = 3 + Math.floor(rnd() * 9);
    const words: string[] = [];
    for (let i = 0; i < n; i++) words.push(WORDS[Math.floor(rnd() * WORDS.length)] as string);
    out += `  ${words.join(' ')}; // ${Math.floor(rnd() * 1e9).toString(36)}\n`;
  }
  return out.slice(0, bytes);
}

let repo: Promise<string> | undefined;
/** 10k files / 100 MB in 100 folders, generated once per bench process. */
export function generatedRepo(): Promise<string> {
  repo ??= (async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-repo-'));
    for (let d = 0; d < 100; d++) await mkdir(path.join(dir, `pkg${d}`, 'src'), { recursive: true });
    const batch: Promise<void>[] = [];
    for (let i = 0; i < FILES; i++) {
      batch.push(writeFile(path.join(dir, `pkg${i % 100}`, 'src', `file${i}.ts`), sourceText(i, FILE_BYTES)));
      if (batch.length >= 64) await Promise.all(batch.splice(0));
    }
    await Promise.all(batch);
    return dir;
  })();
  return repo;
}

function sh(cmd: string, stdio: 'ignore' | 'pipe' = 'ignore', env: NodeJS.ProcessEnv = process.env): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn('sh', ['-c', cmd], { stdio: ['ignore', stdio, 'pipe'], env });
    let err = '';
    c.stderr?.on('data', (d: Buffer) => (err += d.toString()));
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd}: exit ${code}: ${err.trim()}`))));
  });
}

let env: Promise<{ manager: SandboxManager; image: string }> | undefined;
function sandboxes() {
  env ??= (async () => ({ manager: new SandboxManager(new DockerDriver({ env: process.env, engine: connectEngine(process.env) })), image: (await ensureSandboxImage({ env: process.env, engine: connectEngine(process.env) })).ref }))();
  return env;
}

export async function freshSandbox(): Promise<Sandbox> {
  const { manager, image } = await sandboxes();
  const runId = newRunId();
  return manager.create({ runId, image, limits: DEFAULT_LIMITS, network: 'none' });
}

const ROUNDS = 3;

const hydrateBench: Benchmark = {
  name: 'workspace.hydrate',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const dir = await generatedRepo();
    const ours: number[] = [];
    const full: number[] = [];
    const noStore: number[] = [];
    const base: number[] = [];
    // Alternate the two, each into its own fresh sandbox of the same shape; the median of each wins.
    for (let round = 0; round < ROUNDS; round++) {
      const a = await freshSandbox();
      const objects = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-objects-'));
      try {
        const t0 = performance.now();
        const snapshot = await snapshotProject(testGit, dir);
        // As a run does: the host writes its own baseline from the same bytes while they stream.
        const repo = await HostRepo.create(testGit, path.join(objects, 'objects.git'));
        const h = await hydrate(a.channel, snapshot, { waitForBaseline: false, hostRepo: repo });
        ours.push(performance.now() - t0);
        await Promise.all([h.baselineReady, h.hostBaseline]);
        full.push(performance.now() - t0);
      } finally {
        await a.destroy();
        await rm(objects, { recursive: true, force: true });
      }
      const c = await freshSandbox();
      try {
        const t0 = performance.now();
        await hydrate(c.channel, await snapshotProject(testGit, dir), { waitForBaseline: false });
        noStore.push(performance.now() - t0);
      } finally {
        await c.destroy();
      }
      const b = await freshSandbox();
      try {
        const t0 = performance.now();
        await sh(`tar -c -C ${dir} . | docker exec -i -u 1000:1000 ${b.info.id} tar -x -C /workspace -f -`);
        base.push(performance.now() - t0);
      } finally {
        await b.destroy();
      }
    }
    return [
      withRatio({
        name: 'workspace.hydrate',
        value: percentile(ours, 50),
        unit: 'ms',
        baseline: percentile(base, 50),
        budget: '≤ 1.2×',
        note: `${FILES} files / ${(FILES * FILE_BYTES) / 1e6} MB: scan + copy in through the channel until the agent can start, vs tar c | docker exec -i tar x (median of ${ROUNDS})`,
      }),
      withRatio({
        name: 'workspace.hydrate.no-host-store',
        value: percentile(noStore, 50),
        unit: 'ms',
        baseline: percentile(base, 50),
        note: 'same, without writing the host object store (what the host baseline costs the copy)',
      }),
      withRatio({
        name: 'workspace.hydrate.baseline',
        value: percentile(full, 50),
        unit: 'ms',
        baseline: percentile(base, 50),
        note: 'same, until the sandbox baseline and the host baseline are recorded and verified (in the background after the copy)',
      }),
    ];
  },
};

let history: Promise<string> | undefined;
/** The generated project as a git repository: one commit of everything, then 60 commits of 20 edited files each. */
function generatedHistory(): Promise<string> {
  history ??= (async () => {
    const src = await generatedRepo();
    const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-history-'));
    const git = `git -c user.name=bench -c user.email=bench@example.invalid -c init.defaultBranch=main`;
    await sh(`cp -r ${src}/. ${dir}/ && cd ${dir} && ${git} init -q && ${git} add -A && ${git} commit -qm initial`);
    for (let c = 0; c < 60; c++) {
      for (let k = 0; k < 20; k++) {
        const i = (c * 20 + k) * 7 % FILES;
        await writeFile(path.join(dir, `pkg${i % 100}`, 'src', `file${i}.ts`), sourceText(i + 100_000 * (c + 1), FILE_BYTES));
      }
      await sh(`cd ${dir} && ${git} commit -qam 'change ${c}'`);
    }
    // As most working repositories are: packed.
    await sh(`cd ${dir} && git gc -q`);
    return dir;
  })();
  return history;
}

const hydrateGitBench: Benchmark = {
  name: 'workspace.hydrate.git',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const dir = await generatedHistory();
    const repoMs: number[] = [];
    let repoBytes = 0;
    const timed = async (gitHistory: GitHistory | undefined): Promise<number> => {
      const sb = await freshSandbox();
      const objects = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-objects-'));
      try {
        const t0 = performance.now();
        const repo = await HostRepo.create(testGit, path.join(objects, 'objects.git'));
        const h = await hydrate(sb.channel, await snapshotProject(testGit, dir), { waitForBaseline: false, hostRepo: repo, ...(gitHistory !== undefined ? { gitHistory } : {}) });
        const ms = performance.now() - t0;
        if (gitHistory === 50 && h.sandboxRepo) {
          repoMs.push(h.sandboxRepo.waitMs);
          repoBytes = h.sandboxRepo.bytes;
        }
        return ms;
      } finally {
        await sb.destroy();
        await rm(objects, { recursive: true, force: true });
      }
    };
    const without: number[] = [];
    const fifty: number[] = [];
    const none: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      without.push(await timed(undefined));
      fifty.push(await timed(50));
      none.push(await timed('none'));
    }
    const snapshot = await snapshotProject(testGit, dir);
    const buildMs = await sample(ROUNDS, () => buildSandboxRepo(snapshot, 50), 0);
    return [
      withRatio({
        name: 'workspace.hydrate.git',
        value: percentile(fifty, 50),
        unit: 'ms',
        baseline: percentile(without, 50),
        note: `${FILES} files / ${(FILES * FILE_BYTES) / 1e6} MB, 61 commits: hydrate with a sandbox repository of 50 commits (${(repoBytes / 1e6).toFixed(1)} MB .git) vs without one (median of ${ROUNDS})`,
      }),
      withRatio({
        name: 'workspace.hydrate.git.none',
        value: percentile(none, 50),
        unit: 'ms',
        baseline: percentile(without, 50),
        note: 'same, with history none (one fresh commit of HEAD)',
      }),
      { name: 'workspace.hydrate.git.wait', value: percentile(repoMs, 50), unit: 'ms', note: 'of which: what the repository (built and installed while the copy streams) added after the copy was in place' },
      { name: 'workspace.hydrate.git.build', value: percentile(buildMs, 50), unit: 'ms', note: 'of which: building the 50-commit repository on the host (history scan, pack), timed alone after the hydrates' },
    ];
  },
};

/** What collect did before results were derived on the host: in-sandbox listing + patch + base blobs. */
async function inSandboxCollect(sb: Sandbox): Promise<number> {
  const changes = await listChanges(sb.channel);
  await finalPatch(sb.channel);
  const oids = [...new Set(changes.map((c) => c.oldOid).filter((o) => o !== ZERO_OID))];
  await sb.channel.run({ argv: gitArgv(SANDBOX_LAYOUT, ['cat-file', '--batch']), env: gitEnv(SANDBOX_LAYOUT), stdin: `${oids.join('\n')}\n`, maxOutputBytes: 1024 ** 3 });
  return changes.length;
}

const collectBench: Benchmark = {
  name: 'workspace.collect',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const dir = await generatedRepo();
    const sb = await freshSandbox();
    const objects = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-objects-'));
    try {
      const snapshot = await snapshotProject(testGit, dir);
      const repo = await HostRepo.create(testGit, path.join(objects, 'objects.git'));
      const hydrated = await hydrate(sb.channel, snapshot, { hostRepo: repo });
      const baseCommit = await (hydrated.hostBaseline as Promise<string>);
      const touch = Array.from({ length: CHANGED }, (_, i) => `pkg${i % 100}/src/file${i * 97}.ts`);
      await sb.channel.run({ argv: ['sh', '-c', ['set -e', 'cd /workspace', ...touch.map((f) => `printf '  changed line;\\n' >> ${f}`)].join('\n')] });
      const collect = async () => {
        const { result } = await collectResult(sb.channel, { repo, baseCommit, manifest: hydrated.manifest, isIgnored: snapshot.isIgnored });
        return result.changes.length;
      };
      for (let i = 0; i < 2; i++) {
        await collect();
        await inSandboxCollect(sb);
      }
      const ours: number[] = [];
      const base: number[] = [];
      for (let round = 0; round < 5; round++) {
        let t0 = performance.now();
        const n = await collect();
        ours.push(performance.now() - t0);
        if (n !== CHANGED) throw new Error(`expected ${CHANGED} changes, got ${n}`);
        t0 = performance.now();
        const m = await inSandboxCollect(sb);
        base.push(performance.now() - t0);
        if (m !== CHANGED) throw new Error(`expected ${CHANGED} changes in the sandbox, got ${m}`);
      }
      return [
        withRatio({
          name: 'workspace.collect',
          value: percentile(ours, 50),
          unit: 'ms',
          baseline: percentile(base, 50),
          budget: '≤ 1.5×',
          note: `${CHANGED} changed files of ${FILES}: host-derived collect (hints, tar of the hinted paths parsed on the host, host git diff) vs the in-sandbox git diff collect it replaced (median of 5)`,
        }),
      ];
    } finally {
      await sb.destroy();
      await rm(objects, { recursive: true, force: true });
    }
  },
};

const diffBench: Benchmark = {
  name: 'workspace.diff',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const dir = await generatedRepo();
    const sb = await freshSandbox();
    try {
      await hydrate(sb.channel, await snapshotProject(testGit, dir));
      // The baseline's own index, copied: `git diff` against it is plain git in the container.
      const touch = Array.from({ length: CHANGED }, (_, i) => `pkg${i % 100}/src/file${i * 97}.ts`);
      // The agent's commands change the files; /airlock is the helper's (root's) own, not theirs (§2.3).
      const script = ['set -e', 'cd /workspace', ...touch.map((f) => `printf '  changed line;\\n' >> ${f}`)].join('\n');
      const edited = await sb.channel.run({ argv: ['sh', '-c', script] });
      if (edited.exitCode !== 0) throw new Error(`changing the files failed: ${edited.stderr.toString('utf8').slice(0, 500)}`);
      await sh(`docker exec -u 0 ${sb.info.id} cp /airlock/changes.index /airlock/plain.index`);
      const ours: number[] = [];
      const base: number[] = [];
      const plainDiff = `docker exec -u 0 -e GIT_INDEX_FILE=/airlock/plain.index -e GIT_CONFIG_GLOBAL=/dev/null ${sb.info.id} git --git-dir=/airlock/baseline.git --work-tree=/workspace -c safe.directory=* diff --no-color`;
      for (let i = 0; i < 2; i++) {
        await listChanges(sb.channel);
        await sh(plainDiff);
      }
      for (let round = 0; round < 5; round++) {
        let t0 = performance.now();
        const changes = await listChanges(sb.channel);
        await finalPatch(sb.channel);
        ours.push(performance.now() - t0);
        if (changes.length !== CHANGED) throw new Error(`expected ${CHANGED} changes, got ${changes.length}`);
        t0 = performance.now();
        await sh(plainDiff, 'pipe');
        base.push(performance.now() - t0);
      }
      return [
        withRatio({
          name: 'workspace.diff',
          value: percentile(ours, 50),
          unit: 'ms',
          baseline: percentile(base, 50),
          budget: '≤ 1.2×',
          note: `${CHANGED} changed files of ${FILES}: listChanges + finalPatch vs docker exec git diff (median of 5)`,
        }),
      ];
    } finally {
      await sb.destroy();
      const d = await repo;
      if (d) await rm(d, { recursive: true, force: true });
      (await sandboxes()).manager.dispose();
    }
  },
};

/**
 * The same hydrate to an engine reached over TLS (docs/architecture.md §13): a TLS endpoint on
 * loopback in front of the local engine, as the remote-engine test starts it. The baseline is the
 * docker CLI's `tar | docker exec -i` pointed at the same endpoint, so both pay the same TLS hop.
 */
const hydrateRemoteBench: Benchmark = {
  name: 'workspace.hydrate.remote',
  requires: ['docker'],
  async run(): Promise<BenchResult[]> {
    const dir = await generatedRepo();
    const endpoint = await startTlsEngine();
    const cliEnv = { ...process.env, ...endpoint.env };
    const engine = await connectEngine(cliEnv);
    const manager = new SandboxManager(new DockerDriver({ engine, env: cliEnv }));
    const { image } = await sandboxes();
    const fresh = () => manager.create({ runId: newRunId(), image, limits: DEFAULT_LIMITS, network: 'none' });
    const ours: number[] = [];
    const base: number[] = [];
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const a = await fresh();
        const objects = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-objects-'));
        try {
          const t0 = performance.now();
          const repo = await HostRepo.create(testGit, path.join(objects, 'objects.git'));
          await hydrate(a.channel, await snapshotProject(testGit, dir), { waitForBaseline: false, hostRepo: repo });
          ours.push(performance.now() - t0);
        } finally {
          await a.destroy();
          await rm(objects, { recursive: true, force: true });
        }
        const b = await fresh();
        try {
          const t0 = performance.now();
          await sh(`tar -c -C ${dir} . | docker exec -i -u 1000:1000 ${b.info.id} tar -x -C /workspace -f -`, 'ignore', cliEnv);
          base.push(performance.now() - t0);
        } finally {
          await b.destroy();
        }
      }
    } finally {
      await manager.shutdown();
      engine.dispose();
      await endpoint.close();
    }
    return [
      withRatio({
        name: 'workspace.hydrate.remote',
        value: percentile(ours, 50),
        unit: 'ms',
        baseline: percentile(base, 50),
        budget: '≤ 1.2×',
        note: `${FILES} files / ${(FILES * FILE_BYTES) / 1e6} MB over a TLS engine endpoint: scan + copy in through the channel, vs the docker CLI's tar | docker exec -i over the same endpoint (median of ${ROUNDS})`,
      }),
    ];
  },
};

export const benchmarks: Benchmark[] = [hydrateBench, hydrateGitBench, hydrateRemoteBench, collectBench, diffBench];
