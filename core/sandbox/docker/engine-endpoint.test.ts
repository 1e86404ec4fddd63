import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEngine, engineChoiceFrom, identifyEngine, parseSshHost, podmanSockets, resolveEngineEndpoint, validateEngineSelection, type EngineEndpoint } from './engine-endpoint';
import { sshFailureCode } from './ssh-dial';

let dir: string;
let certs: string;
const endpoints: EngineEndpoint[] = [];
async function resolve(env: NodeJS.ProcessEnv, selection = {}): Promise<EngineEndpoint> {
  const e = await resolveEngineEndpoint({ PATH: process.env.PATH, HOME: dir, ...env }, selection);
  endpoints.push(e);
  return e;
}

/** Writes a Docker context the way `docker context create` stores it. */
async function context(name: string, host: string, tls?: { skip?: boolean }): Promise<void> {
  const id = createHash('sha256').update(name).digest('hex');
  const meta = path.join(dir, '.docker', 'contexts', 'meta', id);
  await mkdir(meta, { recursive: true });
  await writeFile(path.join(meta, 'meta.json'), JSON.stringify({ Name: name, Metadata: {}, Endpoints: { docker: { Host: host, SkipTLSVerify: tls?.skip ?? false } } }));
  if (tls) {
    const t = path.join(dir, '.docker', 'contexts', 'tls', id, 'docker');
    await mkdir(t, { recursive: true });
    for (const f of ['ca.pem', 'cert.pem', 'key.pem']) await writeFile(path.join(t, f), `context ${f}`);
  }
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-endpoint-'));
  certs = path.join(dir, 'certs');
  await mkdir(certs);
  for (const f of ['ca.pem', 'cert.pem', 'key.pem']) await writeFile(path.join(certs, f), `env ${f}`);
});
afterAll(async () => {
  for (const e of endpoints) e.options.agent?.destroy();
  await rm(dir, { recursive: true, force: true });
});

describe('engine endpoint resolution', () => {
  it('reads DOCKER_HOST: unix, npipe, tcp on loopback, TLS with DOCKER_CERT_PATH, ssh', async () => {
    const unix = await resolve({ DOCKER_HOST: 'unix:///run/user/1000/podman/podman.sock' });
    expect(unix.options).toMatchObject({ socketPath: '/run/user/1000/podman/podman.sock', host: undefined });
    expect(unix.description).toMatchObject({ kind: 'podman', transport: 'unix', remote: false, source: 'DOCKER_HOST' });
    expect((await resolve({ DOCKER_HOST: 'npipe:////./pipe/docker_engine' })).options.socketPath).toBe('//./pipe/docker_engine');

    const plain = await resolve({ DOCKER_HOST: 'tcp://127.0.0.1:2375' });
    expect(plain.options).toMatchObject({ host: '127.0.0.1', port: 2375, protocol: 'http' });
    expect(plain.description).toMatchObject({ transport: 'tcp', remote: true });

    const tls = await resolve({ DOCKER_HOST: 'tcp://build-box:2376', DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: certs });
    expect(tls.options).toMatchObject({ host: 'build-box', port: 2376, protocol: 'https' });
    expect(String(tls.options.ca)).toBe('env ca.pem');
    expect(String(tls.options.key)).toBe('env key.pem');
    expect(describeEngine(tls.description, '28.2')).toBe('Docker 28.2 over TLS at build-box:2376');

    const ssh = await resolve({ DOCKER_HOST: 'ssh://me@build-box:2222' });
    expect(ssh.display).toBe('ssh://me@build-box:2222');
    expect(ssh.options.protocol).toBe('http');
    expect(ssh.options.agent).toBeDefined();
    expect(describeEngine(ssh.description, '20.10')).toBe('Docker 20.10 over SSH at build-box');
  });

  it('refuses a remote engine over plain TCP or unverified TLS unless allowed explicitly, and says why', async () => {
    await expect(resolve({ DOCKER_HOST: 'tcp://10.1.2.3:2375' })).rejects.toThrow(/plain, unencrypted TCP.*ssh:\/\/user@10\.1\.2\.3.*engineAllowInsecure/);
    await expect(resolve({ DOCKER_HOST: 'tcp://build-box:2376', DOCKER_TLS: '1', DOCKER_CERT_PATH: certs })).rejects.toThrow(/without checking its certificate/);
    expect((await resolve({ DOCKER_HOST: 'tcp://10.1.2.3:2375' }, { allowInsecure: true })).description.transport).toBe('tcp');
    // Missing TLS files: what is missing, and where to put them.
    await expect(resolve({ DOCKER_HOST: 'tcp://build-box:2376', DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: path.join(dir, 'none') })).rejects.toThrow(/ca\.pem, cert\.pem and key\.pem could not be read/);
  });

  it('the engineHost setting: an address or a context name, anything else refused in plain words', async () => {
    const env = { PATH: process.env.PATH, HOME: dir };
    for (const bad of ['ftp://build-box', 'tcp://build-box', 'http://x', 'build box', '-oProxyCommand=x', 'box:2376']) {
      await expect(validateEngineSelection(env, { host: bad }), bad).rejects.toMatchObject({ kind: 'INVALID_INPUT', message: expect.stringMatching(/is not an engine address Airlock understands.*unix:\/\/\/var\/run\/docker\.sock.*docker context ls/) });
    }
    expect((await validateEngineSelection(env, { host: 'unix:///var/run/docker.sock' })).description).toMatchObject({ transport: 'unix', source: 'setting', remote: false });
    // An ssh:// check holds no connection afterwards; the description is what the UI shows.
    expect((await validateEngineSelection(env, { host: 'ssh://me@build-box' })).description).toMatchObject({ transport: 'ssh', location: 'build-box', remote: true });
    await expect(validateEngineSelection(env, { host: 'tcp://build-box:2375' })).rejects.toThrow(/plain, unencrypted TCP/);
    expect((await validateEngineSelection(env, { host: 'tcp://build-box:2375', allowInsecure: true })).description.transport).toBe('tcp');
    await expect(validateEngineSelection(env, { host: 'no-such-context' })).rejects.toThrow(/context 'no-such-context' was not found/);
  });

  it('refuses malformed or option-like ssh addresses', async () => {
    expect(() => parseSshHost('ssh://-oProxyCommand=x')).toThrow(/ssh:\/\/user@host/);
    expect(() => parseSshHost('ssh://me@box/path')).toThrow(/ssh:\/\/user@host/);
    expect(parseSshHost('ssh://me@box:2200')).toEqual({ host: 'box', user: 'me', port: 2200 });
    await expect(resolve({ DOCKER_HOST: 'ftp://box' })).rejects.toThrow(/not understood/);
  });

  // Issue 22, item 6: user and host reach the user's ssh config (%u, %h), which older OpenSSH
  // expands into a shell command line.
  it('refuses shell metacharacters in an ssh:// user or host, percent-encoded or not', async () => {
    for (const address of [
      'ssh://me;id@box', 'ssh://me%3Bid@box', 'ssh://$(id)@box', 'ssh://me%60id%60@box', "ssh://me'x@box", 'ssh://me%20x@box', 'ssh://me%7Cx@box', 'ssh://-me@box',
      'ssh://me@box%3Bid', 'ssh://me@box$(id)', 'ssh://me@b%26x', 'ssh://me@b%0Ax', 'ssh://me@%2Dbox', 'ssh://me%00@box',
    ]) {
      expect(() => parseSshHost(address), address).toThrow(/not allowed in an ssh:\/\/ engine's user or host|ssh:\/\/user@host/);
    }
    await expect(resolve({ DOCKER_HOST: 'ssh://me%3Bid@box' })).rejects.toThrow(/ssh config/);
    expect(parseSshHost('ssh://deploy_bot@build-box.corp.example:22')).toEqual({ host: 'build-box.corp.example', user: 'deploy_bot', port: 22 });
    expect(parseSshHost('ssh://me@[::1]:2222')).toEqual({ host: '::1', user: 'me', port: 2222 });
    expect(parseSshHost('ssh://my.alias')).toEqual({ host: 'my.alias' });
  });

  it('counts only literal loopback addresses and localhost as loopback for plain TCP, never *.localhost', async () => {
    for (const ok of ['tcp://127.0.0.1:2375', 'tcp://127.8.9.10:2375', 'tcp://localhost:2375', 'tcp://LOCALHOST:2375', 'tcp://[::1]:2375']) {
      await expect(resolve({ DOCKER_HOST: ok }), ok).resolves.toMatchObject({ description: { transport: 'tcp' } });
    }
    for (const bad of ['tcp://engine.localhost:2375', 'tcp://localhost.attacker.invalid:2375', 'tcp://127.0.0.1.nip.invalid:2375']) {
      await expect(resolve({ DOCKER_HOST: bad }), bad).rejects.toThrow(/plain, unencrypted TCP/);
    }
  });

  it('uses the Docker context: DOCKER_CONTEXT, else currentContext in config.json, with its TLS files', async () => {
    await context('build', 'tcp://build-box:2376', {});
    await context('box-ssh', 'ssh://me@box');
    await context('insecure', 'tcp://build-box:2376', { skip: true });
    await mkdir(path.join(dir, '.docker'), { recursive: true });
    await writeFile(path.join(dir, '.docker', 'config.json'), JSON.stringify({ currentContext: 'build' }));
    const current = await resolve({});
    expect(current.description).toMatchObject({ transport: 'tls', context: 'build', source: 'docker context' });
    expect(String(current.options.cert)).toBe('context cert.pem');
    const named = await resolve({ DOCKER_CONTEXT: 'box-ssh' });
    expect(named.description).toMatchObject({ transport: 'ssh', location: 'box', context: 'box-ssh', source: 'DOCKER_CONTEXT' });
    await expect(resolve({ DOCKER_CONTEXT: 'insecure' })).rejects.toThrow(/without checking its certificate/);
    await expect(resolve({ DOCKER_CONTEXT: 'nope' })).rejects.toThrow(/context 'nope' was not found.*docker context ls/);
    // DOCKER_HOST wins over the context, the explicit choice over both.
    expect((await resolve({ DOCKER_HOST: 'unix:///x.sock' })).display).toBe('unix:///x.sock');
    const chosen = await resolve({ DOCKER_HOST: 'unix:///x.sock' }, { host: 'box-ssh' });
    expect(chosen.description).toMatchObject({ transport: 'ssh', source: 'setting' });
    expect((await resolve({ DOCKER_HOST: 'unix:///x.sock' }, { host: 'ssh://other' })).description.location).toBe('other');
  });

  it('names why ssh failed from its own words', () => {
    expect(sshFailureCode('Host key verification failed.', 255)).toBe('EHOSTKEY');
    expect(sshFailureCode('me@box: Permission denied (publickey).', 255)).toBe('EAUTH');
    expect(sshFailureCode('ssh: connect to host box port 22: Connection refused', 255)).toBe('ECONNREFUSED');
    expect(sshFailureCode('bash: line 1: docker: command not found', 127)).toBe('ENODOCKER');
    expect(sshFailureCode('Timeout, server box not responding.', 255)).toBe('ETIMEDOUT');
    expect(sshFailureCode('mux_client_request_session: session request failed: Session open refused by peer', 255)).toBe('ESSHSESSIONS');
  });
});

describe('engine endpoint: Docker or Podman', () => {
  let runtimeDir: string;
  beforeAll(async () => {
    runtimeDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-xdg-'));
    await mkdir(path.join(runtimeDir, 'podman'));
    // Existence is all discovery checks; a plain file stands in for the socket.
    await writeFile(path.join(runtimeDir, 'podman', 'podman.sock'), '');
  });
  afterAll(() => rm(runtimeDir, { recursive: true, force: true }));

  it('DOCKER_HOST wins under auto, CONTAINER_HOST next, and both describe where they came from', async () => {
    const d = await resolveEngineEndpoint({ DOCKER_HOST: 'unix:///nowhere/docker.sock', CONTAINER_HOST: 'unix:///nowhere/podman.sock' }, { choice: 'auto' });
    expect(d.description).toMatchObject({ kind: 'docker', location: '/nowhere/docker.sock', source: 'DOCKER_HOST' });
    const c = await resolveEngineEndpoint({ CONTAINER_HOST: 'unix:///nowhere/podman.sock' }, { choice: 'auto' });
    expect(c.options.socketPath).toBe('/nowhere/podman.sock');
    expect(c.description).toMatchObject({ kind: 'podman', source: 'CONTAINER_HOST' });
  });

  it('a DOCKER_HOST naming podman.sock is described as Podman (rootless under /run/user)', async () => {
    expect((await resolveEngineEndpoint({ DOCKER_HOST: 'unix:///run/user/1000/podman/podman.sock' })).description).toMatchObject({ kind: 'podman', rootless: true });
    expect((await resolveEngineEndpoint({ DOCKER_HOST: 'unix:///run/podman/podman.sock' })).description).toMatchObject({ kind: 'podman', rootless: false });
  });

  it('the podman choice ignores a Docker DOCKER_HOST and finds the rootless socket under XDG_RUNTIME_DIR', async () => {
    const e = await resolveEngineEndpoint({ DOCKER_HOST: 'unix:///var/run/docker.sock', XDG_RUNTIME_DIR: runtimeDir }, { choice: 'podman' });
    if (process.getuid?.() === 0 && e.description.rootless === false) {
      // root with a running system service: the rootful socket comes first.
      expect(e.options.socketPath).toBe('/run/podman/podman.sock');
    } else {
      expect(e.options.socketPath).toBe(path.join(runtimeDir, 'podman', 'podman.sock'));
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
