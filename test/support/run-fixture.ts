import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { StartRunInput } from '../../contracts/runs';
import { StartRunInput as StartRunSchema } from '../../contracts/runs';
import { createAirlockCore, type AirlockCore, type AirlockCoreOptions } from '../../core/app';
import { airlockHome } from '../../core/common/paths';
import { servicesFor } from '../../core/app-services';
import type { AirlockServices } from '../../core/api/services';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, type Resolver } from '../../core/network/egress-proxy';
import type { StoredRun } from '../../core/runs/run-record';
import { startFakeUpstream, type FakeUpstream, type ScriptedTurn } from '../fixtures/fake-upstream';

export const exec = promisify(execFile);

/** A distinctive provider key: the canary that must be found nowhere but in the upstream's view. */
export const CANARY_KEY = `sk-ant-canary-${'7e3f9a1c'.repeat(4)}-AIRLOCK`;

export interface RunFixture {
  home: string;
  upstream: FakeUpstream;
  core: AirlockCore;
  services: AirlockServices;
  /** Creates a small git project in a temp dir. */
  project(files?: Record<string, string>): Promise<string>;
  start(input: Partial<StartRunInput> & { projectDir: string; script: ScriptedTurn[] }): Promise<StoredRun>;
  /** The run's terminal log: its commands' output (kept there, not in the event log). */
  terminalLog(runId: string): Promise<string>;
  close(): Promise<void>;
}

/**
 * A real core (real Docker, real proxy, keys in memory or the real keychain under a test service
 * name) pointed at the scripted fake upstream for both wire formats.
 */
export async function createRunFixture(
  opts: {
    storage?: 'keychain' | 'session';
    egressProxy?: AirlockCoreOptions['egressProxyForTests'];
    env?: Record<string, string>;
    setupQuietMs?: number;
    /** Stand in for the app that answers MCP folder requests (announces itself, as the app and `airlock serve` do). */
    asksForMcp?: boolean;
  } = {},
): Promise<RunFixture> {
  const home = await mkdtemp(path.join(os.tmpdir(), 'airlock-home-'));
  const upstream = await startFakeUpstream({ expectedKey: CANARY_KEY });
  const env = {
    ...process.env,
    AIRLOCK_HOME: home,
    AIRLOCK_KEYCHAIN_SERVICE: `airlock-test-${process.pid}`,
    // VM kernel, initramfs and base disks are prepared once per machine, not per test home.
    AIRLOCK_VM_ASSETS: process.env.AIRLOCK_VM_ASSETS ?? path.join(airlockHome(process.env), 'vm'),
    ...opts.env,
  };
  const core = await createAirlockCore({ env, ...(opts.egressProxy ? { egressProxyForTests: opts.egressProxy } : {}), ...(opts.setupQuietMs ? { setupQuietMsForTests: opts.setupQuietMs } : {}) });
  await core.catalog.setBaseUrl('anthropic', upstream.url);
  await core.catalog.setBaseUrl('openai', `${upstream.url}/v1`);
  await core.vault.set('anthropic', CANARY_KEY, { storage: opts.storage ?? 'session' });
  await core.vault.set('openai', CANARY_KEY, { storage: opts.storage ?? 'session' });
  const services = servicesFor(core, undefined, { asksForMcp: opts.asksForMcp === true });
  const projects: string[] = [];
  return {
    home,
    upstream,
    core,
    services,
    async project(files = { 'README.md': '# demo\n', 'src/app.js': 'export function answer() {\n  return 1;\n}\n', 'notes.txt': 'one\ntwo\n' }) {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-project-'));
      projects.push(dir);
      for (const [name, content] of Object.entries(files)) {
        await mkdir(path.dirname(path.join(dir, name)), { recursive: true });
        await writeFile(path.join(dir, name), content);
      }
      await exec('git', ['init', '-q', '-b', 'main'], { cwd: dir });
      await exec('git', ['add', '-A'], { cwd: dir });
      await exec('git', ['-c', 'user.email=t@example.invalid', '-c', 'user.name=t', 'commit', '-qm', 'init'], { cwd: dir });
      return dir;
    },
    async start({ script, ...input }) {
      upstream.setScript(script);
      const args = StartRunSchema.parse({ task: 'do the thing', provider: 'anthropic', model: 'claude-sonnet-4-5', ...input });
      return core.runs.start(args);
    },
    terminalLog(runId) {
      return readFile(path.join(core.store.paths(runId).dir, 'terminal.log'), 'utf8');
    },
    async close() {
      await services.dispose();
      if ((opts.storage ?? 'session') === 'keychain') {
        await core.vault.remove('anthropic').catch(() => undefined);
        await core.vault.remove('openai').catch(() => undefined);
      }
      await upstream.close();
      for (const p of projects) await rm(p, { recursive: true, force: true });
      await rm(home, { recursive: true, force: true });
    },
  };
}

/** Every file under `dir` (recursive) that contains `needle`; fails loudly if nothing could be read. */
export async function filesContaining(dir: string, needle: string): Promise<string[]> {
  const hits: string[] = [];
  let read = 0;
  async function walk(d: string): Promise<void> {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (e.isFile()) {
        read++;
        if ((await readFile(p)).includes(needle)) hits.push(p);
      }
    }
  }
  await walk(dir);
  if (read === 0) throw new Error(`the search for the canary read no files under ${dir}`);
  return hits;
}

/** Containers and volumes the engine still has for a run (by label), asked through the engine's own CLI. */
export async function leftoversOf(runId: string, cli: 'docker' | 'podman' = 'docker'): Promise<string[]> {
  const containers = (await exec(cli, ['ps', '-aq', '--filter', `label=airlock.run=${runId}`])).stdout.trim();
  const volumes = (await exec(cli, ['volume', 'ls', '-q', '--filter', `label=airlock.run=${runId}`])).stdout.trim();
  return [...containers.split('\n'), ...volumes.split('\n')].filter(Boolean);
}

/** A stable digest of a project folder's contents (including .git), to prove it was not written. */
export async function treeDigest(dir: string): Promise<string> {
  const { stdout } = await exec('bash', ['-c', 'find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum'], { cwd: dir });
  return stdout.trim();
}

/** The fake registry's host name: `.test` is reserved (RFC 6761), so no real resolver answers it. */
export const FAKE_REGISTRY_HOST = 'registry.airlock.test';
/** Another name the test resolver maps to the same fake: reachable only if a policy allows it. */
export const FAKE_OTHER_HOST = 'elsewhere.airlock.test';
/** The one package the fake registry serves (a made-up name: nothing public is asked for). */
export const FAKE_PACKAGE = { name: 'airlock-fixture-pkg', version: '1.2.3' } as const;

export interface FakeRegistry {
  port: number;
  /** `http://registry.airlock.test:<port>/`, what a project `.npmrc` names. */
  url: string;
  /** Requests it answered: the Host header and the path. */
  requests: Array<{ host: string; path: string }>;
  /**
   * The egress proxy's test seam: resolves the fake names to 127.0.0.1 (and nothing else, so no
   * other name can ever be dialed) and lets the proxy connect to loopback.
   */
  egressProxy: NonNullable<AirlockCoreOptions['egressProxyForTests']>;
  close(): Promise<void>;
}

/** One ustar entry (a regular file): enough for npm to unpack a package tarball. */
export function tarFile(name: string, data: Buffer): Buffer {
  const header = Buffer.alloc(512);
  header.write(name, 0, 100);
  header.write('0000644\0', 100);
  header.write('0000000\0', 108);
  header.write('0000000\0', 116);
  header.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124);
  header.write('00000000000\0', 136);
  header.write('        ', 148);
  header.write('0', 156);
  header.write('ustar\0', 257);
  header.write('00', 263);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
  return Buffer.concat([header, data, Buffer.alloc((512 - (data.length % 512)) % 512)]);
}

/**
 * A minimal npm registry on 127.0.0.1 serving FAKE_PACKAGE (packument and tarball) over plain
 * HTTP, so sandbox network tests keep every byte on this machine.
 */
export async function startFakeRegistry(): Promise<FakeRegistry> {
  const { name, version } = FAKE_PACKAGE;
  const manifest = Buffer.from(JSON.stringify({ name, version, main: 'index.js' }));
  const tgz = await promisify(gzip)(Buffer.concat([tarFile('package/package.json', manifest), Buffer.alloc(1024)]));
  const tarballPath = `/${name}/-/${name}-${version}.tgz`;
  const requests: FakeRegistry['requests'] = [];
  const server = http.createServer((req, res) => {
    const host = req.headers.host ?? '';
    const urlPath = new URL(req.url ?? '/', 'http://fake').pathname;
    requests.push({ host, path: urlPath });
    if (urlPath === `/${name}`) {
      const packument = {
        name,
        'dist-tags': { latest: version },
        versions: {
          [version]: {
            name,
            version,
            dist: {
              tarball: `http://${host}${tarballPath}`,
              shasum: createHash('sha1').update(tgz).digest('hex'),
              integrity: `sha512-${createHash('sha512').update(tgz).digest('base64')}`,
            },
          },
        },
      };
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(packument));
    } else if (urlPath === tarballPath) {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' }).end(tgz);
    } else {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"not found"}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const resolve: Resolver = async (host) => {
    if (host === FAKE_REGISTRY_HOST || host === FAKE_OTHER_HOST) return ['127.0.0.1'];
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  };
  return {
    port,
    url: `http://${FAKE_REGISTRY_HOST}:${port}/`,
    requests,
    egressProxy: { resolve, [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true },
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** Files for a project whose npm registry is the fake one (package.json pins npm's project root there). */
export function fakeRegistryProject(registry: FakeRegistry): Record<string, string> {
  return {
    'README.md': '# demo\n',
    'package.json': `${JSON.stringify({ name: 'demo', version: '0.0.0', private: true }, null, 2)}\n`,
    '.npmrc': `registry=${registry.url}\n`,
  };
}
