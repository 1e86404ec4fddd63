import { access, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../driver';
import { QemuDriver } from './qemu-driver';
import { runFiles } from './vm-paths';

/** These tests never make a disk, so they never ask for an engine. */
const noEngine = () => Promise.reject(new Error('no engine in a unit test'));

describe('QemuDriver without booting', () => {
  let root: string;
  let driver: QemuDriver;
  beforeAll(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'airlock-qemu-unit-'));
    driver = new QemuDriver({ env: process.env, engine: noEngine, paths: { assetsDir: path.join(root, 'assets'), kernel: path.join(root, 'assets', 'vmlinuz'), runsDir: path.join(root, 'runs') } });
  });
  afterAll(async () => {
    driver.dispose();
    await rm(root, { recursive: true, force: true });
  });

  const spec = { runId: 'r-unit-1', image: 'airlock-sandbox:x', limits: DEFAULT_LIMITS, network: 'none' as const };

  it('refuses unsafe run ids and the open network with typed errors', async () => {
    await expect(driver.create({ ...spec, runId: '../escape' })).rejects.toMatchObject({ kind: 'INVALID_INPUT' });
    await expect(driver.create({ ...spec, network: 'open' })).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringMatching(/loopback/) });
  });

  it('says how to prepare QEMU and the kernel when they are missing, leaving nothing behind', async () => {
    await expect(driver.create(spec)).rejects.toMatchObject({ kind: 'VM_UNAVAILABLE', message: expect.stringMatching(/prepare-vm-assets\.sh/) });
    await expect(access(runFiles(driver.paths.runsDir, spec.runId).dir)).rejects.toThrow();
    expect(await driver.list()).toEqual([]);
  });

  it('refuses an arm64 host clearly (its kernel, machine type and console are x86-64), before touching QEMU', async () => {
    const arm = new QemuDriver({ env: process.env, engine: noEngine, hostArch: 'arm64', qemuBinary: path.join(root, 'no-such-qemu'), paths: driver.paths });
    await expect(arm.checkAvailable()).rejects.toMatchObject({ kind: 'VM_UNAVAILABLE', message: expect.stringMatching(/x86-64 Linux host; this one is arm64.*container isolation/) });
    arm.dispose();
  });

  it('reaps a run left by a crash: deletes its files, and never kills a recycled pid that is not its QEMU', async () => {
    const files = runFiles(driver.paths.runsDir, 'r-crashed-1');
    await mkdir(files.dir, { recursive: true });
    await writeFile(files.record, JSON.stringify({ runId: 'r-crashed-1', image: 'x', createdAt: '2026-01-01T00:00:00.000Z', accel: 'tcg', owner: 'elsewhere:1' }));
    // The pidfile names a live process that is not QEMU (this test runner): it must survive.
    await writeFile(files.pidfile, `${process.pid}\n`);
    await writeFile(files.overlay, 'overlay');
    await writeFile(files.scratch, 'scratch');
    const listed = await driver.list();
    expect(listed).toMatchObject([{ runId: 'r-crashed-1', kind: 'qemu', state: 'exited', owner: 'elsewhere:1' }]);
    const events: string[] = [];
    const sub = driver.onDidEvent((e) => events.push(`${e.type}:${e.runId}`));
    const proofs = await driver.reap();
    sub.dispose();
    expect(proofs).toHaveLength(1);
    expect(proofs[0]?.leftovers).toEqual([]);
    expect(proofs[0]?.removed).toEqual(expect.arrayContaining(['file:r-crashed-1/root.qcow2', 'file:r-crashed-1/scratch.img', `dir:${files.dir}`]));
    expect(proofs[0]?.removed.some((r) => r.startsWith('process:'))).toBe(false);
    expect(events).toEqual(['destroyed:r-crashed-1', 'reaped:r-crashed-1']);
    await expect(access(files.dir)).rejects.toThrow();
  });

  it('names the file and field of a damaged VM record instead of inventing an owner (which would read as "gone")', async () => {
    const files = runFiles(driver.paths.runsDir, 'r-damaged-1');
    await mkdir(files.dir, { recursive: true });
    await writeFile(files.record, JSON.stringify({ runId: 'r-damaged-1', image: 'x', createdAt: '2026-01-01T00:00:00.000Z', accel: 'warp', owner: 'elsewhere:1' }));
    const [info] = (await driver.list()).filter((i) => i.runId === 'r-damaged-1');
    expect(info?.owner).toBeUndefined();
    expect(info?.recordProblem).toMatch(new RegExp(`${files.record.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is damaged: field accel`));
    await writeFile(files.record, '{"runId": "r-dam');
    const [torn] = (await driver.list()).filter((i) => i.runId === 'r-damaged-1');
    expect(torn?.recordProblem).toMatch(/is damaged: not valid JSON/);
    await driver.destroy('r-damaged-1');
  });

  it('wiping an unknown run is a verified no-op', async () => {
    const proof = await driver.destroy('r-never-existed');
    expect(proof).toMatchObject({ runId: 'r-never-existed', removed: [], leftovers: [] });
  });
});
