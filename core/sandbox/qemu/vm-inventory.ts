import { readdir, rm, stat } from 'node:fs/promises';
import { pathExists } from '../../common/path-exists';
import type { LiveVm, QemuSandboxInfo } from './vm-boot';
import { isRunQemu, processesMentioning, readPidfile, waitGone } from './vm-process';
import { isSafeRunId, runFiles, type RunFiles } from './vm-paths';
import { readVmRunRecord } from './vm-run-record';

/**
 * What of the QEMU driver's VMs exists on disk and as processes (docs/architecture.md §13): the
 * listing crash recovery reads, the removal of a run's process and files, and the check that
 * nothing of a run remains. A VM is known by its run directory; its QEMU by the pidfile in it,
 * trusted only while that pid's command line still names the directory (recycled pids).
 */

export const QEMU_ID_PREFIX = 'qemu-';

/** Every run directory's VM, as crash recovery and `list()` see it; `live` are those this process started. */
export async function listVms(runsDir: string, live: ReadonlyMap<string, LiveVm>, env: NodeJS.ProcessEnv): Promise<QemuSandboxInfo[]> {
  const names = await readdir(runsDir).catch(() => [] as string[]);
  const out: QemuSandboxInfo[] = [];
  for (const runId of names) {
    if (!isSafeRunId(runId)) continue;
    const files = runFiles(runsDir, runId);
    const st = await stat(files.dir).catch(() => undefined); // the run folder may be gone meanwhile
    if (!st?.isDirectory()) continue;
    const { record, problem } = await readVmRunRecord(files.record);
    const pid = await readPidfile(files.pidfile);
    const running = pid !== undefined && (await isRunQemu(pid, files.dir, env));
    const mine = live.get(runId);
    out.push({
      id: `${QEMU_ID_PREFIX}${runId}`,
      runId,
      kind: 'qemu',
      state: mine?.info.state === 'starting' ? 'starting' : running ? 'running' : 'exited',
      createdAt: record?.createdAt ?? st.mtime.toISOString(),
      accel: record?.accel ?? 'tcg',
      accelReason: mine?.info.accelReason ?? '',
      ...(record?.accelRetry ? { accelRetry: record.accelRetry } : {}),
      ...(record?.owner ? { owner: record.owner } : {}),
      ...(problem ? { recordProblem: problem } : {}),
    });
  }
  return out;
}

/**
 * Kills a run's QEMU that this process did not start (a crash, another process), found by its
 * pidfile, and removes the run's directory. Returns what was removed, for the wipe proof.
 */
export async function removeVmRun(runId: string, files: RunFiles, env: NodeJS.ProcessEnv, killedPid?: number): Promise<string[]> {
  const removed: string[] = [];
  const pid = await readPidfile(files.pidfile);
  if (pid && pid !== killedPid && (await isRunQemu(pid, files.dir, env))) {
    try {
      process.kill(pid, 'SIGKILL');
      removed.push(`process:${pid}`);
    } catch {
      // Already gone.
    }
    await waitGone(pid, 10_000);
  }
  if (await pathExists(files.dir)) {
    const names = await readdir(files.dir).catch(() => [] as string[]);
    await rm(files.dir, { recursive: true, force: true, maxRetries: 3 });
    removed.push(...names.map((n) => `file:${runId}/${n}`), `dir:${files.dir}`);
  }
  return removed;
}

/** What of the run still exists: its directory, or any process naming it. Empty = verified gone. */
export async function vmLeftovers(files: RunFiles, env: NodeJS.ProcessEnv): Promise<string[]> {
  const out: string[] = [];
  if (await pathExists(files.dir)) out.push(`dir:${files.dir}`);
  for (const pid of await processesMentioning(`${files.dir}/`, env)) out.push(`process:${pid}`);
  return out;
}
