/** One measured figure; `baseline` is measured in the same run, `ratio = value / baseline`. */
export interface BenchResult {
  name: string;
  value: number;
  unit: string;
  baseline?: number;
  ratio?: number;
  /** Budget from docs/architecture.md §8 as a ratio (or absolute, see unit), shown beside the figure. */
  budget?: string;
  note?: string;
}

/** A bench file exports `benchmarks: Benchmark[]`; `bench/run.ts` finds every `bench/*.bench.ts`. */
export interface Benchmark {
  name: string;
  /** What must be present (Docker, Chromium…); when missing the bench is reported as not run. */
  requires?: Array<'docker' | 'chromium' | 'qemu' | 'runsc' | 'podman'>;
  run(): Promise<BenchResult[]>;
}

/** p-th percentile (0..100) of samples, by nearest rank. */
export function percentile(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** Times `fn` `n` times after `warmup` unmeasured runs; returns milliseconds per run. */
export async function sample(n: number, fn: () => Promise<unknown>, warmup = 2): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await fn();
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return out;
}

export function withRatio(r: Omit<BenchResult, 'ratio'>): BenchResult {
  return r.baseline ? { ...r, ratio: r.value / r.baseline } : r;
}
