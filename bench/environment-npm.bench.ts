/**
 * `env.ready.prepared.npm` (docs/architecture.md §8, §16): a real npm package as published
 * (concat-map@0.0.1 with one injected bug, test/fixtures/npm-concat-map) in a Debian devcontainer
 * whose `postCreateCommand` is `npm install`, its registry reached over TLS signed by a company CA
 * the host trusts (the loopback stand-in of test/support/https-npm-registry.ts). From "start" to
 * the model receiving the output of the agent's first command (`npm test`), through the real run
 * path, on unchanged inputs so the run starts from the prepared environment — against the cold run
 * of the same project measured in the same run (prepared environments removed first: setup's
 * `npm install` runs and the run keeps a new one). Both find the engine's layer cache warm.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { StartRunInput } from '../contracts/runs';
import { percentile, withRatio, type Benchmark } from './harness';
import { airlockImageWithCa, concatMapProject, makeTestCa, NPM_FIXTURE, startTlsRegistry, TLS_REGISTRY_HOST } from '../test/support/https-npm-registry';
import { createRunFixture, exec, type RunFixture } from '../test/support/run-fixture';
import { sandboxImage } from '../test/integration/sandbox-support';

const ROUNDS = Number(process.env.AIRLOCK_BENCH_SAMPLES ?? 3);
const FIRST_COMMAND = 'npm test';

async function airlockPath(f: RunFixture, projectDir: string, setupAllow: string, trust = false): Promise<{ ms: number; prepared?: string }> {
  const posts = () => f.upstream.requests.filter((r) => r.method === 'POST').length;
  f.upstream.setScript([{ toolCalls: [{ name: 'run_command', input: { command: FIRST_COMMAND } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'ran the tests' } }] }]);
  const seen = posts();
  const t0 = performance.now();
  const run = await f.services.runs.start(StartRunInput.parse({ projectDir, task: 'fix the failing test', provider: 'anthropic', model: 'claude-sonnet-4-5', environment: 'devcontainer', setupAllowlist: [setupAllow], ...(trust ? { trustEnvironment: true } : {}) }));
  // The second generation request carries the command's output.
  while (posts() < seen + 2) {
    const r = await f.core.store.get(run.id);
    if (r.status === 'failed') throw new Error(`the run failed: ${r.error?.message ?? ''}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const ms = performance.now() - t0;
  const done = await f.core.runs.wait(run.id);
  if (done.status !== 'done') throw new Error(`the run ended ${done.status}: ${done.error?.message ?? ''}`);
  return { ms, ...(done.environment?.prepared ? { prepared: done.environment.prepared.status } : {}) };
}

export const benchmarks: Benchmark[] = [
  {
    name: 'env.ready.npm',
    requires: ['docker'],
    async run() {
      const caDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-bench-ca-'));
      const ca = await makeTestCa(caDir, TLS_REGISTRY_HOST);
      const registry = await startTlsRegistry(NPM_FIXTURE, ca);
      const f = await createRunFixture({ egressProxy: registry.egressProxy });
      await f.core.warm();
      const tag = await airlockImageWithCa(await sandboxImage(), ca.caPem, `airlock-bench-npm-ca-runtime:${process.pid}`, `bench-npm-${process.pid}`);
      f.core.image = async () => tag;
      const allow = `${TLS_REGISTRY_HOST}:${registry.port}`;
      try {
        const projectDir = await f.project(await concatMapProject(registry.url));
        await airlockPath(f, projectDir, allow, true); // accepted once; warm-up: devcontainer build, derived image
        const cold: number[] = [];
        const prepared: number[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          await f.services.environments.prune({});
          const c = await airlockPath(f, projectDir, allow);
          if (c.prepared !== 'created') throw new Error(`the cold run did not prepare (${c.prepared ?? 'none'})`);
          cold.push(c.ms);
          const p = await airlockPath(f, projectDir, allow);
          if (p.prepared !== 'reused') throw new Error(`the second run did not start prepared (${p.prepared ?? 'none'})`);
          prepared.push(p.ms);
        }
        return [
          withRatio({
            name: 'env.ready.prepared.npm',
            value: percentile(prepared, 50),
            unit: 'ms',
            baseline: percentile(cold, 50),
            budget: '≤ 0.5×',
            note: `concat-map@0.0.1 (Debian devcontainer, postCreateCommand npm install over TLS a host CA signed): start → model has the output of \`${FIRST_COMMAND}\`, started from the prepared environment (setup skipped; the app's warm pool), vs the cold run of the same project (setup's npm install, keeping the prepared environment); p50 of ${ROUNDS}`,
          }),
        ];
      } finally {
        await f.services.environments.prune({}).catch(() => undefined);
        await f.close();
        await registry.close();
        await exec('docker', ['rmi', '-f', tag]).catch(() => undefined);
        await rm(caDir, { recursive: true, force: true });
      }
    },
  },
];
