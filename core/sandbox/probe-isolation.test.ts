import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { probeIsolation } from './probe-isolation';

/**
 * Stand-ins for wsl.exe, sc.exe and powershell.exe on PATH. `wsl --status` on a machine without
 * virtualization prints MessageStatusDefaultVersion and MessageEnableVirtualization and exits 0
 * (microsoft/WSL src/windows/common/WslClient.cpp, localization/strings/en-US/Resources.resw); sc.exe
 * exits 1060 (ERROR_SERVICE_DOES_NOT_EXIST) for a missing service; the CIM property prints True/False.
 */
async function windowsTools(o: { vmcompute: boolean; hypervisor: boolean }): Promise<{ env: NodeJS.ProcessEnv; dispose(): Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-wsl-probe-'));
  const tool = async (name: string, body: string) => {
    await writeFile(path.join(dir, name), `#!/bin/sh\n${body}\n`);
    await chmod(path.join(dir, name), 0o755);
  };
  await tool('wsl.exe', `printf 'Default Version: 2\\n\\nWSL2 is unable to start since virtualization is not enabled on this machine.\\n'; exit 0`);
  await tool('sc.exe', o.vmcompute ? "echo 'SERVICE_NAME: vmcompute'; exit 0" : "echo '[SC] EnumQueryServicesStatus:OpenService FAILED 1060:'; exit 36");
  await tool('powershell.exe', `echo ${o.hypervisor ? 'True' : 'False'}`);
  return { env: { PATH: `${dir}:${process.env.PATH ?? ''}` }, dispose: () => rm(dir, { recursive: true, force: true }) };
}

describe('probeIsolation', () => {
  it('reports every VM level with a reason when it is not for this platform', async () => {
    const probes = await probeIsolation({ env: process.env, platform: 'freebsd', arch: 'x64' });
    expect(probes.map((p) => p.kind)).toEqual(['qemu', 'lima', 'wsl']);
    for (const p of probes) {
      expect(p.available).toBe(false);
      expect(p.reason).not.toBe('');
    }
    expect(probes.find((p) => p.kind === 'lima')?.reason).toMatch(/macOS/);
    expect(probes.find((p) => p.kind === 'wsl')?.reason).toMatch(/Windows/);
  });

  it('does not call WSL2 available when wsl --status exits 0 but no hypervisor runs (virtualization off)', async () => {
    for (const [o, available, why] of [
      [{ vmcompute: true, hypervisor: false }, false, /no hypervisor is running/],
      [{ vmcompute: false, hypervisor: false }, false, /Virtual Machine Platform is not installed/],
      [{ vmcompute: true, hypervisor: true }, true, /not verified/],
    ] as const) {
      const tools = await windowsTools(o);
      try {
        const wsl = (await probeIsolation({ platform: 'win32', arch: 'x64', env: tools.env })).find((p) => p.kind === 'wsl');
        expect(wsl?.available, JSON.stringify(o)).toBe(available);
        expect(wsl?.reason).toMatch(why);
      } finally {
        await tools.dispose();
      }
    }
  });

  it('tells how to prepare the VM assets when they are missing', async () => {
    const env = { ...process.env, AIRLOCK_VM_ASSETS: '/nonexistent/airlock-vm-assets' };
    const [qemu] = await probeIsolation({ platform: 'linux', arch: 'x64', env });
    expect(qemu?.available).toBe(false);
    expect(qemu?.reason).toMatch(/prepare-vm-assets\.sh/);
  });

  it('includes Docker when the doctor passes its engine check, and survives a throwing check', async () => {
    const ok = await probeIsolation({ env: process.env, platform: 'freebsd', arch: 'x64', docker: async () => ({ ok: true, reason: '' }) });
    expect(ok[0]).toEqual({ kind: 'docker', available: true, reason: '' });
    const bad = await probeIsolation({ env: process.env,
      platform: 'freebsd',
      arch: 'x64',
      docker: async () => {
        throw new Error('engine not running');
      },
    });
    expect(bad[0]).toEqual({ kind: 'docker', available: false, reason: 'engine not running' });
  });
});
