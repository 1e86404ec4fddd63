import { readdir, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Benchmark, BenchResult } from './harness';

const here = path.dirname(fileURLToPath(import.meta.url));

function has(cmd: string, args: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    const c = spawn(cmd, args, { stdio: 'ignore' });
    c.on('error', () => resolve(false));
    c.on('exit', (code) => resolve(code === 0));
  });
}

const probes = {
  docker: () => has('docker', ['info']),
  chromium: () => has('/usr/bin/chromium', ['--version']),
  qemu: () => has('qemu-system-x86_64', ['--version']),
  runsc: () => has('sh', ['-c', "docker info --format '{{json .Runtimes}}' | grep -q runsc"]),
  podman: () => has('curl', ['-sf', '--unix-socket', process.env.AIRLOCK_TEST_PODMAN_SOCKET || '/run/podman/podman.sock', 'http://d/_ping']),
};

function fmt(n: number | undefined, digits = 3): string {
  if (n === undefined || Number.isNaN(n)) return '';
  return Math.abs(n) >= 100 ? n.toFixed(0) : n.toPrecision(digits);
}

async function main(): Promise<void> {
  const filter = process.argv[2];
  const files = (await readdir(here)).filter((f) => f.endsWith('.bench.ts')).sort();
  const results: BenchResult[] = [];
  for (const file of files) {
    const mod = (await import(path.join(here, file))) as { benchmarks: Benchmark[] };
    for (const bench of mod.benchmarks) {
      if (filter && !bench.name.includes(filter)) continue;
      const missing: string[] = [];
      for (const r of bench.requires ?? []) if (!(await probes[r]())) missing.push(r);
      if (missing.length) {
        results.push({ name: bench.name, value: Number.NaN, unit: '', note: `not run: needs ${missing.join(', ')}` });
        continue;
      }
      process.stderr.write(`bench ${bench.name} …\n`);
      try {
        results.push(...(await bench.run()));
      } catch (err) {
        results.push({ name: bench.name, value: Number.NaN, unit: '', note: `failed: ${(err as Error).message}` });
      }
    }
  }
  const rows = results.map((r) => `| ${r.name} | ${fmt(r.value)} ${r.unit} | ${fmt(r.baseline)} | ${fmt(r.ratio)} | ${r.budget ?? ''} | ${r.note ?? ''} |`);
  process.stdout.write(['| bench | value | baseline | ratio | budget | note |', '|---|---|---|---|---|---|', ...rows].join('\n') + '\n');
  await writeFile(path.join(here, 'results.json'), JSON.stringify(results, null, 2));
  process.stdout.write(`${JSON.stringify(results)}\n`);
}

await main();
