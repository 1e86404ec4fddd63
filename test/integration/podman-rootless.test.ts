/**
 * Rootless Podman as the engine (docs/architecture.md §2.3, "Limits the engine must apply"): a real
 * Podman API service run by a user of its own (`AIRLOCK_TEST_PODMAN_ROOTLESS_SOCKET`; required under
 * CI). It is found and described as rootless. Whether it can apply a sandbox's limits depends on the
 * host: on cgroup v1 it cannot (Podman drops them with only a warning on its own command line), and
 * Airlock must refuse to start a sandbox there, leave nothing behind, and say why in the setup check.
 */
import { statfs } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { createAppContext } from '../../core/app-context';
import { engineCheck, runDoctorChecks } from '../../core/doctor/doctor';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { connectEngine, engineIdentity, type Engine } from '../../core/sandbox/docker/engine';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { requirePrerequisite, rootlessPodmanTestSocket } from '../support/prerequisites';
import { testRunId } from './sandbox-support';

const rootless = await requirePrerequisite('podman-rootless');
/** cgroup2fs at /sys/fs/cgroup: the unified hierarchy (v2); tmpfs: v1. Read from the host, not the engine. */
const CGROUP2_MAGIC = 0x63677270;

describe.skipIf(!rootless.ok)('rootless Podman as the engine (real Podman API, its own user)', () => {
  const env = { ...process.env, AIRLOCK_ENGINE: 'podman', CONTAINER_HOST: `unix://${rootlessPodmanTestSocket()}`, DOCKER_HOST: '' };
  let engine: Engine;
  let hostV2: boolean;

  beforeAll(async () => {
    engine = await connectEngine(env);
    hostV2 = (await statfs('/sys/fs/cgroup')).type === CGROUP2_MAGIC;
  });
  afterAll(() => engine?.dispose());

  it('is identified as rootless Podman, and what it can limit matches this host', async () => {
    const id = await engineIdentity(engine);
    expect(id).toMatchObject({ kind: 'podman', rootless: true });
    expect(id.limits.cgroupVersion).toBe(hostV2 ? '2' : '1');
    // Podman's compatible /info claims every limit here; only its own answer tells the truth.
    const compat = (await engine.docker.info()) as { MemoryLimit?: boolean; PidsLimit?: boolean };
    if (!hostV2) {
      expect(compat).toMatchObject({ MemoryLimit: true, PidsLimit: true });
      expect(id.limits).toMatchObject({ enforced: false, missing: ['memory', 'pids', 'cpu'] });
    }
  });

  it('a sandbox that would run without its limits is refused before anything is created, and the setup check says why', async () => {
    const id = await engineIdentity(engine);
    if (id.limits.enforced) {
      // A cgroup v2 host that delegates the controllers: nothing to refuse; the other Podman tests cover runs.
      expect(hostV2).toBe(true);
      return;
    }
    const runId = testRunId();
    let err: unknown;
    try {
      await new DockerDriver({ env: process.env, engine }).create({ runId, image: 'airlock-sandbox:never-used', limits: DEFAULT_LIMITS, network: 'none' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AirlockError);
    expect((err as AirlockError).kind).toBe('ENGINE_LIMITS_UNSUPPORTED');
    expect((err as AirlockError).message).toMatch(/rootless Podman cannot apply cgroup limits on a cgroup v1 host.*Airlock does not start sandboxes there.*rootful Podman/s);
    const filters = { label: [`airlock.run=${runId}`] };
    expect(await engine.docker.listContainers({ all: true, filters })).toEqual([]);
    expect((await engine.docker.listVolumes({ filters })).Volumes ?? []).toEqual([]);

    const report = await runDoctorChecks([engineCheck], { app: createAppContext({ env }), env, options: { build: false, agents: false }, progress: () => undefined, progressDone: () => undefined });
    const check = report.checks.find((c) => c.id === 'docker.engine');
    expect(check).toMatchObject({ status: 'fail', detail: expect.stringMatching(/cannot apply cgroup limits.*\[ENGINE_LIMITS_UNSUPPORTED\]/s), fix: expect.stringMatching(/rootful Podman or Docker/) });
  });
});
