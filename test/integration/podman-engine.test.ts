/**
 * Podman as the engine (docs/architecture.md §2.3, "Engines"), against its real Docker-compatible API
 * (`AIRLOCK_TEST_PODMAN_SOCKET`, else the rootful /run/podman/podman.sock; required under CI):
 * discovery and identity, the reaper and its label filters, the image checks and a failing build
 * through Podman's builder, the warm pool. Hardening, the canary and a built-in run on Podman are in
 * sandbox-hardening, proxy-sandbox-canary and run-builtin (parametrised).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { ChannelClient } from '../../core/channel/channel-client';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { connectEngine, engineIdentity, pingEngine, type Engine } from '../../core/sandbox/docker/engine';
import { describeEngine } from '../../core/sandbox/docker/engine-endpoint';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { SandboxManager } from '../../core/sandbox/sandbox';
import { podmanTestSocket, requirePrerequisite } from '../support/prerequisites';
import { sandboxImage, testRunId } from './sandbox-support';

const podman = await requirePrerequisite('podman');

async function rejection(p: Promise<unknown>): Promise<AirlockError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AirlockError);
    return err as AirlockError;
  }
  throw new Error('expected a rejection');
}

describe.skipIf(!podman.ok)('Podman as the engine (real Podman API)', () => {
  let engine: Engine;
  let docker: Docker;
  let driver: DockerDriver;
  let image: string;

  beforeAll(async () => {
    // The way a user points Airlock at Podman: the podman choice and CONTAINER_HOST.
    engine = await connectEngine({ ...process.env, AIRLOCK_ENGINE: 'podman', CONTAINER_HOST: `unix://${podmanTestSocket()}` });
    docker = engine.docker;
    driver = new DockerDriver({ env: process.env, engine });
    image = await sandboxImage(engine);
  });
  afterAll(() => engine?.dispose());

  it('is found and identified: Podman, its version, where, rootful or not, its runtimes', async () => {
    expect(engine.endpoint.description).toMatchObject({ kind: 'podman', source: 'CONTAINER_HOST' });
    const id = await engineIdentity(engine);
    expect(id.kind).toBe('podman');
    expect(id.version).toMatch(/^[4-9]\./);
    expect(id.rootless).toBe(process.getuid?.() !== 0 && podmanTestSocket().startsWith('/run/user/'));
    expect(id.runtimes).toContain('runc');
    const ping = await pingEngine(engine, process.env);
    expect(ping).toMatchObject({ kind: 'podman', podman: true, version: id.version });
    expect(describeEngine({ ...engine.endpoint.description, kind: id.kind, rootless: id.rootless }, id.version)).toMatch(new RegExp(`^(rootless )?Podman ${id.version.replace(/\./g, '\\.')} on the local socket`));
    // The podman choice alone (no CONTAINER_HOST) finds the same socket when it is the standard one.
    if (podmanTestSocket() === '/run/podman/podman.sock' && process.getuid?.() === 0) {
      const found = await connectEngine({ ...process.env, AIRLOCK_ENGINE: 'podman', CONTAINER_HOST: '', DOCKER_HOST: '' });
      expect(found.endpoint.description).toMatchObject({ kind: 'podman', location: '/run/podman/podman.sock', rootless: false, source: 'socket' });
      found.dispose();
    }
  });

  it('the sandbox\'s volumes carry the run\'s labels, so the wipe finds them and proves them gone', async () => {
    const runId = testRunId();
    const info = await driver.create({ runId, image, limits: DEFAULT_LIMITS, network: 'none' });
    expect(info.engine).toMatchObject({ description: expect.stringMatching(/^Podman \d/), remote: false });
    const filters = { label: [`airlock.run=${runId}`] };
    expect(((await docker.listVolumes({ filters })).Volumes ?? []).map((v) => v.Name).sort()).toEqual([`airlock-${runId}-state`, `airlock-${runId}-workspace`]);
    const proof = await driver.destroy(runId);
    expect(proof.removed.filter((r) => r.startsWith('volume:'))).toHaveLength(2);
    expect(proof.leftovers).toEqual([]);
    expect((await docker.listVolumes()).Volumes?.filter((v) => v.Name.includes(runId)) ?? []).toEqual([]);
  });

  it('the reaper removes sandboxes and volumes of runs that are not live, and keeps live ones', async () => {
    const orphan = testRunId();
    const live = testRunId();
    const volumeOnly = testRunId();
    const othersVolume = testRunId();
    await driver.create({ runId: orphan, image, limits: DEFAULT_LIMITS, network: 'none' });
    const manager = new SandboxManager(driver);
    const kept = await manager.create({ runId: live, image, limits: DEFAULT_LIMITS, network: 'none' });
    await docker.createVolume({ Name: `airlock-${volumeOnly}-workspace`, Labels: { 'airlock.run': volumeOnly, 'airlock.kind': 'volume' } });
    await docker.createVolume({ Name: `airlock-${othersVolume}-workspace`, Labels: { 'airlock.run': othersVolume, 'airlock.kind': 'volume', 'airlock.owner': `${hostname()}:${process.ppid}` } });
    try {
      const reaped = await new SandboxManager(driver).reapOrphans((runId) => runId === live);
      expect(reaped).toEqual(expect.arrayContaining([orphan, volumeOnly]));
      expect(reaped).not.toContain(live);
      expect(reaped).not.toContain(othersVolume);
      for (const runId of [orphan, volumeOnly]) {
        const filters = { label: [`airlock.run=${runId}`] };
        expect(await docker.listContainers({ all: true, filters })).toEqual([]);
        expect((await docker.listVolumes({ filters })).Volumes ?? []).toEqual([]);
      }
      expect((await kept.channel.run({ argv: ['echo', 'still here'] })).stdout.toString().trim()).toBe('still here');
    } finally {
      await manager.shutdown();
      for (const runId of [orphan, volumeOnly, othersVolume]) await driver.destroy(runId);
    }
  });

  it('checks a user image through Podman: one without node is IMAGE_INCOMPATIBLE, Airlock\'s passes', async () => {
    const err = await rejection(ensureSandboxImage({ env: process.env, engine, image: 'debian:bookworm-slim' }));
    expect(err.kind).toBe('IMAGE_INCOMPATIBLE');
    expect(err.message).toMatch(/is missing node, git/);
    expect(await docker.listContainers({ all: true, filters: { label: ['airlock.kind=image-check'] } })).toEqual([]);
    await expect(ensureSandboxImage({ env: process.env, engine, image })).resolves.toEqual({ ref: image, built: false });
  });

  describe('a failing build through Podman\'s builder', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'airlock-bad-image-'));
      await writeFile(path.join(dir, 'Dockerfile'), 'FROM debian:bookworm-slim\nRUN echo first-line && echo boom-output-tail && exit 3\n');
    });
    afterAll(async () => rm(dir, { recursive: true, force: true }));

    it('gives IMAGE_BUILD_FAILED with the failing step and the tail of its output', async () => {
      const steps: string[] = [];
      const err = await rejection(
        ensureSandboxImage({ env: process.env,
          engine,
          resourcesDir: dir,
          payload: async () => ({ files: { 'helper.js': Buffer.from(`// ${Date.now()}`) }, hash: 'test' }),
          onProgress: (p) => {
            if (p.step) steps.push(`${p.step}/${p.totalSteps}`);
          },
        }),
      );
      expect(err.kind).toBe('IMAGE_BUILD_FAILED');
      expect(err.message).toMatch(/RUN echo first-line/);
      expect(err.message).toMatch(/boom-output-tail/);
      expect(steps.length).toBeGreaterThan(0);
    });
  });

  it('a warm pool on Podman hands out a pre-started sandbox that works and wipes like any other', async () => {
    const manager = new SandboxManager(driver);
    try {
      await manager.warm({ image, limits: DEFAULT_LIMITS, network: 'none' }, 1);
      const pooled = (await driver.list()).filter((s) => s.runId.startsWith('w-'));
      expect(pooled.length).toBeGreaterThanOrEqual(1);
      const sandbox = await manager.create({ runId: testRunId(), image, limits: DEFAULT_LIMITS, network: 'none' });
      expect(pooled.map((p) => p.id)).toContain(sandbox.info.id);
      expect((await sandbox.channel.run({ argv: ['id', '-u'] })).stdout.toString().trim()).toBe('1000');
      // A second channel into the same sandbox is an exec (Podman's exec API, hijacked).
      const second = await driver.openChannel(sandbox.info.id);
      const client = await ChannelClient.connect(second);
      expect((await client.run({ argv: ['echo', 'through-an-exec'] })).stdout.toString().trim()).toBe('through-an-exec');
      client.dispose();
      second.close();
      const proof = await sandbox.destroy();
      expect(proof.leftovers).toEqual([]);
      await manager.whenPoolReady();
    } finally {
      const proofs = await manager.shutdown();
      for (const p of proofs) expect(p.leftovers).toEqual([]);
    }
  });
});
