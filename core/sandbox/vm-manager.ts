import { mkdir, rename } from 'node:fs/promises';
import path from 'node:path';
import type { Settings } from '../../contracts/settings';
import { pathExists } from '../common/path-exists';
import type { Engine } from './docker/engine';
import { SandboxManager } from './sandbox';

/** VM sandboxes announce themselves later than containers (a kernel boots first). */
const VM_HELLO_TIMEOUT_MS = 180_000;

export interface VmManagerOptions {
  /** The core's environment: where VM assets and runs live (`vmPaths`), and `AIRLOCK_VM_*` overrides. */
  env: NodeJS.ProcessEnv;
  /** The `vmAccel` setting (QEMU only). */
  vmAccel: Settings['vmAccel'];
  /** The sandbox image of a variant (WSL imports its file system). */
  image(variant: 'base'): Promise<string>;
  /** The engine the settings chose, which built that image: VM disks and WSL file systems are exported from it. */
  engine(): Promise<Engine>;
}

/**
 * The VM sandbox manager of this platform: QEMU micro-VMs on Linux, Lima on macOS, one WSL2
 * distribution per run on Windows (unverified on real Windows: resources/vm/README.md).
 */
export async function createVmManager(opts: VmManagerOptions): Promise<SandboxManager> {
  if (process.platform === 'win32') {
    // Imported from the sandbox image's file system, exported once per image version through Docker Desktop.
    const ref = await opts.image('base');
    const { wslDataDir, WslDriver } = await import('./wsl/wsl-driver');
    // Local AppData (not Roaming): the rootfs and the per-run disks are large and machine-bound.
    const dataDir = wslDataDir(opts.env);
    const rootfsTar = path.join(dataDir, `rootfs-${ref.split(':').pop() ?? 'base'}.tar`);
    if (!(await pathExists(rootfsTar))) {
      const { exportWslRootfs } = await import('./wsl/wsl-rootfs');
      await mkdir(path.dirname(rootfsTar), { recursive: true });
      await exportWslRootfs(ref, `${rootfsTar}.partial`, await opts.engine());
      await rename(`${rootfsTar}.partial`, rootfsTar);
    }
    return new SandboxManager(new WslDriver({ env: opts.env, rootfsTar, distrosDir: dataDir }), { helloTimeoutMs: VM_HELLO_TIMEOUT_MS });
  }
  if (process.platform === 'darwin') {
    const { LimaDriver } = await import('./lima/lima-driver');
    return new SandboxManager(new LimaDriver({ env: opts.env }), { helloTimeoutMs: VM_HELLO_TIMEOUT_MS });
  }
  const { QemuDriver } = await import('./qemu/qemu-driver');
  const driver = new QemuDriver({ env: opts.env, accelSetting: opts.vmAccel, engine: opts.engine });
  await driver.checkAvailable();
  return new SandboxManager(driver, { helloTimeoutMs: VM_HELLO_TIMEOUT_MS });
}
