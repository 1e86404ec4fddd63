import { open, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunEvent } from '../../contracts/runs';
import { vmPaths } from '../../core/sandbox/qemu/vm-paths';
import { requirePrerequisite } from '../support/prerequisites';
import { CANARY_KEY, createRunFixture, exec, filesContaining, type RunFixture } from '../support/run-fixture';

const qemu = await requirePrerequisite('qemu');
const docker = await requirePrerequisite('docker'); // the VM's root disk is made from the sandbox image

/** Files of the run's VM directory that contain the needle (grep streams sparse multi-GiB disks). */
async function diskFilesContaining(dir: string, needle: string): Promise<{ searched: number; hits: string[] }> {
  const files = (await readdir(dir, { withFileTypes: true })).filter((e) => e.isFile()).map((e) => path.join(dir, e.name));
  const hits: string[] = [];
  for (const file of files) {
    const r = await exec('grep', ['-c', '-a', '-F', '--', needle, file]).catch((err: { code?: number; stdout?: string }) => err);
    if ((r as { code?: number }).code === 2) throw new Error(`could not search ${file}`);
    if (Number((r as { stdout?: string }).stdout?.trim() ?? '0') > 0) hits.push(file);
  }
  return { searched: files.length, hits };
}

/** Scans every readable mapping of a process (QEMU: guest RAM included) for the needle. */
async function processMemoryContains(pid: number, needle: string): Promise<{ scannedBytes: number; found: boolean }> {
  const maps = await readFile(`/proc/${pid}/maps`, 'utf8');
  const mem = await open(`/proc/${pid}/mem`, 'r');
  const pattern = Buffer.from(needle);
  let scannedBytes = 0;
  try {
    for (const line of maps.split('\n')) {
      const m = /^([0-9a-f]+)-([0-9a-f]+) r/.exec(line);
      if (!m) continue;
      const from = parseInt(m[1] as string, 16);
      const to = parseInt(m[2] as string, 16);
      const chunk = Buffer.alloc(Math.min(16 * 1024 * 1024, to - from) + pattern.length);
      for (let at = from; at < to; at += chunk.length - pattern.length) {
        const n = Math.min(chunk.length, to - at);
        const { bytesRead } = await mem.read(chunk, 0, n, at).catch(() => ({ bytesRead: 0 }));
        scannedBytes += bytesRead;
        if (chunk.subarray(0, bytesRead).includes(pattern)) return { scannedBytes, found: true };
      }
    }
  } finally {
    await mem.close();
  }
  return { scannedBytes, found: false };
}

/** Processes whose command line names both QEMU and the run. */
async function qemuProcessesOf(runId: string): Promise<number[]> {
  const pids: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    const cmd = await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '');
    if (cmd.startsWith('qemu-system') || cmd.includes('/qemu-system')) if (cmd.includes(runId)) pids.push(Number(name));
  }
  return pids;
}

describe.skipIf(!qemu.ok || !docker.ok)('a run with VM isolation (QEMU, software emulation here)', () => {
  let f: RunFixture;
  beforeAll(async () => {
    f = await createRunFixture();
  });
  afterAll(async () => {
    await f?.close();
  });

  it('runs the built-in agent in a VM through the proxy: diff, apply, no key in the guest disk, verified wipe', { timeout: 1_200_000 }, async () => {
    const projectDir = await f.project();
    const runsDir = vmPaths(f.core.env).runsDir;
    let disk = { searched: 0, hits: [] as string[] };
    let memory = { scannedBytes: 0, found: true };
    const started = await f.start({
      projectDir,
      isolation: 'vm',
      approval: 'ask', // the second command waits for approval while the test searches the live VM
      limits: { timeoutSec: 900 },
      script: [
        { toolCalls: [{ name: 'run_command', input: { command: 'echo ifaces: $(ls /sys/class/net); echo routes: $(tail -n +2 /proc/net/route | wc -l); echo in-the-vm' } }] },
        { toolCalls: [{ name: 'run_command', input: { command: 'echo after-the-search' } }] },
        { toolCalls: [{ name: 'edit_file', input: { path: 'src/app.js', old_text: 'return 1;', new_text: 'return 7;' } }] },
        { toolCalls: [{ name: 'finish', input: { summary: 'edited inside a VM' } }] },
      ],
    });
    let approvals = 0;
    const sub = f.core.runs.onDidEvent((e: RunEvent) => {
      if (e.runId !== started.id || e.event.type !== 'approval_request') return;
      const requestId = e.event.id;
      void (async () => {
        if (++approvals === 2) {
          // The key must be in neither the VM's disks nor its memory (guest RAM lives in QEMU's).
          disk = await diskFilesContaining(path.join(runsDir, started.id), CANARY_KEY);
          const [pid] = await qemuProcessesOf(started.id);
          if (pid) memory = await processMemoryContains(pid, CANARY_KEY);
        }
        await f.services.runs.approve({ runId: started.id, requestId, approved: true });
      })();
    });
    const run = await f.core.runs.wait(started.id);
    sub.dispose();
    expect(run.error).toBeUndefined();
    expect(run.status).toBe('done');
    expect(run.sandbox.driver).toBe('qemu');
    // The record says how the guest ran, and why when it was not hardware virtualization.
    const { sandbox } = await f.core.store.get(run.id);
    expect(['kvm', 'hvf', 'tcg']).toContain(sandbox.accel);
    // Restored from the image's VM snapshot: the canary checks below ran against a restored VM.
    expect(sandbox.vmStartedFrom).toBe(process.env.AIRLOCK_VM_SNAPSHOT === '0' ? 'boot' : 'snapshot');
    if (sandbox.accel === 'tcg') expect(sandbox.accelNote).toMatch(/software emulation/);

    const output = await f.terminalLog(run.id);
    expect(output).toContain('ifaces: lo');
    expect(output).toContain('routes: 0');

    expect(disk.searched).toBeGreaterThan(0);
    expect(disk.hits).toEqual([]);
    expect(memory.scannedBytes).toBeGreaterThan(128 * 1024 * 1024); // at least the guest's RAM was read
    expect(memory.found).toBe(false);
    expect(run.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['modified src/app.js']);
    expect(run.wipe?.leftovers).toEqual([]);
    await expect(readdir(path.join(runsDir, run.id))).rejects.toThrow();
    expect(await qemuProcessesOf(run.id)).toEqual([]);
    expect(await filesContaining(f.core.store.paths(run.id).dir, CANARY_KEY)).toEqual([]);
    expect((await f.services.audit.verify({ runId: run.id })).intact).toBe(true);

    const applied = await f.services.diffs.apply({ runId: run.id, mode: 'working-tree', reviewedSha256: (await f.services.diffs.list({ runId: run.id })).patchSha256 as string });
    expect(applied.applied).toEqual(['src/app.js']);
    expect(await readFile(path.join(projectDir, 'src/app.js'), 'utf8')).toContain('return 7;');
  });
});
