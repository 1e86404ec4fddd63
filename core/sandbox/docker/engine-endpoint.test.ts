import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { engineChoiceFrom, identifyEngine, parseDockerHost, podmanSockets, resolveEngineEndpoint } from './engine-endpoint';

describe('engine endpoint: which engine, where', () => {
  let runtimeDir: string;
  beforeAll(async () => {
    runtimeDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-xdg-'));
    await mkdir(path.join(runtimeDir, 'podman'));
    // Existence is all discovery checks; a plain file stands in for the socket.
    await writeFile(path.join(runtimeDir, 'podman', 'podman.sock'), '');
  });
  afterAll(() => rm(runtimeDir, { recursive: true, force: true }));

  it('DOCKER_HOST wins under auto, CONTAINER_HOST next, and both describe where they came from', async () => {
    const d = await resolveEngineEndpoint({ DOCKER_HOST: 'unix:///nowhere/docker.sock', CONTAINER_HOST: 'unix:///nowhere/podman.sock' }, 'auto');
    expect(d.description).toMatchObject({ kind: 'docker', location: 'unix:///nowhere/docker.sock', source: 'DOCKER_HOST' });
    const c = await resolveEngineEndpoint({ CONTAINER_HOST: 'unix:///nowhere/podman.sock' }, 'auto');
    expect(c.options).toEqual({ socketPath: '/nowhere/podman.sock' });
    expect(c.description).toMatchObject({ kind: 'podman', source: 'CONTAINER_HOST' });
  });

  it('a DOCKER_HOST naming podman.sock is described as Podman (rootless under /run/user)', () => {
    expect(parseDockerHost('unix:///run/user/1000/podman/podman.sock').description).toMatchObject({ kind: 'podman', rootless: true });
    expect(parseDockerHost('unix:///run/podman/podman.sock').description).toMatchObject({ kind: 'podman', rootless: false });
  });

  it('the podman choice ignores a Docker DOCKER_HOST and finds the rootless socket under XDG_RUNTIME_DIR', async () => {
    const e = await resolveEngineEndpoint({ DOCKER_HOST: 'unix:///var/run/docker.sock', XDG_RUNTIME_DIR: runtimeDir }, 'podman');
    if (process.getuid?.() === 0 && e.description.rootless === false) {
      // root with a running system service: the rootful socket comes first.
      expect(e.options).toEqual({ socketPath: '/run/podman/podman.sock' });
    } else {
      expect(e.options).toEqual({ socketPath: path.join(runtimeDir, 'podman', 'podman.sock') });
      expect(e.description).toMatchObject({ kind: 'podman', rootless: true, source: 'socket' });
    }
  });

  it('root looks at the rootful socket first, everyone else at their own', () => {
    expect(podmanSockets({ XDG_RUNTIME_DIR: '/x' }, 0).map((s) => s.path)).toEqual(['/run/podman/podman.sock', '/x/podman/podman.sock']);
    expect(podmanSockets({ XDG_RUNTIME_DIR: '/x' }, 1000).map((s) => s.path)).toEqual(['/x/podman/podman.sock', '/run/podman/podman.sock']);
    expect(podmanSockets({}, 1000)[0]?.path).toBe('/run/user/1000/podman/podman.sock');
  });

  it('AIRLOCK_ENGINE picks the choice; anything else is a clear error', () => {
    expect(engineChoiceFrom({ AIRLOCK_ENGINE: 'Podman' })).toBe('podman');
    expect(engineChoiceFrom({}, 'docker')).toBe('docker');
    expect(() => engineChoiceFrom({ AIRLOCK_ENGINE: 'lxc' })).toThrow(/auto, docker or podman/);
  });

  it('identifies Podman from its version components, and rootless/runtimes from info', () => {
    const podman = identifyEngine(
      { Version: '4.3.1', ApiVersion: '1.41', Components: [{ Name: 'Podman Engine', Version: '4.3.1' }] } as never,
      { SecurityOptions: ['name=seccomp', 'name=rootless'], Runtimes: { crun: {}, runc: {} } },
    );
    expect(podman).toMatchObject({ kind: 'podman', version: '4.3.1', rootless: true, runtimes: ['crun', 'runc'] });
    const docker = identifyEngine({ Version: '20.10.24', ApiVersion: '1.41', Components: [{ Name: 'Engine', Version: '20.10.24' }] } as never, { Runtimes: { runc: {}, runsc: {} } });
    expect(docker).toMatchObject({ kind: 'docker', rootless: false, runtimes: ['runc', 'runsc'] });
  });
});
