/**
 * docs/architecture.md §2.3, "VM, Lima and WSL": in the QEMU guest the helper starts from Airlock's
 * fixed environment only. A VM booted from a derived image whose ENV carries NODE_OPTIONS, LD_PRELOAD
 * and NODE_PATH (and an ENTRYPOINT, WORKDIR and USER root) runs none of it as the root helper: no
 * marker by uid 0, the helper's environ is Airlock's four names, its command line Airlock's loader and
 * Node, and no library of the image is mapped into it. The same hooks do run for a command that sets
 * those variables itself (so the test can tell). On the old guest init (which sourced the image's ENV
 * for the helper) the helper wrote hostile-node-0 and hostile-preload-0.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QemuDriver } from '../../core/sandbox/qemu/qemu-driver';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import { derivedImage } from '../support/environment-images';
import { HOSTILE_DOCKERFILE, testImage } from '../support/host-escape-images';
import { requirePrerequisite } from '../support/prerequisites';
import { testEngine } from './sandbox-support';

const qemu = await requirePrerequisite('qemu');
// The VM's disk is made from the Docker image, so the engine is needed too.
const docker = qemu.ok ? await requirePrerequisite('docker') : qemu;

describe.skipIf(!qemu.ok || !docker.ok)('a hostile project image runs no code as the VM\'s helper (QEMU, derived)', () => {
  let runsDir: string;
  let driver: QemuDriver;
  let manager: SandboxManager;
  let sandbox: Sandbox;

  beforeAll(async () => {
    runsDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-vm-hostile-'));
    driver = new QemuDriver({ env: process.env, engine: testEngine, paths: { runsDir }, diskBytes: 1024 ** 3, onProgress: (m) => console.log(`[vm] ${m}`) });
    await driver.checkAvailable();
    const image = await derivedImage(await testImage('hostile', HOSTILE_DOCKERFILE));
    manager = new SandboxManager(driver);
    sandbox = await manager.create({ runId: `r-vmhostile-${randomBytes(4).toString('hex')}`, image, limits: { memoryBytes: 1024 ** 3, cpus: 1, pids: 512 }, network: 'none' });
  }, 1_200_000);

  afterAll(async () => {
    await manager?.shutdown().catch(() => undefined);
    if (driver) {
      for (const sb of await driver.list()) await driver.destroy(sb.runId);
      driver.dispose();
    }
    if (runsDir) await rm(runsDir, { recursive: true, force: true });
  });

  /** As the helper (root): the command's parent is the helper itself. */
  async function helperSh(script: string): Promise<string> {
    const r = await sandbox.channel.run({ argv: ['sh', '-c', script], as: 'helper' });
    return r.stdout.toString('utf8');
  }

  it("starts the helper with Airlock's environment only, by Airlock's loader and Node", async () => {
    expect(sandbox.channel.hello.uid).toBe(0);
    const environ = (await helperSh('tr "\\0" "\\n" < /proc/$PPID/environ')).split('\n').filter(Boolean);
    expect(environ.map((e) => e.split('=', 1)[0]).sort()).toEqual(['AIRLOCK_AGENT_USER', 'HOME', 'LANG', 'PATH']);
    expect(environ.join('\n')).not.toMatch(/hostile|NODE_OPTIONS|LD_PRELOAD|NODE_PATH|HOSTILE_MARK/);
    const cmdline = (await helperSh('tr "\\0" " " < /proc/$PPID/cmdline')).trim();
    expect(cmdline).toBe('/opt/airlock/lib/ld.so --inhibit-cache --library-path /opt/airlock/lib /opt/airlock/node/node --openssl-config=/dev/null /opt/airlock/helper.js');
    expect(await helperSh('cat /proc/$PPID/maps')).not.toMatch(/hostile|\/lib\/x86_64-linux-gnu|\/lib\/aarch64-linux-gnu/);
  });

  it("leaves no marker of the image's hooks by root, while the same hooks do run for a command that asks for them", async () => {
    const agent = await sandbox.channel.run({ argv: ['sh', '-c', 'LD_PRELOAD=/hostile/hook.so NODE_OPTIONS="--require /hostile/hook.js" /opt/airlock/node/node -e 0'] });
    expect(agent.exitCode).toBe(0);
    const markers = (await helperSh('ls -a /tmp')).split('\n').filter((n) => n.startsWith('hostile-')).sort();
    expect(markers).toEqual(['hostile-node-1000', 'hostile-preload-1000']);
  });
});
