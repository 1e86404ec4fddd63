import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../driver';
import { GVISOR_HOST_PIDS_CAP, GVISOR_PIDS_HEADROOM, gvisorHostPidsLimit } from './gvisor';
import { HELPER_CAPS, HELPER_COMMAND, hardenedContainerConfig, helperEnv, sandboxVolumes, volumeNames } from './container-config';
import { seccompSecurityOpt } from './seccomp-profile';

const spec = { runId: 'r-abc-12345678', image: 'airlock-sandbox:x', limits: DEFAULT_LIMITS, network: 'none' as const };

describe('hardenedContainerConfig', () => {
  it('is hardened by default', () => {
    const c = hardenedContainerConfig(spec);
    const h = c.HostConfig!;
    // The helper is root with four capabilities; it starts every command as 1000:1000 (§2.3).
    expect(c.User).toBe('0:0');
    expect(c.Env).toContain('AIRLOCK_AGENT_USER=1000:1000');
    expect(h.CapDrop).toEqual(['ALL']);
    expect(h.CapAdd).toEqual(['SETUID', 'SETGID', 'KILL']);
    expect(h.SecurityOpt).toEqual(['no-new-privileges', seccompSecurityOpt(HELPER_CAPS)]);
    expect(h.ReadonlyRootfs).toBe(true);
    expect(h.Privileged).toBe(false);
    expect(h.Init).toBe(true);
    expect(h.NetworkMode).toBe('none');
    expect(h.Binds ?? []).toEqual([]);
    expect(h.Mounts?.every((m) => m.Type === 'volume')).toBe(true);
    expect(h.Memory).toBe(DEFAULT_LIMITS.memoryBytes);
    expect(h.NanoCpus).toBe(DEFAULT_LIMITS.cpus * 1e9);
    expect(h.PidsLimit).toBe(DEFAULT_LIMITS.pids);
    expect(c.Labels).toMatchObject({ 'airlock.run': spec.runId, 'airlock.kind': 'sandbox' });
  });

  it('labels both per-run volumes with the run', () => {
    const mounts = hardenedContainerConfig(spec).HostConfig!.Mounts!;
    const names = volumeNames(spec.runId);
    expect(mounts.map((m) => [m.Source, m.Target])).toEqual([
      [names.workspace, '/workspace'],
      [names.state, '/airlock'],
    ]);
    for (const m of mounts) expect(m.VolumeOptions?.Labels?.['airlock.run']).toBe(spec.runId);
  });

  it('opens the network only when asked', () => {
    expect(hardenedContainerConfig({ ...spec, network: 'open' }).HostConfig!.NetworkMode).toBe('bridge');
  });

  it('rejects nonsense limits with INVALID_INPUT', () => {
    expect(() => hardenedContainerConfig({ ...spec, limits: { ...DEFAULT_LIMITS, pids: 0 } })).toThrow(/pids limit/);
    expect(() => hardenedContainerConfig({ ...spec, limits: { ...DEFAULT_LIMITS, memoryBytes: 1000 } })).toThrow(/memory limit/);
  });

  it('gVisor changes the runtime, bounds the agent by nproc and gives the Sentry host threads; the rest of the hardening is the same', () => {
    const runc = hardenedContainerConfig(spec);
    const gvisor = hardenedContainerConfig(spec, { runtime: 'runsc' });
    expect(runc.HostConfig!.Runtime).toBeUndefined();
    expect(gvisor.HostConfig!.Runtime).toBe('runsc');
    // The agent's processes: RLIMIT_NPROC, enforced by gVisor's kernel (never set under runc: host-wide per uid).
    expect(gvisor.HostConfig!.Ulimits).toContainEqual({ Name: 'nproc', Soft: DEFAULT_LIMITS.pids, Hard: DEFAULT_LIMITS.pids });
    expect(runc.HostConfig!.Ulimits!.map((u) => u.Name)).not.toContain('nproc');
    // The host pids cgroup holds the Sentry's threads under gVisor: the limit gets their room, capped.
    expect(gvisor.HostConfig!.PidsLimit).toBe(gvisorHostPidsLimit(DEFAULT_LIMITS.pids));
    expect(gvisor.HostConfig!.PidsLimit).toBeGreaterThan(DEFAULT_LIMITS.pids);
    expect({ ...gvisor.HostConfig, Runtime: undefined, PidsLimit: undefined, Ulimits: undefined }).toEqual({ ...runc.HostConfig, Runtime: undefined, PidsLimit: undefined, Ulimits: undefined });
  });

  it('the gVisor host pids limit: 32 threads per agent process plus headroom, capped, never below pids + headroom', () => {
    expect(gvisorHostPidsLimit(128)).toBe(128 * 32 + GVISOR_PIDS_HEADROOM);
    expect(gvisorHostPidsLimit(512)).toBe(GVISOR_HOST_PIDS_CAP);
    expect(gvisorHostPidsLimit(20_000)).toBe(20_000 + GVISOR_PIDS_HEADROOM);
  });

  it('gVisor on Podman: nproc is the pids limit, not Podman\'s stated bound', () => {
    const h = hardenedContainerConfig(spec, { runtime: 'runsc', engine: 'podman' }).HostConfig!;
    expect(h.Ulimits!.filter((u) => u.Name === 'nproc')).toEqual([{ Name: 'nproc', Soft: DEFAULT_LIMITS.pids, Hard: DEFAULT_LIMITS.pids }]);
  });

  it('speaks Podman\'s dialect: a sticky world-writable tmpfs home (not U: that would be root\'s), stated nofile/nproc, labelled volumes it can create', () => {
    const h = hardenedContainerConfig(spec, { engine: 'podman' }).HostConfig!;
    expect(h.Tmpfs?.['/home/airlock']).toMatch(/(^|,)mode=1777(,|$)/);
    expect(h.Tmpfs?.['/home/airlock']).not.toMatch(/(^|,)U(,|$)/);
    expect(h.Tmpfs?.['/tmp']).toMatch(/^rw,exec,nosuid,nodev,/);
    expect(h.Tmpfs?.['/home/airlock']).not.toMatch(/uid=/);
    expect(h.Ulimits?.map((u) => u.Name).sort()).toEqual(['core', 'nofile', 'nproc']);
    expect(h.Ulimits?.find((u) => u.Name === 'core')).toMatchObject({ Soft: 0, Hard: 0 });
    expect(hardenedContainerConfig(spec).HostConfig!.Tmpfs?.['/home/airlock']).toMatch(/uid=1000,gid=1000/);
    const vols = sandboxVolumes(spec.runId, 'inst-1');
    expect(vols.map((v) => v.Name)).toEqual(Object.values(volumeNames(spec.runId)));
    for (const v of vols) expect(v.Labels).toMatchObject({ 'airlock.run': spec.runId, 'airlock.installation': 'inst-1' });
  });

  it('starts the helper from Airlock\'s files and environment only, whatever the image says (docs/architecture.md §2.3)', () => {
    const c = hardenedContainerConfig(spec, { imageEnv: ['NODE_OPTIONS=--require /x.js', 'LD_PRELOAD=/x.so', 'PATH=/evil', 'HOME=/root'] });
    expect(c.Entrypoint).toEqual([]);
    expect(c.Cmd).toEqual(HELPER_COMMAND);
    expect(c.Cmd![0]).toBe('/opt/airlock/lib/ld.so');
    expect(c.User).toBe('0:0');
    expect(c.WorkingDir).toBe('/workspace');
    // Docker drops a bare name; ours win over the image's PATH and HOME.
    expect(c.Env).toEqual(['AIRLOCK_AGENT_USER=1000:1000', 'HOME=/home/airlock', 'LANG=C.UTF-8', 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'NODE_OPTIONS', 'LD_PRELOAD']);
    // Podman keeps the image's value for a bare name: set empty there.
    expect(helperEnv(['NODE_OPTIONS=x', 'A'], 'podman').slice(4)).toEqual(['NODE_OPTIONS=', 'A=']);
  });
});
