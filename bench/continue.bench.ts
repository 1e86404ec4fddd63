/**
 * `run.continue.ready`: from "continue" (runs:continue) to the agent's first model request, against
 * a fresh run's time from "start" to its first request, same project, interleaved in the same run
 * (docs/architecture.md §8, §15). Real Docker, the built-in agent, the scripted fake upstream.
 */
import { percentile, withRatio, type Benchmark } from './harness';
import { createRunFixture, type RunFixture } from '../test/support/run-fixture';

const ROUNDS = 4;
const FILES = 300;

/** Milliseconds from now until the fake upstream has received more than `seen` generation requests. */
async function untilRequest(f: RunFixture, seen: number, t0: number): Promise<number> {
  const generations = () => f.upstream.requests.filter((r) => r.method === 'POST').length;
  while (generations() <= seen) await new Promise((resolve) => setTimeout(resolve, 2));
  return performance.now() - t0;
}

export const benchmarks: Benchmark[] = [
  {
    name: 'run.continue.ready',
    requires: ['docker'],
    async run() {
      const f = await createRunFixture();
      try {
        const files: Record<string, string> = {};
        for (let i = 0; i < FILES; i++) files[`src/module-${i}.js`] = `export const value${i} = ${i};\n`.repeat(20);
        const projectDir = await f.project(files);
        const posts = () => f.upstream.requests.filter((r) => r.method === 'POST').length;
        // The turn before each continue writes a file, so the follow-up carries a result and a transcript.
        const firstTurn = [{ toolCalls: [{ name: 'write_file', input: { path: 'notes.md', content: 'from turn one\n' } }] }, { text: 'done' }];
        const fresh = async () => {
          const seen = posts();
          const t0 = performance.now();
          const run = await f.start({ projectDir, task: 'write notes', script: firstTurn });
          const ms = await untilRequest(f, seen, t0);
          const done = await f.core.runs.wait(run.id);
          if (done.status !== 'done') throw new Error(`the fresh run ended ${done.status}: ${done.error?.message ?? ''}`);
          return { ms, runId: run.id };
        };
        const follow = async (runId: string) => {
          f.upstream.setScript([{ text: 'done' }]);
          const seen = posts();
          const t0 = performance.now();
          const run = await f.services.runs.continue({ runId, task: 'and the empty case' });
          const ms = await untilRequest(f, seen, t0);
          const done = await f.core.runs.wait(run.id);
          if (done.status !== 'done' || done.thread?.conversation !== 'carried') throw new Error(`the follow-up ended ${done.status}: ${done.error?.message ?? ''}`);
          return ms;
        };
        await follow((await fresh()).runId); // warm-up: image, page cache
        const freshMs: number[] = [];
        const continueMs: number[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          const first = await fresh();
          freshMs.push(first.ms);
          continueMs.push(await follow(first.runId));
        }
        return [
          withRatio({
            name: 'run.continue.ready',
            value: percentile(continueMs, 50),
            unit: 'ms',
            baseline: percentile(freshMs, 50),
            budget: '≤ 1.2×',
            note: `continue → first model request vs a fresh run's start → first request, ${FILES} files, p50 of ${ROUNDS}`,
          }),
        ];
      } finally {
        await f.close();
      }
    },
  },
];
