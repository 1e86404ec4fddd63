/**
 * `attempts.wall`: an attempt group of three (one task, three models, a check) from start until all
 * three have ended, against the same three runs one after another, interleaved in the same run
 * (docs/architecture.md §8, §18). Real Docker, the built-in agent, the scripted fake upstream with a
 * model latency per answer (what dominates a real attempt, and what running attempts at once hides).
 */
import { StartAttemptsInput } from '../contracts/attempts';
import { StartRunInput } from '../contracts/runs';
import { createRunFixture, type RunFixture } from '../test/support/run-fixture';
import { percentile, withRatio, type Benchmark } from './harness';

const ROUNDS = 2;
/** Each scripted answer waits this long before its headers: a model's time to first token. */
const MODEL_LATENCY_MS = 1500;
const MODELS = ['claude-opus-4-5', 'claude-sonnet-4-5', 'claude-haiku-4-5'] as const;
const CHECK = { command: 'grep -qx 42 answer.txt', timeoutSec: 120 };

function script(f: RunFixture): void {
  for (const model of MODELS) {
    f.upstream.setScriptFor(model, [
      { delayMs: MODEL_LATENCY_MS, toolCalls: [{ name: 'write_file', input: { path: 'answer.txt', content: '42\n' } }] },
      { delayMs: MODEL_LATENCY_MS, toolCalls: [{ name: 'run_command', input: { command: 'cat answer.txt' } }] },
      { delayMs: MODEL_LATENCY_MS, toolCalls: [{ name: 'finish', input: { summary: 'answer is 42' } }] },
    ]);
  }
}

export const benchmarks: Benchmark[] = [
  {
    name: 'attempts.wall',
    requires: ['docker'],
    async run() {
      const f = await createRunFixture();
      try {
        const projectDir = await f.project({ 'answer.txt': '1\n', 'README.md': '# demo\n' });
        await f.services.settings.update({ attemptsConcurrency: 3 });
        const task = 'answer.txt must hold 42';
        const base = { projectDir, task, provider: 'anthropic', model: MODELS[0], check: CHECK, limits: { timeoutSec: 600 } };
        const ok = (r: { status: string; check?: { passed: boolean }; error?: { message: string } }) => {
          if (r.status !== 'done' || !r.check?.passed) throw new Error(`an attempt ended ${r.status}${r.check ? `, check ${r.check.passed ? 'passed' : 'failed'}` : ''}: ${r.error?.message ?? ''}`);
        };
        const together = async () => {
          script(f);
          const t0 = performance.now();
          const group = await f.services.attempts.start(StartAttemptsInput.parse({ run: base, attempts: MODELS.map((model) => ({ agent: 'builtin', model })) }));
          const runs = await Promise.all(group.attempts.map((a) => f.core.runs.wait(a.runId)));
          const ms = performance.now() - t0;
          runs.forEach(ok);
          return ms;
        };
        const oneByOne = async () => {
          script(f);
          const t0 = performance.now();
          for (const model of MODELS) ok(await f.core.runs.wait((await f.core.runs.start(StartRunInput.parse({ ...base, model }))).id));
          return performance.now() - t0;
        };
        await together(); // warm-up: image, page cache
        const groupMs: number[] = [];
        const serialMs: number[] = [];
        for (let i = 0; i < ROUNDS; i++) {
          serialMs.push(await oneByOne());
          groupMs.push(await together());
        }
        return [
          withRatio({
            name: 'attempts.wall',
            value: percentile(groupMs, 50),
            unit: 'ms',
            baseline: percentile(serialMs, 50),
            budget: '≤ 0.6×',
            note: `3 built-in attempts at once (concurrency 3, check each) vs the same 3 runs one after another; ${MODEL_LATENCY_MS} ms model latency per answer, p50 of ${ROUNDS}`,
          }),
        ];
      } finally {
        await f.close();
      }
    },
  },
];
