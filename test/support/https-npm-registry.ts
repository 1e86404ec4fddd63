import { createHash } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { extract } from 'tar-stream';
import { AirlockError } from '../../contracts/errors';
import { engineBuild } from '../../core/environment/engine-build';
import { connectEngine } from '../../core/sandbox/docker/engine';
import { buildContextTar } from '../../core/sandbox/image';
import { ALLOW_LOOPBACK_TARGETS_FOR_TESTS, type Resolver } from '../../core/network/egress-proxy';
import type { AirlockCoreOptions } from '../../core/app';
import { exec } from './run-fixture';

/** The registry stand-in's name: `.test` is reserved (RFC 6761), so only the test resolver answers it. */
export const TLS_REGISTRY_HOST = 'npm-registry.airlock.test';

/** A test CA and a server certificate it signed for TLS_REGISTRY_HOST (what a company's re-signing proxy presents). */
export interface TestCa {
  caPem: string;
  serverKey: string;
  serverCert: string;
}

/** Makes a fresh test CA and a certificate for `host` signed by it, with openssl, in `dir`. */
export async function makeTestCa(dir: string, host: string): Promise<TestCa> {
  const o = (args: string[]) => exec('openssl', args, { cwd: dir });
  await o(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=Airlock test company CA', '-keyout', 'ca.key', '-out', 'ca.crt']);
  await o(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${host}`, '-keyout', 'server.key', '-out', 'server.csr']);
  await exec('sh', ['-c', `printf "subjectAltName=DNS:${host}\\n" > ext.cnf`], { cwd: dir });
  await o(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-extfile', 'ext.cnf', '-out', 'server.crt']);
  const [caPem, serverKey, serverCert] = (await Promise.all(['ca.crt', 'server.key', 'server.crt'].map((f) => readFile(path.join(dir, f), 'utf8')))) as [string, string, string];
  return { caPem, serverKey, serverCert };
}

/** The `package/package.json` of an npm tarball. */
async function manifestOf(tgz: Buffer): Promise<Record<string, unknown>> {
  const ex = extract();
  let found: Record<string, unknown> | undefined;
  ex.on('entry', (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: unknown) => chunks.push(c as Buffer));
    stream.on('end', () => {
      if (header.name === 'package/package.json') found = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      next();
    });
    stream.resume();
  });
  await new Promise<void>((resolve, reject) => {
    ex.on('finish', resolve);
    ex.on('error', reject);
    Readable.from(tgz).pipe(createGunzip()).on('error', reject).pipe(ex);
  });
  if (!found) throw new Error('the tarball has no package/package.json');
  return found;
}

export interface TlsRegistry {
  port: number;
  /** `https://npm-registry.airlock.test:<port>/`. */
  url: string;
  /** Requests it answered (path only). */
  requests: string[];
  /** The egress proxy's test seam: only TLS_REGISTRY_HOST resolves, to 127.0.0.1. */
  egressProxy: NonNullable<AirlockCoreOptions['egressProxyForTests']>;
  close(): Promise<void>;
}

/**
 * An npm registry on 127.0.0.1 over HTTPS with a certificate the test CA signed: the published
 * tarballs in `dir` (as `npm pack` wrote them), one version each, with packuments made from their
 * own package.json. It stands in for a registry reached through a company's TLS-intercepting proxy.
 */
export async function startTlsRegistry(dir: string, ca: TestCa): Promise<TlsRegistry> {
  const packages = new Map<string, { version: string; manifest: Record<string, unknown>; tgz: Buffer; file: string }>();
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.tgz'))) {
    const tgz = await readFile(path.join(dir, file));
    const manifest = await manifestOf(tgz);
    packages.set(String(manifest.name), { version: String(manifest.version), manifest, tgz, file });
  }
  const requests: string[] = [];
  const server = https.createServer({ key: ca.serverKey, cert: ca.serverCert }, (req, res) => {
    const urlPath = decodeURIComponent(new URL(req.url ?? '/', 'https://x').pathname);
    requests.push(urlPath);
    const host = req.headers.host ?? '';
    const tarball = /^\/([^/]+)\/-\/([^/]+\.tgz)$/.exec(urlPath);
    if (tarball) {
      const p = packages.get(tarball[1] ?? '');
      if (p && p.file === tarball[2]) return void res.writeHead(200, { 'Content-Type': 'application/octet-stream' }).end(p.tgz);
    }
    const p = packages.get(urlPath.slice(1));
    if (p) {
      const { name, version } = { name: urlPath.slice(1), version: p.version };
      const packument = {
        name,
        'dist-tags': { latest: version },
        versions: {
          [version]: {
            ...p.manifest,
            dist: {
              tarball: `https://${host}/${name}/-/${p.file}`,
              shasum: createHash('sha1').update(p.tgz).digest('hex'),
              integrity: `sha512-${createHash('sha512').update(p.tgz).digest('base64')}`,
            },
          },
        },
      };
      return void res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(packument));
    }
    res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"not found"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const resolve: Resolver = async (host) => {
    if (host === TLS_REGISTRY_HOST) return ['127.0.0.1'];
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  };
  return {
    port,
    url: `https://${TLS_REGISTRY_HOST}:${port}/`,
    requests,
    egressProxy: { resolve, [ALLOW_LOOPBACK_TARGETS_FOR_TESTS]: true },
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

/** Unpacks an npm tarball's `package/` into `dest` (as a project checked out from the published package). */
export async function unpackPackage(tgz: string, dest: string): Promise<void> {
  await exec('tar', ['xzf', tgz, '-C', dest, '--strip-components=1']);
}

/** The published tarballs the registry stand-in serves (test/fixtures/npm-concat-map). */
export const NPM_FIXTURE = fileURLToPath(new URL('../fixtures/npm-concat-map', import.meta.url));
/** A Debian devcontainer with Debian's Node and npm, as a project would write it. */
export const NPM_DEVCONTAINER_DOCKERFILE = `FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm ca-certificates && rm -rf /var/lib/apt/lists/*
`;
/** concat-map's line, and the injected bug: an array result pushed whole instead of spread. */
export const CONCAT_MAP_CORRECT = 'if (isArray(x)) res.push.apply(res, x);';
export const CONCAT_MAP_BUGGY = 'if (isArray(x)) res.push(x);';

/**
 * The files of concat-map@0.0.1 as published, with the bug injected and a devcontainer whose
 * `postCreateCommand` is `npm install` against `registryUrl`.
 */
export async function concatMapProject(registryUrl: string): Promise<Record<string, string>> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-npm-pkg-'));
  try {
    await unpackPackage(path.join(NPM_FIXTURE, 'concat-map-0.0.1.tgz'), dir);
    const files: Record<string, string> = {};
    const walk = async (rel: string): Promise<void> => {
      for (const e of await readdir(path.join(dir, rel), { withFileTypes: true })) {
        const p = path.join(rel, e.name);
        if (e.isDirectory()) await walk(p);
        else files[p] = await readFile(path.join(dir, p), 'utf8');
      }
    };
    await walk('');
    if (!files['index.js']?.includes(CONCAT_MAP_CORRECT)) throw new Error('concat-map-0.0.1.tgz is not the published package');
    files['index.js'] = files['index.js'].replace(CONCAT_MAP_CORRECT, CONCAT_MAP_BUGGY);
    files['.devcontainer/Dockerfile'] = NPM_DEVCONTAINER_DOCKERFILE;
    files['.devcontainer/devcontainer.json'] = JSON.stringify(
      { name: 'concat-map', build: { dockerfile: 'Dockerfile' }, containerEnv: { npm_config_registry: registryUrl }, postCreateCommand: 'npm install' },
      null,
      2,
    );
    return files;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Airlock's image as a machine whose host trusts `caPem` builds it (core/sandbox/image.ts puts the
 * host's extra CAs under /usr/local/share/ca-certificates/airlock-host; the derive step takes them
 * from there). The caller removes `tag`.
 */
export async function airlockImageWithCa(base: string, caPem: string, tag: string, label: string): Promise<string> {
  const engine = await connectEngine(process.env);
  await engineBuild(
    engine.docker,
    {
      tag,
      context: await buildContextTar(Buffer.from(`FROM ${base}\nUSER 0:0\nCOPY payload/company-ca.crt /usr/local/share/ca-certificates/airlock-host/company-ca.crt\nUSER 1000:1000\n`), { files: { 'company-ca.crt': Buffer.from(caPem) }, hash: '' }),
      labels: { 'airlock.test': label },
      what: 'a runtime image with a test CA',
      emit: () => undefined,
    },
    (fail) => new AirlockError('IMAGE_BUILD_FAILED', `${fail.error}\n${fail.tail}`),
  );
  return tag;
}
