/**
 * VM sandboxes (issues 6, 13): `vm.ready` = QemuDriver create → helper hello → first command output
 * for a VM restored from the image's snapshot, against a cold kernel boot of the same image;
 * `vm.ready.boot` = the first start of an image version (boot, save the snapshot, restore);
 * `vm.ready.warm` = from a pre-started VM (SandboxManager.warm); `vm.wipe` = destroy with
 * verification, beside the Docker sandbox's; `vm.ready.derived` = `vm.ready` on a project
 * environment's derived image (docs/architecture.md §16: Debian with Airlock's runtime added), whose
 * root disk and snapshot are made before timing. Every figure names the accelerator it ran under.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { deriveSandboxImage } from '../core/environment/derived-image';
import { DockerDriver } from '../core/sandbox/docker/docker-driver';
import { connectEngine } from '../core/sandbox/docker/engine';
import type { SandboxDriver, SandboxSpec } from '../core/sandbox/driver';
import { ensureSandboxImage } from '../core/sandbox/image';
import { ensureBaseDisk } from '../core/sandbox/qemu/base-disk';
import { QemuDriver } from '../core/sandbox/qemu/qemu-driver';
import { SandboxManager } from '../core/sandbox/sandbox';
import { percentile, withRatio, type Benchmark, type BenchResult } from './harness';

const VM_SAMPLES = 2;
const RESTORE_SAMPLES = 3;
const DOCKER_SAMPLES = 3;
/** A project image without Airlock's runtime: the locally seeded Debian (as the test images build FROM). */
const PROJECT_BASE = 'debian:bookworm-slim';

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
      const { ref } = await ensureSandboxImage({ env: process.env, engine: connectEngine(process.env) });
      const runsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-vm-bench-'));
      const engine = await connectEngine(process.env);
      const engineOf = async () => engine;
      // Snapshots of this bench go to a private directory, so the first start really makes one.
      const snapAssets = await mkdtemp(path.join(os.tmpdir(), 'airlock-vm-bench-assets-'));
      const cold = new QemuDriver({ env: process.env, engine: engineOf, paths: { runsDir }, snapshots: false });
      const real = cold.paths;
      const restored = new QemuDriver({ env: process.env,
        engine: engineOf,
        paths: { runsDir, assetsDir: snapAssets, kernel: real.kernel, initramfs: real.initramfs, busybox: real.busybox, manifest: real.manifest, baseDir: real.baseDir },
        snapshots: true,
      });
      // The derived image's disk in the bench's own directory: the shared disk cache keeps its three.
      const onDerived = new QemuDriver({ env: process.env,
        engine: engineOf,
        paths: { runsDir, assetsDir: snapAssets, kernel: real.kernel, initramfs: real.initramfs, busybox: real.busybox, manifest: real.manifest, baseDir: path.join(snapAssets, 'base') },
        snapshots: true,
      });
      try {
        await cold.checkAvailable();
        // The base disk is made once per image version: not part of a run's start-up.
        await ensureBaseDisk(ref, cold.paths, engine, process.env);
        const accel = await cold.accel();
        const limits = { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 };
        const spec = { image: ref, limits, network: 'none' as const };
        const boot = await measure(cold, spec, VM_SAMPLES);
        // The first start makes the snapshot (boot to hello, save) and restores it: paid once per image version.
        const first = await measure(restored, spec, 1);
        const vm = await measure(restored, spec, RESTORE_SAMPLES);
        const docker = await measure(new DockerDriver({ env: process.env, engine: connectEngine(process.env) }), spec, DOCKER_SAMPLES);
        const warm = await measureWarm(restored, spec);
        // A project environment's derived image: its disk and snapshot are made once per image (not timed).
        const derivedRef = (await deriveSandboxImage(engine.docker, { baseRef: PROJECT_BASE, airlockRef: ref, emit: () => undefined, what: PROJECT_BASE })).ref;
        const derivedSpec = { ...spec, image: derivedRef };
        await ensureBaseDisk(derivedRef, onDerived.paths, engine, process.env);
        await measure(onDerived, derivedSpec, 1);
        // Interleaved with restores of Airlock's image, so both see the same load on a shared machine.
        const derived: number[] = [];
        const own: number[] = [];
        for (let i = 0; i < RESTORE_SAMPLES; i++) {
          own.push(...(await measure(restored, spec, 1)).ready);
          derived.push(...(await measure(onDerived, derivedSpec, 1)).ready);
        }
        const mode = accel.accel === 'tcg' ? 'TCG (software emulation)' : accel.accel.toUpperCase();
        const load = os.loadavg()[0]?.toFixed(1);
        return [
          withRatio({
            name: 'vm.ready',
            value: percentile(vm.ready, 50),
            unit: 'ms',
            baseline: percentile(boot.ready, 50),
            budget: '≤ 0.25× (TCG)',
            note: `accel ${mode}; restored from the image's snapshot: create → hello → first command output, p50 of ${RESTORE_SAMPLES}; baseline: cold kernel boot of the same image, same path, p50 of ${VM_SAMPLES}; hardened Docker sandbox ${percentile(docker.ready, 50).toFixed(0)} ms; load avg ${load}`,
          }),
          withRatio({
            name: 'vm.ready.boot',
            value: percentile(first.ready, 50),
            unit: 'ms',
            baseline: percentile(boot.ready, 50),
            note: `accel ${mode}; the first start of an image version: boot to hello, save the snapshot, restore it (paid once); baseline: cold kernel boot`,
          }),
          withRatio({
            name: 'vm.ready.warm',
            value: warm,
            unit: 'ms',
            baseline: percentile(vm.ready, 50),
            budget: '≤ 0.2× (as sandbox.ready.warm)',
            note: `accel ${mode}; a pre-started VM from SandboxManager.warm(spec, 1) → first command output; baseline: vm.ready`,
          }),
          withRatio({
            name: 'vm.ready.derived',
            value: percentile(derived, 50),
            unit: 'ms',
            baseline: percentile(own, 50),
            budget: '≤ 1.5×',
            note: `accel ${mode}; restored from the snapshot of ${PROJECT_BASE}'s derived image (Airlock's runtime added; disk and snapshot made before timing), p50 of ${RESTORE_SAMPLES}; baseline: vm.ready's path on Airlock's image, interleaved with it`,
          }),
          withRatio({
            name: 'vm.wipe',
            value: percentile(vm.wipe, 50),
            unit: 'ms',
            baseline: percentile(docker.wipe, 50),
            budget: '≤ 150 ms',
            note: `accel ${mode}; restored VMs: kill QEMU, delete overlays/sockets, verify no process or file; baseline: Docker sandbox wipe`,
          }),
        ];
      } finally {
        for (const d of [cold, restored, onDerived]) {
          for (const sb of await d.list()) await d.destroy(sb.runId).catch(() => undefined);
          d.dispose();
        }
        await rm(runsDir, { recursive: true, force: true });
        await rm(snapAssets, { recursive: true, force: true });
      }
    },
  },
];
