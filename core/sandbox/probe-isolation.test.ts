import { describe, expect, it } from 'vitest';
import { probeIsolation } from './probe-isolation';

describe('probeIsolation', () => {
  it('reports every VM level with a reason when it is not for this platform', async () => {
    const probes = await probeIsolation({ platform: 'freebsd', arch: 'x64' });
    expect(probes.map((p) => p.kind)).toEqual(['qemu', 'lima', 'wsl']);
    for (const p of probes) {
      expect(p.available).toBe(false);
      expect(p.reason).not.toBe('');
    }
    expect(probes.find((p) => p.kind === 'lima')?.reason).toMatch(/macOS/);
    expect(probes.find((p) => p.kind === 'wsl')?.reason).toMatch(/Windows/);
  });

  it('tells how to prepare the VM assets when they are missing', async () => {
    const env = { ...process.env, AIRLOCK_VM_ASSETS: '/nonexistent/airlock-vm-assets' };
    const [qemu] = await probeIsolation({ platform: 'linux', arch: 'x64', env });
    expect(qemu?.available).toBe(false);
    expect(qemu?.reason).toMatch(/prepare-vm-assets\.sh/);
  });

  it('includes Docker when the doctor passes its engine check, and survives a throwing check', async () => {
    const ok = await probeIsolation({ platform: 'freebsd', arch: 'x64', docker: async () => ({ ok: true, reason: '' }) });
    expect(ok[0]).toEqual({ kind: 'docker', available: true, reason: '' });
    const bad = await probeIsolation({
      platform: 'freebsd',
      arch: 'x64',
      docker: async () => {
        throw new Error('engine not running');
      },
    });
    expect(bad[0]).toEqual({ kind: 'docker', available: false, reason: 'engine not running' });
  });
});
