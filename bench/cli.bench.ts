/**
 * `cli.start`: `airlock --help` from bin/airlock.js (the built CLI; in this checkout that includes
 * the check that the bundles are fresh) against bare `node -e 0`, interleaved in the same run.
 * `cli.start.run_help` is `airlock run --help`: a heavy command's help, printed from core/cli/command-help.ts
 * without loading the command's module graph, so it should cost about what `cli.start` does.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureBuilt } from '../scripts/build.mjs';
import { percentile, withRatio, type Benchmark } from './harness';

const SAMPLES = 20;
const cli = fileURLToPath(new URL('../bin/airlock.js', import.meta.url));

function timeRun(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], cwd: path.dirname(cli) });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${args.join(' ')} exited ${code}: ${stderr}`))));
  });
}

export const benchmarks: Benchmark[] = [
  {
    name: 'cli.start',
    async run() {
      await ensureBuilt(['bundles']); // measure starts, not a rebuild
      const cases = { base: ['-e', '0'], help: [cli, '--help'], runHelp: [cli, 'run', '--help'] };
      const samples: Record<keyof typeof cases, number[]> = { base: [], help: [], runHelp: [] };
      for (let i = 0; i < SAMPLES + 2; i++) {
        for (const k of Object.keys(cases) as Array<keyof typeof cases>) {
          const ms = await timeRun(cases[k]);
          if (i >= 2) samples[k].push(ms); // two warm-up rounds (page cache)
        }
      }
      const base = percentile(samples.base, 50);
      return [
        withRatio({ name: 'cli.start', value: percentile(samples.help, 50), unit: 'ms', baseline: base, budget: '≤ 3×', note: `airlock --help vs node -e 0, p50 of ${SAMPLES}` }),
        withRatio({ name: 'cli.start.run_help', value: percentile(samples.runHelp, 50), unit: 'ms', baseline: base, note: `airlock run --help vs node -e 0, p50 of ${SAMPLES}` }),
      ];
    },
  },
];
