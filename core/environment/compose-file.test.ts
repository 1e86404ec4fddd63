import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AirlockError } from '../../contracts/errors';
import { podmanSidecarAddresses, ROOT_SIDECAR_CAPS, sidecarContainerConfig, sidecarNetworkConfig, sidecarNetworkName } from './compose-sidecars';
import { loadDevcontainer } from './devcontainer-config';
import { seccompSecurityOpt } from '../sandbox/docker/seccomp-profile';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

async function project(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'airlock-compose-'));
  dirs.push(dir);
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), content);
  }
  return dir;
}

async function failure(p: Promise<unknown>): Promise<AirlockError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AirlockError);
  return err as AirlockError;
}

const DEVCONTAINER = JSON.stringify({ dockerComposeFile: ['compose.yml', 'compose.override.yml'], service: 'app' });

describe('compose devcontainers (docs/architecture.md §16)', () => {
  it('reads services from several files (later ones override), merge keys, builds inside the project, and lists what is not applied', async () => {
    const dir = await project({
      '.devcontainer/devcontainer.json': DEVCONTAINER,
      '.devcontainer/compose.yml': `x-common: &common
  environment: { A: "1" }
services:
  app:
    build: { context: .., dockerfile: .devcontainer/app.Dockerfile, args: { V: 2 } }
    volumes: ["..:/workspaces/app"]
  db:
    <<: *common
    image: postgres:16
    ports: ["5432:5432"]
    cap_add: [NET_ADMIN]
    network_mode: host
    env_file: .env
    command: postgres -c fsync=off
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U postgres"]
      interval: 1s
      timeout: 1m30s
      retries: 5
    tmpfs: [/var/run/postgresql]
    environment:
      PASSWORD: "\${DB_PASSWORD:-devpass}"
      HOME_OF_HOST: "$HOME"
      LIST_FORM: "$$literal"
`,
      '.devcontainer/compose.override.yml': 'services:\n  db:\n    user: postgres\n    privileged: true\n',
      '.devcontainer/app.Dockerfile': 'FROM debian:bookworm-slim\n',
    });
    const env = await loadDevcontainer(dir, '.devcontainer/devcontainer.json', { env: { DB_PASSWORD: 'host-secret', HOME: '/root' } });
    if (env.source.kind !== 'compose') throw new Error('not compose');
    expect(env.source.workspace.source).toEqual({ kind: 'build', context: '', dockerfile: '.devcontainer/app.Dockerfile', args: { V: '2' } });
    const [db] = env.source.sidecars;
    expect(db?.name).toBe('db');
    expect(db?.source).toEqual({ kind: 'image', image: 'postgres:16' });
    // The override's key wins over the merged block; host variables are never read.
    expect(db?.environment).toEqual({ PASSWORD: 'devpass', HOME_OF_HOST: '', LIST_FORM: '$literal' });
    expect(db?.user).toBe('postgres');
    expect(db?.command).toEqual(['/bin/sh', '-c', 'postgres -c fsync=off']);
    expect(db?.healthcheck).toEqual({ test: ['CMD-SHELL', 'pg_isready -U postgres'], intervalMs: 1000, timeoutMs: 90_000, retries: 5, startPeriodMs: 0 });
    expect(db?.tmpfs).toEqual(['/var/run/postgresql']);
    const fields = env.notApplied.map((n) => n.field);
    expect(fields).toEqual(
      expect.arrayContaining(['compose ${DB_PASSWORD}', 'compose ${HOME}', 'services.app.volumes', 'services.db.ports', 'services.db.cap_add', 'services.db.network_mode', 'services.db.env_file', 'services.db.privileged']),
    );
    expect(env.notApplied.find((n) => n.field === 'services.db.network_mode')?.reason).toMatch(/no route out/);
    expect(JSON.stringify(env)).not.toContain('host-secret');
  });

  it('hashes the compose files and the Dockerfiles they build, so trust is asked again when one changes', async () => {
    const files = {
      '.devcontainer/devcontainer.json': JSON.stringify({ dockerComposeFile: 'compose.yml', service: 'app' }),
      '.devcontainer/compose.yml': 'services:\n  app: { image: "debian:bookworm-slim" }\n  db: { build: . }\n',
      '.devcontainer/Dockerfile': 'FROM debian:bookworm-slim\n',
    };
    const a = await loadDevcontainer(await project(files), '.devcontainer/devcontainer.json', { env: process.env });
    const b = await loadDevcontainer(await project({ ...files, '.devcontainer/Dockerfile': 'FROM debian:bookworm-slim\nRUN true\n' }), '.devcontainer/devcontainer.json', { env: process.env });
    expect(a.contentHash).not.toBe(b.contentHash);
  });

  it('refuses bad compose input with the file and what to do', async () => {
    const bad = async (compose: string, dc = JSON.stringify({ dockerComposeFile: 'c.yml', service: 'app' })) =>
      (await failure(loadDevcontainer(await project({ '.devcontainer.json': dc, 'c.yml': compose }), '.devcontainer.json', { env: process.env }))).message;
    expect(await bad('services:\n  app: [unclosed\n')).toMatch(/^c\.yml:\d+:\d+: .*Fix the compose file/);
    expect(await bad('services:\n  db: { image: x }\n')).toMatch(/service 'app' is not in c\.yml \(it has db\)/);
    expect(await bad('services:\n  app: { image: x }\n', JSON.stringify({ dockerComposeFile: 'c.yml', service: 'app', runServices: ['cache'] }))).toMatch(/runServices names 'cache'/);
    expect(await bad('services:\n  app: { build: { context: ../.. } }\n')).toMatch(/points outside the project/);
    expect(await bad('services:\n  app: { build: . }\n')).toMatch(/build\.dockerfile 'Dockerfile' does not exist/);
    expect(await bad('services:\n  app: { environment: [A=1] }\n')).toMatch(/services\.app names no image or build/);
  });
});

describe('sidecar containers', () => {
  const svc = { name: 'db', source: { kind: 'image' as const, image: 'postgres:16' }, environment: { A: '1' }, tmpfs: ['/var/run/postgresql'], writableRoot: false };

  it('are hardened: no capabilities (a root entrypoint keeps only the few to drop to its own user), no-new-privileges, read-only root, limits, only the run network', () => {
    const c = sidecarContainerConfig('r1', { service: { ...svc, user: 'postgres' }, image: 'postgres:16', imageVolumes: ['/var/lib/postgresql/data'] });
    const hc = c.HostConfig ?? {};
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd).toEqual([]);
    // Airlock's seccomp profile, as for the sandbox (docs/architecture.md §2.3).
    expect(hc.SecurityOpt).toEqual(['no-new-privileges', seccompSecurityOpt([])]);
    expect(hc.ReadonlyRootfs).toBe(true);
    expect(hc.Privileged).toBe(false);
    expect(hc.Binds).toEqual([]);
    expect(hc.Mounts).toEqual([]);
    expect(hc.PortBindings).toEqual({});
    expect(Object.keys(hc.Tmpfs ?? {})).toEqual(['/tmp', '/var/lib/postgresql/data', '/var/run/postgresql']);
    expect(hc.NetworkMode).toBe(sidecarNetworkName('r1'));
    expect(c.NetworkingConfig?.EndpointsConfig?.[sidecarNetworkName('r1')]?.Aliases).toEqual(['db']);
    expect(hc.Memory).toBeGreaterThan(0);
    expect(hc.PidsLimit).toBeGreaterThan(0);
    expect(c.Labels).toMatchObject({ 'airlock.run': 'r1', 'airlock.kind': 'sidecar', 'airlock.sidecar': 'db' });

    const root = sidecarContainerConfig('r1', { service: svc, image: 'postgres:16', imageVolumes: [] });
    expect(root.HostConfig?.CapAdd).toEqual(ROOT_SIDECAR_CAPS);
    expect(root.HostConfig?.CapAdd).not.toContain('NET_ADMIN');
    const writable = sidecarContainerConfig('r1', { service: { ...svc, writableRoot: true }, image: 'x', imageVolumes: [], imageUser: '999' });
    expect(writable.HostConfig?.ReadonlyRootfs).toBe(false);
    expect(writable.HostConfig?.CapAdd).toEqual([]);
  });

  it('share an internal network with no host address on its bridge', () => {
    const n = sidecarNetworkConfig('r1');
    expect(n.Internal).toBe(true);
    expect(n.Options?.['com.docker.network.bridge.inhibit_ipv4']).toBe('true');
    expect(n.Labels).toMatchObject({ 'airlock.run': 'r1', 'airlock.kind': 'network' });
  });

  it('on Podman: no Docker-only network options; fixed addresses from the top of the subnet and every name in /etc/hosts; bounded ulimits', () => {
    expect(sidecarNetworkConfig('r1', { engine: 'podman' }).Options).toEqual({});
    expect(sidecarNetworkConfig('r1', { engine: 'podman' }).Internal).toBe(true);
    const plan = podmanSidecarAddresses({ Internal: true, IPAM: { Config: [{ Subnet: '10.89.3.0/24', Gateway: '<nil>' }] } }, ['db', 'cache']);
    expect(plan).toEqual({ addresses: { db: '10.89.3.254', cache: '10.89.3.253' }, extraHosts: ['db:10.89.3.254', 'cache:10.89.3.253'] });
    expect(podmanSidecarAddresses({ Internal: true, IPAM: { Config: [{ Subnet: '10.90.0.0/16' }] } }, ['db']).addresses).toEqual({ db: '10.90.255.254' });
    const c = sidecarContainerConfig('r1', { service: { ...svc, user: 'postgres' }, image: 'postgres:16', imageVolumes: [] }, { engine: 'podman' }, { name: sidecarNetworkName('r1'), ...plan });
    expect(c.NetworkingConfig?.EndpointsConfig?.[sidecarNetworkName('r1')]).toEqual({ Aliases: ['db'], IPAMConfig: { IPv4Address: '10.89.3.254' } });
    expect(c.HostConfig?.ExtraHosts).toEqual(['db:10.89.3.254', 'cache:10.89.3.253']);
    expect(c.HostConfig?.Ulimits?.map((u) => u.Name)).toEqual(['core', 'nofile', 'nproc']);
    // Docker's own resolver answers names there: no fixed address, no hosts entries.
    const onDocker = sidecarContainerConfig('r1', { service: svc, image: 'x', imageVolumes: [] });
    expect(onDocker.HostConfig?.ExtraHosts).toBeUndefined();
    expect(onDocker.NetworkingConfig?.EndpointsConfig?.[sidecarNetworkName('r1')]).toEqual({ Aliases: ['db'] });
  });

  it('on Podman: refuses a network with a host address on its bridge, one that is not internal, or one with no room', () => {
    expect(() => podmanSidecarAddresses({ Internal: true, IPAM: { Config: [{ Subnet: '10.89.0.0/24', Gateway: '10.89.0.1' }] } }, ['db'])).toThrow(
      /an address of the host on its bridge \(10\.89\.0\.1, as its netavark backend does[\s\S]*Run compose devcontainers on Docker or on Podman with its CNI network backend/,
    );
    expect(() => podmanSidecarAddresses({ Internal: false, IPAM: { Config: [{ Subnet: '10.89.0.0/24' }] } }, ['db'])).toThrow(/with a route out/);
    expect(() => podmanSidecarAddresses({ Internal: true, IPAM: { Config: [{ Subnet: '10.89.0.0/29' }] } }, ['db'])).toThrow(/has no room for 1 compose services/);
    expect(() => podmanSidecarAddresses({ Internal: true, IPAM: { Config: [] } }, ['db'])).toThrow(/subnet 'none'/);
  });
});
