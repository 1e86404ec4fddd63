/**
 * VM sandboxes (issue 6): `vm.ready` = QemuDriver create → helper hello → first command output,
 * `vm.ready.warm` = the same from a pre-booted VM (SandboxManager.warm), and `vm.wipe` = destroy with
 * verification; the hardened Docker sandbox through the same
 * SandboxManager path is the baseline beside each. Boots are few (2) and always wiped: under
 * software emulation (no KVM) each takes tens of seconds.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DockerDriver } from '../core/sandbox/docker/docker-driver';
import type { SandboxDriver, SandboxSpec } from '../core/sandbox/driver';
import { ensureSandboxImage } from '../core/sandbox/image';
import { ensureBaseDisk } from '../core/sandbox/qemu/base-disk';
import { QemuDriver } from '../core/sandbox/qemu/qemu-driver';
import { SandboxManager } from '../core/sandbox/sandbox';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';

const VM_SAMPLES = 2;
const DOCKER_SAMPLES = 3;

interface ReadyWipe {
  ready: number[];
  wipe: number[];
}

async function measure(driver: SandboxDriver, spec: Omit<SandboxSpec, 'runId'>, n: number): Promise<ReadyWipe> {
  const manager = new SandboxManager(driver, { helloTimeoutMs: 600_000 });
  const out: ReadyWipe = { ready: [], wipe: [] };
  try {
    for (let i = 0; i < n; i++) {
      const runId = `r-bench-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
      const t0 = performance.now();
      const sandbox = await manager.create({ ...spec, runId });
      try {
        const r = await sandbox.channel.run({ argv: ['echo', 'ready'] });
        if (r.stdout.toString() !== 'ready\n') throw new Error(`unexpected first output: ${JSON.stringify(r.stdout.toString())}`);
        out.ready.push(performance.now() - t0);
      } finally {
        const t1 = performance.now();
        const proof = await sandbox.destroy();
        out.wipe.push(performance.now() - t1);
        if (proof.leftovers.length > 0) throw new Error(`wipe left ${proof.leftovers.join(', ')}`);
      }
    }
  } finally {
    await manager.shutdown().catch(() => undefined);
  }
  return out;
}

/** One create from a warm pool of one pre-booted VM (the pool's refill is drained afterwards). */
async function measureWarm(driver: SandboxDriver, spec: Omit<SandboxSpec, 'runId'>): Promise<number> {
  const manager = new SandboxManager(driver, { helloTimeoutMs: 600_000 });
  try {
    await manager.warm(spec, 1);
    const t0 = performance.now();
    const sandbox = await manager.create({ ...spec, runId: `r-bench-warm-${randomBytes(4).toString('hex')}` });
    const r = await sandbox.channel.run({ argv: ['echo', 'ready'] });
    const ms = performance.now() - t0;
    if (r.stdout.toString() !== 'ready\n') throw new Error('unexpected first output from the warm VM');
    const proof = await sandbox.destroy();
    if (proof.leftovers.length > 0) throw new Error(`wipe left ${proof.leftovers.join(', ')}`);
    return ms;
  } finally {
    await manager.warm(spec, 0).catch(() => undefined);
    await manager.shutdown().catch(() => undefined);
  }
}

export const benchmarks: Benchmark[] = [
  {
    name: 'vm',
    requires: ['qemu', 'docker'],
    async run(): Promise<BenchResult[]> {
      const { ref } = await ensureSandboxImage();
      const runsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-vm-bench-'));
      const qemu = new QemuDriver({ paths: { runsDir } });
      try {
        await qemu.checkAvailable();
        // The base disk is made once per image version: not part of a run's start-up.
        await ensureBaseDisk(ref, qemu.paths);
        const accel = await qemu.accel();
        const limits = { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 };
        const vm = await measure(qemu, { image: ref, limits, network: 'none' }, VM_SAMPLES);
        const docker = await measure(new DockerDriver(), { image: ref, limits, network: 'none' }, DOCKER_SAMPLES);
        const warm = await measureWarm(qemu, { image: ref, limits, network: 'none' });
        const mode = accel.accel === 'tcg' ? 'TCG software emulation (no KVM)' : accel.accel.toUpperCase();
        const load = os.loadavg()[0]?.toFixed(1);
        return [
          withRatio({
            name: 'vm.ready',
            value: percentile(vm.ready, 50),
            unit: 'ms',
            baseline: percentile(docker.ready, 50),
            note: `QEMU ${mode}; create → hello → first command output, p50 of ${VM_SAMPLES}; baseline: hardened Docker sandbox, same path; load avg ${load}`,
          }),
          withRatio({
            name: 'vm.ready.warm',
            value: warm,
            unit: 'ms',
            baseline: percentile(vm.ready, 50),
            budget: '≤ 0.2× (as sandbox.ready.warm)',
            note: 'a pre-booted VM from SandboxManager.warm(spec, 1) → first command output; baseline: vm.ready',
          }),
          withRatio({
            name: 'vm.wipe',
            value: percentile(vm.wipe, 50),
            unit: 'ms',
            baseline: percentile(docker.wipe, 50),
            budget: '≤ 150 ms',
            note: 'kill QEMU, delete overlay/scratch/sockets, verify no process or file; baseline: Docker sandbox wipe',
          }),
        ];
      } finally {
        for (const sb of await qemu.list()) await qemu.destroy(sb.runId).catch(() => undefined);
        qemu.dispose();
        await rm(runsDir, { recursive: true, force: true });
      }
    },
  },
];
