/**
 * A real `npm install` through the allowlist egress (issue 44): a small project whose devDependencies
 * pull a few hundred packages, installed in a hardened Docker sandbox (`--network none`, the egress
 * proxy reached over the channel, the registry allowed by the npm preset) against the same install on
 * the host, measured in the same run. Both start from an empty npm cache and no lockfile.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { applyNetworkPolicy } from '../core/network/network-policy';
import { DockerDriver } from '../core/sandbox/docker/docker-driver';
import { ensureSandboxImage } from '../core/sandbox/image';
import { SandboxManager } from '../core/sandbox/sandbox';
import { newRunId } from '../contracts/ids';
import { withRatio, type Benchmark, type BenchResult } from './harness';
import { connectEngine } from '../core/sandbox/docker/engine';

/** Stable, well-known dev tools; together about 300 packages. Exact versions: the same tree each run. */
const PACKAGE_JSON = JSON.stringify(
  {
    name: 'airlock-npm-bench',
    version: '1.0.0',
    private: true,
    devDependencies: { jest: '29.7.0', eslint: '8.57.0', typescript: '5.4.5', prettier: '3.2.5' },
  },
  null,
  2,
);
const NPM_FLAGS = ['install', '--no-audit', '--no-fund', '--ignore-scripts', '--no-package-lock', '--loglevel=error'];
/** The host trusts extra CAs through NODE_EXTRA_CA_CERTS; the sandbox image carries them in its system bundle. */
const CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr.on('data', (d: Buffer) => (err += d.toString()).length > 4000 && (err = err.slice(-4000)));
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args[0]} exited ${code}: ${err.trim().slice(-500)}`))));
  });
}

async function hostInstall(): Promise<{ ms: number; packages: number }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-npm-bench-'));
  try {
    await writeFile(path.join(dir, 'package.json'), PACKAGE_JSON);
    const t0 = performance.now();
    await run('npm', [...NPM_FLAGS, '--cache', path.join(dir, 'cache')], dir, { ...process.env, npm_config_update_notifier: 'false' });
    const ms = performance.now() - t0;
    const packages = (await readdir(path.join(dir, 'node_modules'))).filter((n) => !n.startsWith('.')).length;
    return { ms, packages };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export const benchmarks: Benchmark[] = [
  {
    name: 'network.egress.npm_install',
    requires: ['docker'],
    async run(): Promise<BenchResult[]> {
      const { ref } = await ensureSandboxImage({ env: process.env, engine: connectEngine(process.env) });
      const manager = new SandboxManager(new DockerDriver({ env: process.env, engine: connectEngine(process.env) }));
      const runId = newRunId();
      const sandbox = await manager.create({ runId, image: ref, limits: { memoryBytes: 2 * 1024 ** 3, cpus: 2, pids: 1024 }, network: 'none' });
      try {
        const net = await applyNetworkPolicy(sandbox, { mode: 'allowlist', presets: ['npm'] }, { presetContext: { env: process.env }, sandboxNetwork: 'none' });
        // What the channel and the egress proxy saw, for the note (and the failure, if any).
        let refused = 0;
        let tunnels = 0;
        let peak = 0;
        const failures = new Map<string, number>();
        const watching = [
          sandbox.channel.onDidRefuseConnections((e) => (refused = Math.max(refused, e.refused))),
          net.onDidConnect((e) => {
            tunnels += 1;
            // Attempts that ended with a reason (a failed dial, a refusal, the idle timeout), by reason.
            if (e.reason) failures.set(e.reason, (failures.get(e.reason) ?? 0) + 1);
          }),
        ];
        const sampler = setInterval(() => (peak = Math.max(peak, sandbox.channel.openConnections)), 20);
        watching.push({ dispose: () => clearInterval(sampler) });
        // Idle connections the helper closed for waiting ones at the cap (its claim; 0 if it cannot say).
        const closedIdle = () => sandbox.channel.helperStats().then((s) => s.closedIdle, () => 0);
        const seen = async () =>
          `egress connections ${tunnels} (at most ${peak} open at once), refused at the channel's cap ${refused}, closed idle for waiting ones ${await closedIdle()}, open after ${sandbox.channel.openConnections}` +
          (failures.size ? `; ended with a reason: ${[...failures].map(([why, n]) => `${n}× ${why}`).join(', ')}` : '');
        try {
          await sandbox.channel.writeFile('/workspace/npm-bench/package.json', PACKAGE_JSON);
          // The host's install first: the registry's caches are then as warm for the sandbox as for it.
          const host = await hostInstall();
          const t0 = performance.now();
          const r = await sandbox.channel.run({
            argv: ['npm', ...NPM_FLAGS, '--cache', '/tmp/npm-bench-cache'],
            cwd: '/workspace/npm-bench',
            env: { ...net.env, NODE_EXTRA_CA_CERTS: CA_BUNDLE, npm_config_update_notifier: 'false', HOME: '/home/airlock' },
            timeoutMs: 600_000,
          });
          const ms = performance.now() - t0;
          if (r.exitCode !== 0) throw new Error(`npm install in the sandbox exited ${r.exitCode} after ${(ms / 1000).toFixed(0)} s (host: ${(host.ms / 1000).toFixed(0)} s; ${await seen()}): ${r.stderr.toString().trim().slice(-300)}`);
          const count = await sandbox.channel.run({ argv: ['sh', '-c', 'ls /workspace/npm-bench/node_modules | wc -l'] });
          const packages = Number(count.stdout.toString().trim());
          // npm leaves its sockets for the process's exit to close: let those ends reach the host first.
          for (let i = 0; i < 50 && sandbox.channel.openConnections > 0; i++) await new Promise((r) => setTimeout(r, 100));
          return [
            withRatio({
              name: 'network.egress.npm_install',
              value: ms / 1000,
              unit: 's',
              baseline: host.ms / 1000,
              budget: '≤ 2×',
              note: `npm install of ${packages} top-level packages (host: ${host.packages}) with an empty cache, sandbox through the allowlist egress (npm preset) vs the host; ${await seen()}`,
            }),
          ];
        } finally {
          for (const w of watching) w.dispose();
          await net.close();
        }
      } finally {
        await manager.shutdown();
      }
    },
  },
];
