/**
 * The QEMU driver for real: one per-run VM booted from the Airlock sandbox image (KVM where it works,
 * software emulation here), used through SandboxManager and the channel over virtio-serial exactly
 * as a Docker sandbox is. One boot for the whole file: VMs are slow under emulation.
 */
import { randomBytes } from 'node:crypto';
import { access, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer, connect as netConnect, type AddressInfo, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChannelClient } from '../../core/channel/channel-client';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { QemuDriver, type QemuSandboxInfo } from '../../core/sandbox/qemu/qemu-driver';
import { ensureBaseDisk } from '../../core/sandbox/qemu/base-disk';
import { fileContains } from '../../core/sandbox/qemu/leak-scan';
import { isAlive, readPidfile } from '../../core/sandbox/qemu/vm-process';
import { runFiles } from '../../core/sandbox/qemu/vm-paths';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { requirePrerequisite } from '../support/prerequisites';
import { testEngine } from './sandbox-support';

const qemu = await requirePrerequisite('qemu');
// The VM's disk is made from the Docker image, so the engine is needed too.
const docker = qemu.ok ? await requirePrerequisite('docker') : qemu;

/** A guest-side Node one-liner; prints what it got or the error code. */
function nodeScript(js: string): string[] {
  return ['node', '-e', js];
}

describe.skipIf(!qemu.ok || !docker.ok)('QEMU VM sandbox', () => {
  let runsDir: string;
  let driver: QemuDriver;
  let manager: SandboxManager;
  let sandbox: Sandbox;
  let channel: ChannelClient;
  let info: QemuSandboxInfo;
  let imageRef: string;
  const runId = `r-vmtest-${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    runsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-vm-test-'));
    // A small scratch disk: the leak scan below reads it whole (sparse zeros included).
    driver = new QemuDriver({ env: process.env, engine: testEngine, paths: { runsDir }, diskBytes: 1024 ** 3, onProgress: (m) => console.log(`[vm] ${m}`) });
    // Under CI a missing kernel/initramfs fails here (scripts/prepare-vm-assets.sh prepares them).
    await driver.checkAvailable();
    const { ref } = await ensureSandboxImage({ env: process.env, engine: testEngine() });
    imageRef = ref;
    manager = new SandboxManager(driver);
    const t0 = performance.now();
    sandbox = await manager.create({ runId, image: ref, limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
    info = sandbox.info as QemuSandboxInfo;
    channel = sandbox.channel;
    console.log(`[vm] create → hello: ${(performance.now() - t0).toFixed(0)} ms (accel ${info.accel}${info.accelReason ? `: ${info.accelReason}` : ''})`);
  });

  afterAll(async () => {
    await manager?.shutdown().catch(() => undefined);
    if (driver) {
      // Whatever happened above, no VM may outlive the file.
      for (const sb of await driver.list()) await driver.destroy(sb.runId);
      driver.dispose();
    }
    if (runsDir) await rm(runsDir, { recursive: true, force: true });
  });

  it('boots a VM of its own and says which accelerator it uses', async () => {
    expect(info.kind).toBe('qemu');
    expect(['kvm', 'hvf', 'tcg']).toContain(info.accel);
    expect(info.accel === 'tcg').toBe(info.accelReason !== '');
    // It is the Debian cloud kernel of the prepared assets, not the host's kernel.
    const manifest = JSON.parse(await readFile(driver.paths.manifest, 'utf8')) as { kernelVersion: string };
    const r = await channel.run({ argv: ['uname', '-r'] });
    expect(r.stdout.toString().trim()).toBe(manifest.kernelVersion);
    const pid = await readPidfile(runFiles(runsDir, runId).pidfile);
    expect(pid && isAlive(pid)).toBe(true);
    expect((await driver.list()).map((s) => s.runId)).toContain(runId);
    // The guest arms its own wall clock (default 4 h + 60 s), a backstop should the host process die.
    const ps = await channel.run({ argv: ['sh', '-c', 'cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " "'] });
    expect(ps.stdout.toString()).toContain('sleep 14460');
  });

  it('says hello over virtio-serial as root with three capabilities, and runs commands as the image’s user with none', async () => {
    expect(channel.hello.uid).toBe(0);
    expect(channel.hello.agentUid).toBe(1000);
    const helper = channel.hello.pid;
    const own = await channel.run({ argv: ['sh', '-c', 'id -u; id -G; grep -E "^(NoNewPrivs|CapEff|CapPrm|CapInh|CapAmb|CapBnd):" /proc/self/status'] });
    expect(own.exitCode).toBe(0);
    const [uid, groups, ...rest] = own.stdout.toString().trim().split('\n');
    expect(uid).toBe('1000');
    expect(groups).toBe('1000');
    expect(Object.fromEntries(rest.map((l) => l.split(/:\s+/) as [string, string]))).toEqual({
      NoNewPrivs: '1', CapEff: '0000000000000000', CapPrm: '0000000000000000', CapInh: '0000000000000000', CapAmb: '0000000000000000',
      // KILL, SETGID, SETUID: the helper's (docs/architecture.md §2.3); never DAC_READ_SEARCH.
      CapBnd: '00000000000000e0',
    });
    // The helper itself, as the agent sees it (world-readable status): root, those three only.
    const st = await channel.run({ argv: ['sh', '-c', `grep -E "^(Uid|CapEff|CapBnd|NoNewPrivs):" /proc/${helper}/status`] });
    expect(st.stdout.toString()).toMatch(/^Uid:\s+0\s+0\s+0\s+0$/m);
    expect(st.stdout.toString()).toMatch(/^CapEff:\s+00000000000000e0$/m);
    expect(st.stdout.toString()).toMatch(/^NoNewPrivs:\s+1$/m);
  });

  it('the agent cannot signal, stop, ptrace or read the helper, nor write /airlock', async () => {
    const helper = channel.hello.pid;
    for (const sig of ['KILL', 'TERM', 'STOP']) {
      const r = await channel.run({ argv: ['sh', '-c', `kill -${sig} ${helper}; echo "rc=$?"`] });
      expect(r.stdout.toString(), sig).toBe('rc=1\n');
    }
    const ptrace = await channel.run({ argv: ['python3', '-c', `import ctypes; l = ctypes.CDLL(None, use_errno=True); print(l.ptrace(16, ${helper}, 0, 0), ctypes.get_errno())`] });
    expect(ptrace.stdout.toString().trim()).toBe('-1 1');
    for (const f of ['mem', 'environ']) {
      const r = await channel.run({ argv: ['sh', '-c', `head -c 16 /proc/${helper}/${f} >/dev/null`] });
      expect(r.exitCode, f).not.toBe(0);
    }
    const w = await channel.run({ argv: ['sh', '-c', 'echo x > /airlock/probe'] });
    expect(w.exitCode).not.toBe(0);
    expect(w.stderr.toString()).toMatch(/Permission denied/);
    expect((await channel.run({ argv: ['echo', 'alive'] })).stdout.toString()).toBe('alive\n');
  });

  it('makes commands the OOM killer’s first choice, never the helper, and the agent cannot go below the helper', async () => {
    // The same helper as in a container (resources/sandbox/helper/oom-score.ts), under the guest's own kernel.
    const helper = channel.hello.pid;
    const r = await channel.run({ argv: ['sh', '-c', "cat /proc/self/oom_score_adj; sh -c 'cat /proc/self/oom_score_adj'"] });
    expect(r.stdout.toString().trim().split('\n')).toEqual(['1000', '1000']);
    // Read until the helper has put its own value back: the reading command was spawned with it raised
    // and may run first on a loaded machine; a helper that never restores stays at 1000 and fails.
    let helperAdj = '';
    await vi.waitFor(async () => {
      helperAdj = (await channel.run({ argv: ['cat', `/proc/${helper}/oom_score_adj`] })).stdout.toString().trim();
      expect(Number(helperAdj)).toBeLessThan(1000);
    }, { timeout: 10_000, interval: 100 });
    const below = await channel.run({ argv: ['sh', '-c', `(echo ${Number(helperAdj) - 1} > /proc/self/oom_score_adj) 2>/dev/null && echo below; cat /proc/self/oom_score_adj`] });
    expect(below.stdout.toString().trim()).toBe('1000');
  });

  it('runs commands through the channel with exit codes and separate streams', async () => {
    const r = await channel.run({ argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'] });
    expect(r.exitCode).toBe(3);
    expect(r.stdout.toString()).toBe('out\n');
    expect(r.stderr.toString()).toBe('err\n');
  });

  it('writes /workspace and reads it back, while the root file system is read-only', async () => {
    await channel.writeFile('/workspace/hello.txt', 'written over the channel\n');
    const back = await channel.run({ argv: ['sh', '-c', 'cat /workspace/hello.txt; echo more >> /workspace/hello.txt'], cwd: '/workspace' });
    expect(back.stdout.toString()).toBe('written over the channel\n');
    expect((await channel.readFile('/workspace/hello.txt')).toString()).toBe('written over the channel\nmore\n');
    for (const dir of ['/tmp', '/home/airlock']) {
      const w = await channel.run({ argv: ['sh', '-c', `echo x > ${dir}/probe && cat ${dir}/probe`] });
      expect(w.stdout.toString(), dir).toBe('x\n');
    }
    const ro = await channel.run({ argv: ['sh', '-c', 'touch /etc/airlock-probe'] });
    expect(ro.exitCode).not.toBe(0);
    expect(ro.stderr.toString()).toMatch(/Read-only file system/);
  });

  it('has no network but loopback: only lo, no route, no DNS', async () => {
    const ifaces = (await channel.list('/sys/class/net')).map((e) => e.name);
    expect(ifaces).toEqual(['lo']);
    const routes = (await channel.readFile('/proc/net/route')).toString().trim().split('\n');
    expect(routes).toHaveLength(1); // the header only
    const dns = await channel.run({
      argv: nodeScript("require('dns').lookup('airlock-vm-test.invalid', (e, a) => console.log(e ? e.code : a))"),
    });
    expect(dns.stdout.toString().trim()).toMatch(/^(ENOTFOUND|EAI_AGAIN)$/);
  });

  it('reaches a host loopback server only through exposeHostService', async () => {
    let hits = 0;
    const server: Server = createServer((sock) => {
      hits++;
      sock.end('from-the-host\n');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const hostPort = (server.address() as AddressInfo).port;
    const fetchPort = (port: number) =>
      channel.run({
        argv: nodeScript(
          `const s=require('net').connect(${port},'127.0.0.1');let d='';s.on('data',c=>d+=c);s.on('end',()=>console.log('GOT '+d.trim()));s.on('error',e=>console.log(e.code))`,
        ),
      });
    try {
      // The host's port is not the guest's: 127.0.0.1 inside the VM is the VM's own loopback.
      const direct = await fetchPort(hostPort);
      expect(direct.stdout.toString().trim()).toBe('ECONNREFUSED');
      expect(hits).toBe(0);
      const svc = await channel.exposeHostService(0, () => netConnect(hostPort, '127.0.0.1'));
      try {
        const forwarded = await fetchPort(svc.port);
        expect(forwarded.stdout.toString().trim()).toBe('GOT from-the-host');
        expect(hits).toBe(1);
      } finally {
        svc.dispose();
      }
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it('lets a leak scan search the guest memory and disks (what the key canary test needs)', async () => {
    // A marker only the guest holds: in a file on /workspace and in a live process's memory.
    const marker = `airlock-vm-marker-${randomBytes(12).toString('hex')}`;
    await channel.writeFile('/workspace/marker.txt', `${marker}\n`);
    const holder = channel.spawn({ argv: ['sh', '-c', `M=${marker}; sync; echo held; read x`] });
    const held = new Promise<void>((resolve) => holder.onStdout(() => resolve()));
    await held;
    const dump = path.join(runsDir, `${runId}-memory.elf`);
    try {
      await driver.dumpGuestMemory(runId, dump);
      expect(await fileContains(dump, marker)).toBe(true);
      // The search can fail: a string the guest never saw is not found.
      expect(await fileContains(dump, `airlock-vm-absent-${randomBytes(12).toString('hex')}`)).toBe(false);
    } finally {
      await rm(dump, { force: true });
      holder.kill();
    }
    const files = driver.runFiles(runId);
    expect(await fileContains(files.scratch, marker)).toBe(true);
    // The shared, read-only base disk never sees what a run writes.
    const base = await ensureBaseDisk(imageRef, driver.paths, await testEngine(), process.env);
    expect(await fileContains(base.path, marker)).toBe(false);
    // Nor do the snapshots runs are restored from (state, scratch template, hello): they are read-only.
    const snapshotsDir = path.join(driver.paths.assetsDir, 'snapshots');
    for (const dir of await readdir(snapshotsDir).catch(() => [] as string[])) {
      for (const f of await readdir(path.join(snapshotsDir, dir), { withFileTypes: true })) {
        if (f.isFile()) expect(await fileContains(path.join(snapshotsDir, dir, f.name), marker), `${dir}/${f.name}`).toBe(false);
      }
    }
  }, 600_000);

  it('starts from the image snapshot, and a second VM restored from it shares no randomness, identity or writes', async () => {
    expect(info.startedFrom).toBe(process.env.AIRLOCK_VM_SNAPSHOT === '0' ? 'boot' : 'snapshot');
    const otherId = `r-vmtest2-${randomBytes(4).toString('hex')}`;
    const other = await manager.create({ runId: otherId, image: imageRef, limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
    try {
      expect((other.info as QemuSandboxInfo).startedFrom).toBe(info.startedFrom);
      // Kernel randomness (reseeded from each run's own seed after the restore), a new process's
      // Node crypto, and the run id the guest was given.
      const probe = ['sh', '-c', 'head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n"; echo; node -e "process.stdout.write(require(\'crypto\').randomBytes(16).toString(\'hex\'))"; echo; cat /run/airlock-run-id'];
      const [a, b] = await Promise.all([channel.run({ argv: probe }), other.channel.run({ argv: probe })]);
      const [aRand, aNode, aRun] = a.stdout.toString().trim().split('\n');
      const [bRand, bNode, bRun] = b.stdout.toString().trim().split('\n');
      expect(aRand).toMatch(/^[0-9a-f]{64}$/);
      expect(aNode).toMatch(/^[0-9a-f]{32}$/);
      expect(aRand).not.toBe(bRand);
      expect(aNode).not.toBe(bNode);
      expect([aRun, bRun]).toEqual([runId, otherId]);
      // Each has its own scratch disk: what one writes, the other never sees.
      await channel.writeFile('/workspace/only-in-first.txt', 'first\n');
      const check = ['sh', '-c', 'test -e /workspace/only-in-first.txt && echo present || echo absent'];
      expect((await channel.run({ argv: check })).stdout.toString().trim()).toBe('present');
      expect((await other.channel.run({ argv: check })).stdout.toString().trim()).toBe('absent');
    } finally {
      const proof = await other.destroy();
      expect(proof.leftovers).toEqual([]);
    }
  }, 600_000);

  it('wipes: a fresh driver (as after a crash) reaps the VM from its pidfile and nothing remains', async () => {
    const files = runFiles(runsDir, runId);
    const pid = await readPidfile(files.pidfile);
    expect(pid).toBeDefined();
    // A second driver knows the VM only from disk, like the app after a crash.
    const fresh = new QemuDriver({ env: process.env, engine: testEngine, paths: { runsDir } });
    const proofs = await fresh.reap();
    fresh.dispose();
    expect(proofs.map((p) => p.runId)).toEqual([runId]);
    const proof = proofs[0]!;
    expect(proof.leftovers).toEqual([]);
    expect(proof.removed).toEqual(expect.arrayContaining([`process:${pid}`, `dir:${files.dir}`, `file:${runId}/root.qcow2`, `file:${runId}/scratch.img`]));
    expect(isAlive(pid!)).toBe(false);
    await expect(access(files.dir)).rejects.toThrow();
    expect(await driver.list()).toEqual([]);
    // The sandbox's own destroy is idempotent over an already wiped VM and verifies again.
    const again = await sandbox.destroy();
    expect(again.leftovers).toEqual([]);
    expect(channel.isClosed).toBe(true);
  });
});
