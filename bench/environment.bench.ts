/**
 * `env.ready.cold` (docs/architecture.md §8, §16): a Go project's devcontainer, from "start" to the
 * model receiving the output of the agent's first command (`go test ./...`), through the real run
 * path (trust check, devcontainer build and derived image through the engine connection, hardened
 * sandbox, hydrate, setup phase, built-in agent, the scripted fake upstream) — against the by-hand
 * path measured in the same run: `docker build` of the same Dockerfile, then `docker run IMAGE sh -c
 * '<setup>; go test ./...'` on the project. Both sides find the engine's layer cache warm (the
 * Dockerfile's layers, and for Airlock the derived image once made): "cold" means no prepared
 * environment. `env.ready.prepared` needs prepared environments, which are not built yet.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { StartRunInput } from '../contracts/runs';
import { percentile, withRatio, type Benchmark } from './harness';
import { NODELESS_DOCKERFILE, nodelessImage } from '../test/support/environment-images';
import { createRunFixture, type RunFixture } from '../test/support/run-fixture';

const ROUNDS = Number(process.env.AIRLOCK_BENCH_SAMPLES ?? 3);
const SETUP = 'go vet ./...';
const FIRST_COMMAND = 'go test ./...';
const PROJECT = {
  'go.mod': 'module example.com/calc\n\ngo 1.19\n',
  'calc.go': 'package calc\n\nfunc Add(a, b int) int { return a - b }\n',
  'calc_test.go': 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("Add(2, 3) != 5")\n\t}\n}\n',
};

function docker(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    // go test exits 1 on the failing test: that is the output the agent needs, not an error.
    child.on('exit', (code) => (code === 0 || (args[0] === 'run' && code === 1) ? resolve() : reject(new Error(`docker ${args[0]} exited ${code}: ${err.trim().slice(-500)}`))));
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

export const benchmarks: Benchmark[] = [
  {
    name: 'env.ready.cold',
    requires: ['docker'],
    async run() {
      await nodelessImage();
      const f = await createRunFixture();
      const tag = `airlock-bench-byhand:${process.pid}`;
      try {
        const projectDir = await f.project({
          ...PROJECT,
          '.devcontainer/devcontainer.json': JSON.stringify({ build: { dockerfile: 'Dockerfile' }, postCreateCommand: SETUP }),
          '.devcontainer/Dockerfile': NODELESS_DOCKERFILE,
        });
        // Accepted once, as a user would; the runs below find it trusted.
        await airlockPath(f, projectDir, true); // warm-up: derived image, page cache
        await byHand(projectDir, tag);
        const ours: number[] = [];
        const hand: number[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          ours.push(await airlockPath(f, projectDir));
          hand.push(await byHand(projectDir, tag));
        }
        return [
          withRatio({
            name: 'env.ready.cold',
            value: percentile(ours, 50),
            unit: 'ms',
            baseline: percentile(hand, 50),
            budget: '≤ 1.3×',
            note: `start → model has the output of \`${FIRST_COMMAND}\` (devcontainer build, derived image, sandbox, hydrate, setup \`${SETUP}\`), vs docker build + docker run sh -c 'setup; test'; layer cache warm; p50 of ${ROUNDS}`,
          }),
        ];
      } finally {
        await f.close();
        await docker(['image', 'rm', tag]).catch(() => undefined);
      }
    },
  },
];
