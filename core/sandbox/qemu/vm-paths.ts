import path from 'node:path';
import { airlockHome } from '../../common/paths';
import { resourcePaths } from '../../common/resources';

/** Where the QEMU driver keeps its files. */
export interface VmPaths {
  /** Kernel, initramfs, busybox and base disks: `$AIRLOCK_VM_ASSETS`, else `<airlockHome(env)>/vm`. */
  assetsDir: string;
  kernel: string;
  initramfs: string;
  busybox: string;
  manifest: string;
  /** One read-only base disk per image version. */
  baseDir: string;
  /** One directory per run (overlay, scratch disk, sockets, pidfile, logs): `$AIRLOCK_VM_RUNS`, else `<assetsDir>/runs`. */
  runsDir: string;
  /** resources/vm (guest init script), from core/common/resources.ts unless given. */
  resourcesDir: string;
}

export function vmPaths(env: NodeJS.ProcessEnv, overrides: Partial<VmPaths> = {}): VmPaths {
  const assetsDir = overrides.assetsDir ?? (env.AIRLOCK_VM_ASSETS ? path.resolve(env.AIRLOCK_VM_ASSETS) : path.join(airlockHome(env), 'vm'));
  return {
    assetsDir,
    kernel: path.join(assetsDir, 'vmlinuz'),
    initramfs: path.join(assetsDir, 'initramfs.img'),
    busybox: path.join(assetsDir, 'busybox'),
    manifest: path.join(assetsDir, 'manifest.json'),
    baseDir: path.join(assetsDir, 'base'),
    runsDir: env.AIRLOCK_VM_RUNS ? path.resolve(env.AIRLOCK_VM_RUNS) : path.join(assetsDir, 'runs'),
    ...overrides,
    resourcesDir: overrides.resourcesDir ?? resourcePaths().vmDir,
  };
}

/** Files of one run; all of them live in `dir`, so deleting `dir` deletes the run. */
export interface RunFiles {
  dir: string;
  overlay: string;
  scratch: string;
  channelSocket: string;
  /** QEMU's monitor (QMP), for memory dumps in leak tests. */
  qmpSocket: string;
  pidfile: string;
  console: string;
  helperLog: string;
  /** QEMU serves the helper's log port here; the host copies it, capped, into `helperLog`. */
  helperLogSocket: string;
  record: string;
}

/** Unix socket paths are limited to 104 bytes on macOS, 108 on Linux. */
export const MAX_SOCKET_PATH = 103;

export function runFiles(runsDir: string, runId: string): RunFiles {
  const dir = path.join(runsDir, runId);
  return {
    dir,
    overlay: path.join(dir, 'root.qcow2'),
    scratch: path.join(dir, 'scratch.img'),
    channelSocket: path.join(dir, 'ch.sock'),
    qmpSocket: path.join(dir, 'qmp.sock'),
    pidfile: path.join(dir, 'qemu.pid'),
    console: path.join(dir, 'console.log'),
    helperLog: path.join(dir, 'helper.log'),
    helperLogSocket: path.join(dir, 'hl.sock'),
    record: path.join(dir, 'run.json'),
  };
}

/** Run ids become directory names: keep them to safe characters (contracts/ids.ts RunId fits). */
export function isSafeRunId(runId: string): boolean {
  return /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/.test(runId) && !runId.includes('..');
}
