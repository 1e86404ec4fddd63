/**
 * `env.ready.cold` (docs/architecture.md §8, §16): a Go project's devcontainer, from "start" to the
 * model receiving the output of the agent's first command (`go test ./...`), through the real run
 * path (trust check, devcontainer build and derived image through the engine connection, hardened
 * sandbox, hydrate, setup phase, built-in agent, the scripted fake upstream) — against the by-hand
 * path measured in the same run: `docker build` of the same Dockerfile, then `docker run IMAGE sh -c
 * '<setup>; go test ./...'` on the project. Both sides find the engine's layer cache warm (the
 * Dockerfile's layers, and for Airlock the derived image once made): "cold" means no prepared
 * environment (each cold round first removes the prepared environments, and the run keeps a new one).
 *
 * `env.ready.prepared`: the same start → output path on unchanged inputs, so the run starts from the
 * prepared environment the cold run kept (setup not run again), against both the by-hand cold path
 * and a bare `docker run` of that prepared image running the same command as uid 1000 with its kept
 * home (`docker run --rm -u 1000:1000 -e HOME=/opt/airlock-prepared/home/airlock -v project:/src:ro
 * IMAGE go test ./...`). All four are interleaved in one run. Airlock runs as the desktop app does,
 * with its warm pool (`core.warm()`): after the cold run the pool starts a sandbox of the prepared
 * image while the by-hand path runs, and the prepared run claims it.
 */
import { spawn } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import path from 'node:path';
import { StartRunInput } from '../contracts/runs';
import { percentile, withRatio, type Benchmark } from './harness';
import { NODELESS_DOCKERFILE, nodelessImage } from '../test/support/environment-images';
import { createRunFixture, type RunFixture } from '../test/support/run-fixture';

const ROUNDS = Number(process.env.AIRLOCK_BENCH_SAMPLES ?? 3);
// What a Go prebuild does: vet, and build the tests without running any, so the build cache the
// prepared environment keeps holds the test binary's packages (docs/architecture.md §16).
const SETUP = "go vet ./... && go test -run '^$' ./...";
const FIRST_COMMAND = 'go test ./...';
const PROJECT = {
  'go.mod': 'module example.com/calc\n\ngo 1.19\n',
  'calc.go': 'package calc\n\nfunc Add(a, b int) int { return a - b }\n',
  'calc_test.go': 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("Add(2, 3) != 5")\n\t}\n}\n',
};

/** What `go test` prints for the project's failing test: a by-hand run must have really run it. */
const TEST_OUTPUT = 'Add(2, 3) != 5';

function docker(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.on('error', reject);
    // go test exits 1 on the failing test: that is the output the agent needs, not an error. Any
    // other exit 1 (a project the user cannot read: "stat .: permission denied") is not a baseline.
    child.on('exit', (code) => {
      if (code === 0 && args[0] !== 'run') resolve();
      else if (args[0] === 'run' && (code === 0 || code === 1) && out.includes(TEST_OUTPUT)) resolve();
      else reject(new Error(`docker ${args[0]} exited ${code} without the test's output: ${out.trim().slice(-500)}`));
    });
  });
}

async function airlockPath(f: RunFixture, projectDir: string, trust = false): Promise<number> {
  const posts = () => f.upstream.requests.filter((r) => r.method === 'POST').length;
  f.upstream.setScript([{ toolCalls: [{ name: 'run_command', input: { command: FIRST_COMMAND } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'ran the tests' } }] }]);
  const seen = posts();
  const t0 = performance.now();
  const run = await f.services.runs.start(StartRunInput.parse({ projectDir, task: 'fix the failing test', provider: 'anthropic', model: 'claude-sonnet-4-5', ...(trust ? { trustEnvironment: true } : {}) }));
  // The second generation request carries the command's output.
  while (posts() < seen + 2) {
    const r = await f.core.store.get(run.id);
    if (r.status === 'failed') throw new Error(`the run failed: ${r.error?.message ?? ''}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const ms = performance.now() - t0;
  const done = await f.core.runs.wait(run.id);
  if (done.status !== 'done') throw new Error(`the run ended ${done.status}: ${done.error?.message ?? ''}`);
  return ms;
}

async function byHand(projectDir: string, tag: string): Promise<number> {
  const t0 = performance.now();
  await docker(['build', '-q', '-t', tag, '-f', path.join(projectDir, '.devcontainer/Dockerfile'), path.join(projectDir, '.devcontainer')]);
  await docker(['run', '--rm', '-v', `${projectDir}:/src:ro`, '-w', '/src', tag, 'sh', '-c', `${SETUP}; ${FIRST_COMMAND}`]);
  return performance.now() - t0;
}

async function barePrepared(projectDir: string, image: string): Promise<number> {
  const t0 = performance.now();
  await docker(['run', '--rm', '-u', '1000:1000', '-e', 'HOME=/opt/airlock-prepared/home/airlock', '-v', `${projectDir}:/src:ro`, '-w', '/src', image, 'sh', '-c', FIRST_COMMAND]);
  return performance.now() - t0;
}

export const benchmarks: Benchmark[] = [
  {
    name: 'env.ready',
    requires: ['docker'],
    async run() {
      await nodelessImage();
      const f = await createRunFixture();
      // As the desktop app runs: it keeps started sandboxes warm, now also one of the environment's
      // image after each run on it (docs/architecture.md §16, "The prepared path"). The CLI keeps none.
      await f.core.warm();
      const tag = `airlock-bench-byhand:${process.pid}`;
      try {
        const projectDir = await f.project({
          ...PROJECT,
          '.devcontainer/devcontainer.json': JSON.stringify({ build: { dockerfile: 'Dockerfile' }, postCreateCommand: SETUP }),
          '.devcontainer/Dockerfile': NODELESS_DOCKERFILE,
        });
        // The bare run is uid 1000, as the sandbox's user: it must be able to read the project (mkdtemp makes it 0700).
        await chmod(projectDir, 0o755);
        // Accepted once, as a user would; the runs below find it trusted.
        await airlockPath(f, projectDir, true); // warm-up: derived image, page cache
        await byHand(projectDir, tag);
        const cold: number[] = [];
        const hand: number[] = [];
        const prepared: number[] = [];
        const bare: number[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          await f.services.environments.prune({});
          cold.push(await airlockPath(f, projectDir));
          hand.push(await byHand(projectDir, tag));
          const kept = (await f.services.environments.list({})).environments[0];
          if (!kept) throw new Error('the cold run kept no prepared environment');
          prepared.push(await airlockPath(f, projectDir));
          bare.push(await barePrepared(projectDir, kept.image));
        }
        const preparedP50 = percentile(prepared, 50);
        const bareP50 = percentile(bare, 50);
        return [
          withRatio({
            name: 'env.ready.cold',
            value: percentile(cold, 50),
            unit: 'ms',
            baseline: percentile(hand, 50),
            budget: '≤ 1.3×',
            note: `start → model has the output of \`${FIRST_COMMAND}\` (devcontainer build, derived image, sandbox, hydrate, setup \`${SETUP}\`, keeping the prepared environment), vs docker build + docker run sh -c 'setup; test'; layer cache warm; p50 of ${ROUNDS}`,
          }),
          withRatio({
            name: 'env.ready.prepared',
            value: preparedP50,
            unit: 'ms',
            baseline: percentile(hand, 50),
            budget: '≤ 0.2×',
            note: `the same on unchanged inputs: started from the prepared environment (setup skipped; the app's warm pool holds a started sandbox of it), vs the by-hand cold path; a bare docker run of the prepared image running \`${FIRST_COMMAND}\` took ${Math.round(bareP50)} ms (${(preparedP50 / bareP50).toFixed(2)}×, budget ≤ 1.5×); p50 of ${ROUNDS}`,
          }),
          withRatio({
            name: 'env.ready.prepared.bare',
            value: preparedP50,
            unit: 'ms',
            baseline: bareP50,
            budget: '≤ 1.5×',
            note: `env.ready.prepared against \`docker run --rm -u 1000:1000 -e HOME=<kept home> PREPARED ${FIRST_COMMAND}\`; p50 of ${ROUNDS}`,
          }),
        ];
      } finally {
        await f.services.environments.prune({}).catch(() => undefined);
        await f.close();
        await docker(['image', 'rm', tag]).catch(() => undefined);
      }
    },
  },
];
