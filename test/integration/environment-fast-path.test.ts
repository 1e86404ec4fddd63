/**
 * docs/architecture.md §16, "The prepared path": what makes a run on a project environment start
 * fast, on the real engine.
 * - The host's build record: an unchanged devcontainer build is not sent to the engine again; a
 *   changed context file, a changed Dockerfile or a FROM image that now names another image builds
 *   again, and the image holds the change; a tag re-pointed elsewhere is not trusted.
 * - The app's warm pool keeps one started sandbox of the environment's image (by id) after a run:
 *   it is hardened exactly as a fresh one, the next run (on another project of the same image)
 *   claims it and finds nothing of the run before, `env prune` drains the pool of a prepared image
 *   before removing it, and closing the app wipes what is left and it is verified gone.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Docker from 'dockerode';
import { StartRunInput } from '../../contracts/runs';
import { BuildRecords } from '../../core/environment/build-records';
import { parseEnvironmentChoice, resolveEnvironment } from '../../core/environment/environment-choice';
import { prepareEnvironmentImage } from '../../core/environment/environment-image';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { DEFAULT_LIMITS, type ImageProgress } from '../../core/sandbox/driver';
import { LABEL_POOL } from '../../core/sandbox/labels';
import type { ScriptedTurn } from '../fixtures/fake-upstream';
import { nodelessImage } from '../support/environment-images';
import { requirePrerequisite } from '../support/prerequisites';
import { createRunFixture, exec, leftoversOf, type RunFixture } from '../support/run-fixture';
import { testRunId } from './sandbox-support';

const docker = await requirePrerequisite('docker');

function script(command: string): ScriptedTurn[] {
  return [{ toolCalls: [{ name: 'run_command', input: { command } }] }, { toolCalls: [{ name: 'finish', input: { summary: 'done' } }] }];
}

/** The hardening a sandbox's container carries, as the engine reports it (docs/architecture.md §2.3). */
function hardening(i: Docker.ContainerInspectInfo): unknown {
  const hc = i.HostConfig;
  return {
    user: i.Config.User,
    capDrop: hc.CapDrop,
    capAdd: hc.CapAdd,
    securityOpt: hc.SecurityOpt,
    readOnlyRoot: hc.ReadonlyRootfs,
    privileged: hc.Privileged,
    network: hc.NetworkMode,
    runtime: hc.Runtime,
    tmpfs: Object.keys(hc.Tmpfs ?? {}).sort(),
    mounts: (i.Mounts ?? []).map((m) => `${m.Type}:${m.Destination}:${m.RW}`).sort(),
    memory: hc.Memory,
    nanoCpus: hc.NanoCpus,
  };
}

describe.skipIf(!docker.ok)('the prepared path: build record and warm pool (real Docker, fake upstream)', () => {
  let f: RunFixture;
  let closed = false;
  let engine: Docker;
  const images: string[] = [];

  beforeAll(async () => {
    engine = (await connectEngine(process.env)).docker;
    await nodelessImage();
    f = await createRunFixture();
  });
  afterAll(async () => {
    if (!closed) await f?.close();
    for (const ref of images) await engine?.getImage(ref).remove({ force: true }).catch(() => undefined);
  });

  it('an unchanged devcontainer build skips the engine; a changed context, Dockerfile or FROM image builds again', async () => {
    const base = await nodelessImage();
    const from = `airlock-test-fastpath-from:${process.pid}`;
    await exec('docker', ['tag', base, from]);
    images.push(from);
    const dir = await f.project({
      '.devcontainer/devcontainer.json': JSON.stringify({ build: { dockerfile: 'Dockerfile' } }),
      '.devcontainer/Dockerfile': `FROM ${from}\nCOPY marker.txt /opt/marker.txt\n`,
      '.devcontainer/marker.txt': 'one\n',
    });
    const records = new BuildRecords(f.home);
    const airlockRef = await f.core.image('base');
    async function prepare(): Promise<{ built: boolean; marker: string; ref: string }> {
      const seen: ImageProgress[] = [];
      const resolved = await resolveEnvironment(dir, parseEnvironmentChoice(undefined), { env: process.env, allowedLocalEnv: [] });
      const p = await prepareEnvironmentImage(engine, resolved, { projectDir: dir, airlockRef, emit: (e) => seen.push(e), records });
      if (!p) throw new Error('no environment image');
      images.push(p.derived.ref);
      const marker = (await exec('docker', ['run', '--rm', '--entrypoint', 'cat', p.derived.id, '/opt/marker.txt'])).stdout;
      return { built: seen.some((e) => e.message.startsWith('building the devcontainer image')), marker, ref: p.derived.baseRef };
    }

    const first = await prepare();
    expect(first.built).toBe(true);
    images.push(first.ref);
    expect(first.marker).toBe('one\n');
    // Unchanged: the record answers, the engine is not asked to build.
    const again = await prepare();
    expect(again.built).toBe(false);
    expect(again.marker).toBe('one\n');

    // A changed context file (the Dockerfile and devcontainer.json unchanged): built, and the image has it.
    await writeFile(path.join(dir, '.devcontainer/marker.txt'), 'two\n');
    const changedContext = await prepare();
    expect(changedContext.built).toBe(true);
    expect(changedContext.marker).toBe('two\n');
    expect((await prepare()).built).toBe(false);

    // The FROM tag now names another image: built again, on it.
    await exec('docker', ['tag', airlockRef, from]);
    const rebased = await prepare();
    expect(rebased.built).toBe(true);
    const go = (await exec('docker', ['run', '--rm', '--entrypoint', 'sh', rebased.ref, '-c', 'command -v go || echo no-go'])).stdout.trim();
    expect(go).toBe('no-go');

    // The tag the record names was pointed elsewhere: not trusted, built again.
    await exec('docker', ['tag', base, rebased.ref]);
    expect((await prepare()).built).toBe(true);

    // A changed Dockerfile (a new content hash, so a new tag): built.
    await writeFile(path.join(dir, '.devcontainer/Dockerfile'), `FROM ${from}\nCOPY marker.txt /opt/marker.txt\nENV CHANGED=1\n`);
    const changedDockerfile = await prepare();
    expect(changedDockerfile.built).toBe(true);
    images.push(changedDockerfile.ref);
  });

  it("the app's pool keeps a hardened sandbox of the environment's image; the next run claims it and finds nothing of the last; prune and close wipe it", async () => {
    await f.core.warm();
    const devcontainer = { '.devcontainer/devcontainer.json': JSON.stringify({ image: await nodelessImage(), postCreateCommand: 'echo prepared > "$HOME/prepared-mark"' }) };
    const a = await f.project({ ...devcontainer, 'a.txt': 'project a\n' });
    const b = await f.project({ ...devcontainer, 'b.txt': 'project b\n' });
    const run = async (projectDir: string, command: string) => {
      f.upstream.setScript(script(command));
      const started = await f.services.runs.start(StartRunInput.parse({ projectDir, task: 't', provider: 'anthropic', model: 'claude-sonnet-4-5', trustEnvironment: true }));
      const done = await f.core.runs.wait(started.id);
      expect(done.error).toBeUndefined();
      return done;
    };
    const manager = await f.core.sandboxes('container');
    const pooledOf = async (imageId: string) => {
      const ids = (await exec('docker', ['ps', '-q', '--filter', `label=${LABEL_POOL}=true`, '--filter', `label=airlock.installation=${await f.core.app.installationId()}`])).stdout.split('\n').filter(Boolean);
      const all = await Promise.all(ids.map((id) => engine.getContainer(id).inspect()));
      return all.filter((c) => c.Image === imageId);
    };

    // Run 1 on project A: setup runs, the prepared environment is kept; the run leaves state in its home and /tmp.
    const first = await run(a, 'echo secret-of-a > "$HOME/left-by-a"; echo secret-of-a > /tmp/left-by-a; ls');
    expect(first.environment?.prepared?.status).toBe('created');
    const preparedId = (await engine.getImage(first.environment?.prepared?.image ?? '').inspect()).Id;
    await manager.whenPoolReady();
    const [pooled] = await pooledOf(preparedId);
    expect(pooled).toBeDefined();
    const pooledLabel = pooled?.Config.Labels['airlock.run'];

    // Hardened exactly as a fresh sandbox of the same image (a spec the pool does not hold, so made now).
    const freshRun = testRunId();
    const fresh = await manager.create({ runId: freshRun, image: preparedId, limits: { ...DEFAULT_LIMITS, pids: DEFAULT_LIMITS.pids - 1 }, network: 'none' });
    try {
      expect(fresh.info.runId).toBe(freshRun);
      const freshInspect = await engine.getContainer(fresh.info.id).inspect();
      expect(hardening(pooled as Docker.ContainerInspectInfo)).toEqual(hardening(freshInspect));
      expect(pooled?.HostConfig.CapDrop).toEqual(['ALL']);
      expect(pooled?.HostConfig.ReadonlyRootfs).toBe(true);
      expect(pooled?.HostConfig.NetworkMode).toBe('none');
    } finally {
      expect((await fresh.destroy()).leftovers).toEqual([]);
    }

    // Run 2, on project A again: it claims the pooled sandbox of the prepared image, sees the prepared
    // state but nothing run 1 left.
    const second = await run(a, 'cat "$HOME/prepared-mark"; cat "$HOME/left-by-a" /tmp/left-by-a 2>&1; ls; echo made > agent-made.txt');
    expect(second.environment?.prepared?.status).toBe('reused');
    // Setup left nothing in the workspace but the project's own folder (the host counted it at commit):
    // nothing is put back there or collected again, and review shows the agent's file alone.
    expect((await engine.getImage(preparedId).inspect()).Config.Labels['airlock.prepared.workspace-entries']).toBe('0');
    expect(await readFile(f.core.store.paths(second.id).audit, 'utf8')).toContain('holds no workspace files');
    expect(second.changedFiles.map((c) => `${c.status} ${c.path}`)).toEqual(['added agent-made.txt']);
    expect(second.wipe?.pooledAs).toBe(pooledLabel);
    expect(second.wipe?.verified).toBe(true);
    const seen = JSON.stringify(f.upstream.requests.at(-1)?.body ?? {});
    expect(seen).toContain('prepared');
    expect(seen).toContain('left-by-a: No such file');
    expect(seen).not.toContain('secret-of-a');
    expect(await leftoversOf(pooledLabel ?? 'none')).toEqual([]);

    // Project B on the same base image has its own prepared environment: run 1 on B sets up, nothing of A is there.
    const onB = await run(b, 'ls; cat "$HOME/left-by-a" 2>&1');
    expect(onB.environment?.prepared?.status).toBe('created');
    const seenB = JSON.stringify(f.upstream.requests.at(-1)?.body ?? {});
    expect(seenB).toContain('b.txt');
    expect(seenB).not.toContain('a.txt');
    expect(seenB).not.toContain('secret-of-a');

    // Prune drains the pool of the prepared images first: every one is removed, none kept for a sandbox that holds it.
    await manager.whenPoolReady();
    expect((await pooledOf(preparedId)).length).toBe(1);
    const pruned = await f.services.environments.prune({});
    expect(pruned.kept).toEqual([]);
    expect(pruned.removed.map((r) => r.key)).toContain(first.environment?.prepared?.key);
    expect(await pooledOf(preparedId)).toEqual([]);

    // What the pool still holds (the Airlock image's sandbox `warm()` keeps; B's again after a run) is wiped when the app closes.
    await run(b, 'true');
    await manager.whenPoolReady();
    const left = (await exec('docker', ['ps', '-aq', '--filter', `label=${LABEL_POOL}=true`, '--filter', `label=airlock.installation=${await f.core.app.installationId()}`])).stdout.split('\n').filter(Boolean);
    expect(left.length).toBeGreaterThanOrEqual(2);
    closed = true;
    await f.close();
    for (const id of left) await expect(engine.getContainer(id).inspect()).rejects.toThrow();
  });
});
