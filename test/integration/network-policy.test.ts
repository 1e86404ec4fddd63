/**
 * Network policies and preview ports against real hardened Docker sandboxes.
 *
 * Traffic rules for this file: every byte stays on this machine. The npm preset test reaches a
 * fake registry on 127.0.0.1 under a made-up `.test` name, which only the egress proxy's injected
 * test resolver knows; isolation is proven from inside (interfaces, routes, a name under
 * `.invalid`, a refused loopback port).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DockerDriver } from '../../core/sandbox/docker/docker-driver';
import { DEFAULT_LIMITS } from '../../core/sandbox/driver';
import { ensureSandboxImage } from '../../core/sandbox/image';
import { SandboxManager, type Sandbox } from '../../core/sandbox/sandbox';
import type { EgressEvent } from '../../core/network/egress-proxy';
import { applyNetworkPolicy, type AppliedNetworkPolicy } from '../../core/network/network-policy';
import { derivePreset, type PresetContext } from '../../core/network/presets';
import { PreviewPorts } from '../../core/network/preview-ports';
import { requirePrerequisite } from '../support/prerequisites';
import { FAKE_PACKAGE, FAKE_REGISTRY_HOST, fakeRegistryProject, startFakeRegistry, type FakeRegistry } from '../support/run-fixture';
import { testEngine } from './sandbox-support';

const docker = await requirePrerequisite('docker');

function runId(tag: string): string {
  return `net-${tag}-${randomBytes(4).toString('hex')}`;
}

function httpGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent: false }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

function connectOutcome(port: number): Promise<'refused' | 'connected' | 'other'> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.on('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code === 'ECONNREFUSED' ? 'refused' : 'other'));
  });
}

/** Local addresses the host listens on for this TCP port, from /proc/net/tcp and tcp6 (hex `ADDR:PORT`). */
async function hostListenAddresses(port: number): Promise<string[]> {
  const out: string[] = [];
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(file, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      // st 0A = LISTEN
      if (cols[1]?.endsWith(`:${hexPort}`) && cols[3] === '0A') out.push(cols[1].split(':')[0] as string);
    }
  }
  return out;
}

describe.skipIf(!docker.ok)('network policies in a Docker sandbox', () => {
  const manager = new SandboxManager(new DockerDriver({ env: process.env, engine: testEngine() }));
  let image: string;
  let isolated: Sandbox;
  let policy: AppliedNetworkPolicy | undefined;
  const events: EgressEvent[] = [];
  let registry: FakeRegistry;
  let projectDir: string;
  let presetContext: PresetContext;

  beforeAll(async () => {
    ({ ref: image } = await ensureSandboxImage({ env: process.env, engine: testEngine() }));
    registry = await startFakeRegistry();
    // The preset reads this machine's npm config (here a user .npmrc naming the fake registry); an
    // inherited registry variable would outrank it. A project's own .npmrc would only be shown (issue 12).
    projectDir = await mkdtemp(path.join(os.tmpdir(), 'airlock-net-project-'));
    const { '.npmrc': npmrc, ...project } = fakeRegistryProject(registry);
    for (const [name, text] of Object.entries(project)) await writeFile(path.join(projectDir, name), text);
    const userConfig = path.join(projectDir, '..', `${path.basename(projectDir)}.npmrc`);
    await writeFile(userConfig, npmrc as string);
    const env: NodeJS.ProcessEnv = { ...process.env, npm_config_userconfig: userConfig };
    delete env.npm_config_registry;
    delete env.NPM_CONFIG_REGISTRY;
    presetContext = { env, cwd: projectDir };
    isolated = await manager.create({ runId: runId('allow'), image, limits: DEFAULT_LIMITS, network: 'none' });
    policy = await applyNetworkPolicy(
      isolated,
      { mode: 'allowlist', presets: ['npm'] },
      { sandboxNetwork: 'none', presetContext, proxyOptions: registry.egressProxy },
    );
    policy.onDidConnect((e) => events.push(e));
  });

  afterAll(async () => {
    await policy?.close();
    const proofs = await manager.shutdown();
    for (const p of proofs) expect(p.leftovers).toEqual([]);
    await registry?.close();
    if (projectDir) await rm(projectDir, { recursive: true, force: true });
  });

  it('allowlist: npm install of a small package succeeds through the npm preset, and is logged', async () => {
    const npmPreset = await derivePreset('npm', presetContext);
    expect(npmPreset.entries).toContainEqual({ host: FAKE_REGISTRY_HOST, ports: [registry.port] });
    expect(policy!.record).toMatchObject({ policy: 'allowlist', interfaces: [], defaultRoute: false });
    expect(policy!.record.presets?.[0]?.name).toBe('npm');
    expect(policy!.record.allow).toEqual(npmPreset.entries.map((e) => `${e.host}:${e.ports?.join(',')}`));

    // The sandbox has no .npmrc: name the registry the preset was derived from.
    const { name, version } = FAKE_PACKAGE;
    const r = await isolated.channel.run({
      argv: ['npm', 'install', name, '--registry', registry.url, '--prefix', '/tmp/np', '--cache', '/tmp/npm-cache', '--no-audit', '--no-fund', '--no-update-notifier'],
      env: policy!.env,
      timeoutMs: 150_000,
    });
    expect(r.stderr.toString() + r.stdout.toString()).not.toMatch(/ERR!/);
    expect(r.exitCode).toBe(0);
    const pkg = JSON.parse((await isolated.channel.readFile(`/tmp/np/node_modules/${name}/package.json`)).toString()) as { name: string; version: string };
    expect(pkg).toMatchObject({ name, version });
    const hostHeader = `${FAKE_REGISTRY_HOST}:${registry.port}`;
    expect(registry.requests).toContainEqual({ host: hostHeader, path: `/${name}` });
    expect(registry.requests).toContainEqual({ host: hostHeader, path: `/${name}/-/${name}-${version}.tgz` });

    // npm's plain-HTTP requests are logged with their bytes...
    await vi.waitFor(() => expect(events.some((e) => e.host === FAKE_REGISTRY_HOST && e.allowed && e.bytesDown > 0), 'an allowed registry event').toBe(true), { timeout: 20_000, interval: 100 });
    const e = events.find((x) => x.host === FAKE_REGISTRY_HOST && x.allowed) as EgressEvent;
    expect(e).toMatchObject({ runId: isolated.runId, method: 'GET', port: registry.port, address: '127.0.0.1' });

    // ...and so is a CONNECT tunnel to the same allowed host and port (what HTTPS clients use).
    const before = events.length;
    const tunnel = await isolated.channel.run({ argv: ['curl', '-sS', '--proxytunnel', `${registry.url}${name}`], env: policy!.env });
    expect(tunnel.exitCode).toBe(0);
    expect(JSON.parse(tunnel.stdout.toString())).toMatchObject({ name, 'dist-tags': { latest: version } });
    const connect = await vi.waitFor(() => {
      const hit = events.slice(before).find((x) => x.method === 'CONNECT' && x.host === FAKE_REGISTRY_HOST);
      if (!hit) throw new Error('no CONNECT event yet');
      return hit;
    }, { timeout: 20_000, interval: 100 });
    expect(connect).toMatchObject({ allowed: true, port: registry.port });
    expect(connect.bytesUp).toBeGreaterThan(0);
    expect(connect.bytesDown).toBeGreaterThan(0);
  }, 180_000);

  it('allowlist: curl to a name not on the list gets the proxy 403 text and an event', async () => {
    const before = events.length;
    const plain = await isolated.channel.run({ argv: ['curl', '-sS', 'http://pkg.not-on-list.test/'], env: policy!.env });
    expect(plain.stdout.toString()).toContain("airlock: pkg.not-on-list.test:80 is not on this run's allowlist — allow it from the run view or with");
    const tls = await isolated.channel.run({ argv: ['curl', '-sS', 'https://pkg.not-on-list.test/'], env: policy!.env });
    expect(tls.exitCode).not.toBe(0);
    expect(tls.stderr.toString()).toMatch(/403/);
    await vi.waitFor(() => expect(events.length, 'two denial events').toBeGreaterThanOrEqual(before + 2), { timeout: 20_000, interval: 100 });
    const denied = events.slice(before);
    expect(denied.map((d) => [d.host, d.port, d.method, d.allowed, d.reason])).toEqual([
      ['pkg.not-on-list.test', 80, 'GET', false, 'not on the allowlist'],
      ['pkg.not-on-list.test', 443, 'CONNECT', false, 'not on the allowlist'],
    ]);
  });

  it('a raw socket that ignores the proxy variables reaches nothing', async () => {
    const dev = (await isolated.channel.readFile('/proc/net/dev')).toString();
    const ifaces = dev.split('\n').slice(2).map((l) => l.split(':')[0]?.trim()).filter(Boolean);
    expect(ifaces).toEqual(['lo']);
    const routes = (await isolated.channel.readFile('/proc/net/route')).toString().trim().split('\n');
    expect(routes).toHaveLength(1); // header only
    const script = `
      const net = require('net');
      const tryConnect = (host, port) => new Promise((resolve) => {
        const s = net.connect({ host, port });
        s.setTimeout(5000, () => { s.destroy(); resolve('timeout'); });
        s.on('connect', () => { s.destroy(); resolve('connected'); });
        s.on('error', (e) => resolve(e.code));
      });
      (async () => {
        console.log(JSON.stringify({
          invalidName: await tryConnect('registry.example.invalid', 443),
          loopbackClosedPort: await tryConnect('127.0.0.1', 9),
        }));
      })();`;
    // No proxy variables in this environment: the process tries to go straight out.
    const r = await isolated.channel.run({ argv: ['node', '-e', script] });
    const out = JSON.parse(r.stdout.toString()) as { invalidName: string; loopbackClosedPort: string };
    expect(out.invalidName).not.toBe('connected');
    expect(['ENOTFOUND', 'EAI_AGAIN']).toContain(out.invalidName);
    expect(out.loopbackClosedPort).toBe('ECONNREFUSED');
    const curl = await isolated.channel.run({ argv: ['curl', '-sS', '--max-time', '5', 'http://registry.example.invalid/'] });
    expect(curl.exitCode).not.toBe(0);
  });

  it('preview: a server in the sandbox answers on a loopback-only host port, linked as localhost, gone after the run', async () => {
    const server = isolated.channel.spawn({ argv: ['python3', '-m', 'http.server', '8000', '--bind', '127.0.0.1', '--directory', '/tmp'] });
    const ports = new PreviewPorts(isolated.channel);
    try {
      const published = await ports.publish(8000);
      expect(published.url).toBe(`http://localhost:${published.hostPort}/`);
      // The in-sandbox http.server starts answering.
      const page = await vi.waitFor(async () => {
        const res = await httpGet(published.url);
        expect(res.status).toBe(200);
        return res;
      }, { timeout: 20_000, interval: 100 });
      expect(page.body).toContain('Directory listing for /');
      expect(page.body).toContain('np/');
      // Bound to loopback only: 0100007F (127.0.0.1), none on any/other addresses...
      // ...and on ::1 too where the host has it (a browser tries `localhost` there first).
      const v6Loopback = (await readFile('/proc/net/if_inet6', 'utf8').catch(() => '')).includes('00000000000000000000000000000001');
      expect(await hostListenAddresses(published.hostPort)).toEqual(v6Loopback ? ['0100007F', '00000000000000000000000001000000'] : ['0100007F']);
      await ports.closeAll();
      expect(await connectOutcome(published.hostPort)).toBe('refused');
      expect(await hostListenAddresses(published.hostPort)).toEqual([]);
    } finally {
      server.kill('SIGKILL');
      ports.dispose();
    }
  });

  it('preview ports close when the sandbox is wiped', async () => {
    const sandbox = await manager.create({ runId: runId('wipe'), image, limits: DEFAULT_LIMITS, network: 'none' });
    const server = sandbox.channel.spawn({ argv: ['python3', '-m', 'http.server', '8001', '--bind', '127.0.0.1', '--directory', '/tmp'] });
    const ports = new PreviewPorts(sandbox.channel);
    const published = await ports.publish(8001);
    await vi.waitFor(async () => expect((await httpGet(published.url)).status, 'the preview to answer').toBe(200), { timeout: 20_000, interval: 100 });
    server.kill();
    const proof = await sandbox.destroy();
    expect(proof.leftovers).toEqual([]);
    // The run ends: its ports are closed with it.
    await ports.closeAll();
    expect(await connectOutcome(published.hostPort)).toBe('refused');
  });

  it('open: works and is recorded as open (checked from inside: interfaces and a default route)', async () => {
    const open = await manager.create({ runId: runId('open'), image, limits: DEFAULT_LIMITS, network: 'open' });
    try {
      await expect(applyNetworkPolicy(open, { mode: 'allowlist' }, { presetContext: { env: process.env }, sandboxNetwork: 'open' })).rejects.toMatchObject({ kind: 'CONFLICT' });
      const applied = await applyNetworkPolicy(open, { mode: 'open' }, { presetContext: { env: process.env }, sandboxNetwork: 'open' });
      expect(applied.record.policy).toBe('open');
      expect(applied.record.warning).toMatch(/Open network/);
      expect(applied.record.interfaces.length).toBeGreaterThan(0);
      expect(applied.record.defaultRoute).toBe(true);
      expect(applied.env).toEqual({});
      await applied.close();
    } finally {
      expect((await open.destroy()).leftovers).toEqual([]);
    }
  });

  it('none on an open sandbox is refused, on an isolated one it sets nothing up', async () => {
    const none = await applyNetworkPolicy(isolated, { mode: 'none' }, { presetContext: { env: process.env }, sandboxNetwork: 'none' });
    expect(none.record).toEqual({ policy: 'none', allow: [], interfaces: [], defaultRoute: false });
    expect(none.env).toEqual({});
  });
});
