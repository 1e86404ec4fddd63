/**
 * Lifecycle and errors against a real engine: the reaper, a wrong DOCKER_HOST, a user image
 * without node, a failing image build, the warm pool.
 */
import { execFile } from 'node:child_process';
import { access, chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { hostname, tmpdir } from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { ensureSandboxImage, pruneSandboxImages } from '../../core/sandbox/image';
import { SandboxManager, checkEngine } from '../../core/sandbox/sandbox';
import { PROCESS_OWNER } from '../../core/common/process-alive';
import { requirePrerequisite } from '../support/prerequisites';
import { sandboxImage, testRunId, testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

async function kindOf(p: Promise<unknown>): Promise<AirlockError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(AirlockError);
    return err as AirlockError;
  }
  throw new Error('expected a rejection');
}

describe.skipIf(!docker.ok)('sandbox lifecycle (real engine)', () => {
  const driver = new DockerDriver({ env: process.env, engine: testEngine() });
  let engine: Docker;
  let image: string;

  beforeAll(async () => {
    image = await sandboxImage();
    engine = (await driver.engine()).docker;
  });

  it('the reaper removes sandboxes and volumes of runs that are not live, and keeps live ones', async () => {
    const orphan = testRunId();
    const live = testRunId();
    const volumeOnly = testRunId();
    await driver.create({ runId: orphan, image, limits: DEFAULT_LIMITS, network: 'none' });
    const manager = new SandboxManager(driver);
    const kept = await manager.create({ runId: live, image, limits: DEFAULT_LIMITS, network: 'none' });
    // A crash between creating a volume and its container leaves a labelled volume alone.
    await engine.createVolume({ Name: `airlock-${volumeOnly}-workspace`, Labels: { 'airlock.run': volumeOnly, 'airlock.kind': 'volume' } });
    // Another Airlock process (another home) still running made this one: its container may be on its way.
    const othersVolume = testRunId();
    await engine.createVolume({ Name: `airlock-${othersVolume}-workspace`, Labels: { 'airlock.run': othersVolume, 'airlock.kind': 'volume', 'airlock.owner': `${hostname()}:${process.ppid}` } });
    try {
      // A fresh manager (the next start after a crash) that only knows `live` is live.
      const reaper = new SandboxManager(driver);
      // Only this test's runs count as not live: a crash left on purpose by a test running beside
      // this one (run-crash) is not ours to reap.
      const reaped = await reaper.reapOrphans((runId) => ![orphan, volumeOnly, othersVolume].includes(runId));
      expect(reaped).toEqual(expect.arrayContaining([orphan, volumeOnly]));
      expect(reaped).not.toContain(live);
      expect(reaped).not.toContain(othersVolume);
      expect((await engine.listVolumes({ filters: { label: [`airlock.run=${othersVolume}`] } })).Volumes ?? []).toHaveLength(1);
      for (const runId of [orphan, volumeOnly]) {
        const filters = { label: [`airlock.run=${runId}`] };
        expect(await engine.listContainers({ all: true, filters })).toEqual([]);
        expect((await engine.listVolumes({ filters })).Volumes ?? []).toEqual([]);
      }
      expect((await kept.channel.run({ argv: ['echo', 'still here'] })).stdout.toString().trim()).toBe('still here');
    } finally {
      await manager.shutdown();
      await driver.destroy(orphan);
      await driver.destroy(volumeOnly);
      await driver.destroy(othersVolume);
    }
  });

  it('a DOCKER_HOST that points nowhere gives DOCKER_NOT_RUNNING with what to do', async () => {
    const env = { ...process.env, DOCKER_HOST: `unix://${path.join(tmpdir(), 'airlock-no-engine.sock')}` };
    const bad = new DockerDriver({ env, engine: connectEngine(env) });
    const err = await kindOf(bad.list());
    expect(err.kind).toBe('DOCKER_NOT_RUNNING');
    expect(err.message).toMatch(/DOCKER_HOST/);
    const tcp = new DockerDriver({ env: { ...process.env, DOCKER_HOST: 'tcp://127.0.0.1:1' }, engine: connectEngine({ ...process.env, DOCKER_HOST: 'tcp://127.0.0.1:1' }) });
    // An engine reached over the network: where, and that the link or the engine is down.
    const unreachable = await kindOf(tcp.create({ runId: testRunId(), image, limits: DEFAULT_LIMITS, network: 'none' }));
    expect(unreachable.kind).toBe('DOCKER_UNREACHABLE');
    expect(unreachable.message).toContain('over plain TCP at 127.0.0.1:1');
    const status = await checkEngine(env, await connectEngine(env));
    expect(status.ok).toBe(false);
    expect(status.error?.kind).toBe('DOCKER_NOT_RUNNING');
    const good = await checkEngine(process.env, await connectEngine(process.env));
    expect(good.ok).toBe(true);
    expect(good.version).toMatch(/^\d+\./);
  });

  it('a user without access to the socket gets DOCKER_PERMISSION_DENIED with what to do', async (ctx) => {
    // Root bypasses the socket's permissions, so the probe runs as `nobody` (needs root + setpriv).
    const canDrop = process.getuid?.() === 0 && (await access('/usr/bin/setpriv').then(() => true, () => false));
    if (!canDrop) ctx.skip();
    const dir = await mkdtemp(path.join(tmpdir(), 'airlock-perm-'));
    const driverPath = fileURLToPath(new URL('../../core/sandbox/docker/docker-driver.ts', import.meta.url));
    const tsx = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));
    const probe = path.join(dir, 'probe.mts');
    await writeFile(
      probe,
      `import { DockerDriver } from ${JSON.stringify(driverPath)};\n` +
        `import { connectEngine } from ${JSON.stringify(driverPath.replace(/docker-driver\.ts$/, 'engine.ts'))};\n` +
        `try { await new DockerDriver({ env: process.env, engine: connectEngine(process.env) }).list(); console.log(JSON.stringify({ kind: 'none' })); }\n` +
        `catch (e) { console.log(JSON.stringify({ kind: e.kind, message: e.message })); }\n`,
    );
    await chmod(dir, 0o755);
    await chmod(probe, 0o644);
    try {
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          '/usr/bin/setpriv',
          ['--reuid=65534', '--regid=65534', '--clear-groups', tsx, probe],
          { cwd: dir, env: { PATH: process.env.PATH, HOME: dir, DOCKER_HOST: 'unix:///var/run/docker.sock' } },
          (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
        ),
      );
      const result = JSON.parse(out.trim().split('\n').pop() as string) as { kind: string; message: string };
      expect(result.kind).toBe('DOCKER_PERMISSION_DENIED');
      expect(result.message).toMatch(/docker' group/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a user image without node is rejected with IMAGE_INCOMPATIBLE naming what is missing', async () => {
    // The seeded Debian base has tar but neither node nor git.
    const err = await kindOf(ensureSandboxImage({ env: process.env, engine: testEngine(), image: 'debian:bookworm-slim' }));
    expect(err.kind).toBe('IMAGE_INCOMPATIBLE');
    expect(err.message).toMatch(/is missing node, git, which/);
    expect(await engine.listContainers({ all: true, filters: { label: ['airlock.kind=image-check'] } })).toEqual([]);
    // Airlock's own image passes the same check.
    await expect(ensureSandboxImage({ env: process.env, engine: testEngine(), image })).resolves.toEqual({ ref: image, built: false });
    expect((await kindOf(ensureSandboxImage({ env: process.env, engine: testEngine(), image: 'airlock-no-such-image:nope' }))).kind).toBe('NOT_FOUND');
  });

  describe('image build failure', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'airlock-bad-image-'));
      await writeFile(path.join(dir, 'Dockerfile'), 'FROM debian:bookworm-slim\nRUN echo first-line && echo boom-output-tail && exit 3\n');
    });
    afterAll(async () => rm(dir, { recursive: true, force: true }));

    it('gives IMAGE_BUILD_FAILED with the failing step and the tail of its output', async () => {
      const steps: string[] = [];
      const err = await kindOf(
        ensureSandboxImage({ env: process.env, engine: testEngine(),
          resourcesDir: dir,
          payload: async () => ({ files: { 'helper.js': Buffer.from(`// ${Date.now()}`) }, hash: 'test' }),
          onProgress: (p) => {
            if (p.step) steps.push(`${p.step}/${p.totalSteps}`);
          },
        }),
      );
      expect(err.kind).toBe('IMAGE_BUILD_FAILED');
      // The engine appends a LABEL step for the image labels, so the RUN is step 2 of 3.
      expect(err.message).toMatch(/step 2\/\d \(RUN echo first-line/);
      expect(err.message).toMatch(/boom-output-tail/);
      expect(err.message).toMatch(/non-zero code: 3/);
      expect(steps.some((s) => s.startsWith('2/'))).toBe(true);
    });
  });

  it('pruning removes older tags and keeps the current one', async () => {
    // A private repository name, so other images on a shared engine are never touched.
    const repo = `airlock-prune-test-${Date.now().toString(36)}`;
    const base = engine.getImage('debian:bookworm-slim');
    for (const tag of ['old', 'current']) await base.tag({ repo, tag });
    try {
      const removed = await pruneSandboxImages({ engine: await driver.engine(), repository: repo, keep: [`${repo}:current`] });
      expect(removed).toContain(`${repo}:old`);
      expect(removed).not.toContain(`${repo}:current`);
      const left = (await engine.listImages({ filters: { reference: [repo] } })).flatMap((i) => i.RepoTags ?? []);
      expect(left).toContain(`${repo}:current`);
      expect(left).not.toContain(`${repo}:old`);
    } finally {
      for (const tag of ['old', 'current']) await engine.getImage(`${repo}:${tag}`).remove().catch(() => undefined);
    }
  });

  it('a warm pool hands out a pre-started sandbox that works and wipes like any other', async () => {
    const manager = new SandboxManager(driver);
    const made = new Set<string>();
    try {
      await manager.warm({ image, limits: DEFAULT_LIMITS, network: 'none' }, 1);
      // This process's pool only: another test file's may be on the same engine.
      const ours = async () => (await driver.list()).filter((s) => s.runId.startsWith('w-') && s.owner === PROCESS_OWNER);
      const pooled = await ours();
      expect(pooled.length).toBeGreaterThanOrEqual(1);
      for (const s of pooled) made.add(s.id);
      const runId = testRunId();
      const sandbox = await manager.create({ runId, image, limits: DEFAULT_LIMITS, network: 'none' });
      expect(sandbox.runId).toBe(runId);
      expect(pooled.map((p) => p.id)).toContain(sandbox.info.id);
      expect((await sandbox.channel.run({ argv: ['id', '-u'] })).stdout.toString().trim()).toBe('1000');
      const proof = await sandbox.destroy();
      expect(proof.leftovers).toEqual([]);
      expect(proof.runId).toBe(runId);
      expect(proof.labelRunId).toBe(sandbox.info.runId);
      // The claimed slot is refilled (a moment after the claim, so the claiming run's first command
      // has the machine to itself), and whenPoolReady() waits for that refill too.
      await manager.whenPoolReady();
      const refilled = (await ours()).filter((s) => !pooled.some((p) => p.id === s.id));
      expect(refilled.length).toBeGreaterThanOrEqual(1);
      for (const s of refilled) made.add(s.id);
    } finally {
      const proofs = await manager.shutdown();
      for (const p of proofs) expect(p.leftovers).toEqual([]);
    }
    // Everything this pool made is gone when shutdown() returns (other processes' pools are not ours to judge).
    expect((await driver.list()).filter((s) => made.has(s.id))).toEqual([]);
  });
});
