import { describe, expect, it } from 'vitest';
import { AirlockError } from '../../../contracts/errors';
import { describeError } from '../../../contracts/error-help';
import type Docker from 'dockerode';
import { identifyEngine } from './engine-endpoint';
import { assertLimitsEnforced, limitSupportFrom } from './engine-limits';

const dockerVersion = { Version: '28.2.2', ApiVersion: '1.50', Components: [{ Name: 'Engine', Version: '28.2.2' }] } as unknown as Docker.DockerVersion;
const podmanVersion = { Version: '4.3.1', ApiVersion: '1.41', Components: [{ Name: 'Podman Engine', Version: '4.3.1' }] } as unknown as Docker.DockerVersion;
// What Podman 4.3's compatible /info says on a cgroup v1 host, rootful and rootless alike (seen here).
const podmanCompatInfo = { CgroupVersion: '1', MemoryLimit: true, PidsLimit: true, CpuCfsQuota: true, SecurityOptions: ['name=seccomp,profile=default'] };

describe('engine limits (docs/architecture.md §2.3)', () => {
  it('rootful Docker on cgroup v1 applies every limit', () => {
    const id = identifyEngine(dockerVersion, { CgroupVersion: '1', MemoryLimit: true, PidsLimit: true, CpuCfsQuota: true, SecurityOptions: ['name=seccomp,profile=default'] });
    expect(id.limits).toEqual({ enforced: true, missing: [], cgroupVersion: '1' });
    expect(() => assertLimitsEnforced(id)).not.toThrow();
  });

  it('rootless Podman on cgroup v1 is told only by libpod info, and is refused', () => {
    const id = identifyEngine(podmanVersion, podmanCompatInfo, { cgroupVersion: 'v1', cgroupControllers: [], security: { rootless: true } });
    expect(id).toMatchObject({ kind: 'podman', rootless: true, limits: { enforced: false, missing: ['memory', 'pids', 'cpu'], cgroupVersion: '1' } });
    let err: unknown;
    try {
      assertLimitsEnforced(id);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AirlockError);
    const info = (err as AirlockError).toInfo();
    expect(info.kind).toBe('ENGINE_LIMITS_UNSUPPORTED');
    expect(info.message).toMatch(/rootless Podman cannot apply cgroup limits on a cgroup v1 host/);
    expect(info.message).toMatch(/rootful Podman .*or Docker/);
    expect(describeError(info)).toMatchObject({ title: 'The container engine cannot limit a sandbox', actions: ['open-setup-check'] });
  });

  it('rootful Podman gets the controllers it needs from libpod info', () => {
    const id = identifyEngine(podmanVersion, podmanCompatInfo, { cgroupVersion: 'v1', cgroupControllers: ['cpuset', 'cpu', 'cpuacct', 'blkio', 'memory', 'devices', 'freezer', 'pids'], security: { rootless: false } });
    expect(id.rootless).toBe(false);
    expect(id.limits.enforced).toBe(true);
  });

  it('rootless Podman on cgroup v2 is judged by the controllers delegated to the user', () => {
    expect(limitSupportFrom(podmanCompatInfo, true, { cgroupVersion: 'v2', cgroupControllers: ['memory', 'pids', 'cpu'] }).enforced).toBe(true);
    const partial = limitSupportFrom(podmanCompatInfo, true, { cgroupVersion: 'v2', cgroupControllers: ['memory'] });
    expect(partial).toEqual({ enforced: false, missing: ['pids', 'cpu'], cgroupVersion: '2' });
    expect(() => assertLimitsEnforced({ kind: 'podman', version: '5', apiVersion: '1.41', rootless: true, runtimes: [], limits: partial })).toThrow(/does not apply the pids, cpu limits here/);
  });

  it('rootless Docker on cgroup v1 (name=rootless) is refused; a field the engine leaves out is not held against it', () => {
    const id = identifyEngine(dockerVersion, { CgroupVersion: '1', MemoryLimit: false, PidsLimit: false, CpuCfsQuota: false, SecurityOptions: ['name=seccomp,profile=default', 'name=rootless'] });
    expect(id).toMatchObject({ rootless: true, limits: { enforced: false } });
    expect(identifyEngine(dockerVersion, {}).limits).toEqual({ enforced: true, missing: [] });
    expect(limitSupportFrom({ MemoryLimit: true, PidsLimit: false }, false).missing).toEqual(['pids']);
  });
});
