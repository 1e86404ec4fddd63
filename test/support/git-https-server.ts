import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { RunCa } from '../../core/network/gateway/run-ca';
import { tarFile } from './run-fixture';

const exec = promisify(execFile);

/**
 * A token-protected HTTPS server on 127.0.0.1 for the egress gateway's tests: git's own
 * `git http-backend` (CGI) for `GIT_HOST`, and a one-package npm registry for `REGISTRY_HOST`. Both
 * names are made up; only the test resolver maps them to loopback. The server's certificate comes
 * from a test CA (`caPem`) that the gateway is told to trust explicitly.
 */
export const GIT_HOST = 'git.airlock.test';
export const REGISTRY_HOST = 'npm.airlock.test';
export const OTHER_HOST = 'elsewhere.airlock.test';
export const PRIVATE_PACKAGE = { name: 'airlock-private-pkg', version: '2.0.0' } as const;

export interface GitHttpsServer {
  port: number;
  caPem: string;
  /** The bare repository served as `/proj.git`. */
  bareRepo: string;
  /** Every request: host, method, url, and whether the right token came with it. */
  requests: Array<{ host: string; method: string; url: string; authorized: boolean }>;
  close(): Promise<void>;
}

export async function startGitHttpsServer(token: string): Promise<GitHttpsServer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-git-srv-'));
  const bareRepo = path.join(dir, 'proj.git');
  const seed = path.join(dir, 'seed');
  await mkdir(seed);
  const git = (cwd: string, ...args: string[]) => exec('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], { cwd });
  await git(dir, 'init', '--bare', bareRepo);
  await git(bareRepo, 'config', 'http.receivepack', 'true');
  await git(seed, 'init');
  await writeFile(path.join(seed, 'README.md'), 'seed\n');
  await git(seed, 'add', '.');
  await git(seed, 'commit', '-m', 'seed');
  await git(seed, 'push', bareRepo, 'HEAD:refs/heads/main');

  const ca = await RunCa.create('git-https-test-server');
  const { name, version } = PRIVATE_PACKAGE;
  const tgz = await promisify(gzip)(Buffer.concat([tarFile('package/package.json', Buffer.from(JSON.stringify({ name, version }))), Buffer.alloc(1024)]));
  const requests: GitHttpsServer['requests'] = [];
  const expectedBasic = (user: string) => `Basic ${Buffer.from(`${user}:${token}`).toString('base64')}`;

  const server = https.createServer({ key: ca.leafKeyPem, cert: await ca.leafFor(GIT_HOST), SNICallback: (host, cb) => void ca.leafFor(host).then((cert) => cb(null, tls.createSecureContext({ key: ca.leafKeyPem, cert }))) }, (req, res) => {
    const host = (req.headers.host ?? '').split(':')[0] ?? '';
    const auth = req.headers.authorization ?? '';
    const url = req.url ?? '/';
    if (host === REGISTRY_HOST) {
      const ok = auth === `Bearer ${token}`;
      requests.push({ host, method: req.method ?? '', url, authorized: ok });
      if (!ok) {
        res.writeHead(401, { 'Content-Type': 'application/json' }).end('{"error":"token required"}');
        return;
      }
      if (url === `/${name}`) {
        const tarball = `https://${REGISTRY_HOST}:${(server.address() as net.AddressInfo).port}/${name}/-/${name}-${version}.tgz`;
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ name, 'dist-tags': { latest: version }, versions: { [version]: { name, version, dist: { tarball } } } }));
      } else if (url === `/${name}/-/${name}-${version}.tgz`) {
        res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': tgz.length }).end(tgz);
      } else res.writeHead(404).end('{}');
      return;
    }
    const ok = auth.length > 0 && (auth === expectedBasic('x-access-token') || auth === `Bearer ${token}`);
    requests.push({ host, method: req.method ?? '', url, authorized: ok });
    if (host !== GIT_HOST) {
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end(`other host; you sent ${auth || 'no authorization'}\n`);
      return;
    }
    if (!ok) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="test"', 'Content-Type': 'text/plain' }).end('token required\n');
      return;
    }
    const q = url.indexOf('?');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        GIT_PROJECT_ROOT: dir,
        GIT_HTTP_EXPORT_ALL: '1',
        REMOTE_USER: 'agent',
        REMOTE_ADDR: '127.0.0.1',
        REQUEST_METHOD: req.method ?? 'GET',
        PATH_INFO: decodeURIComponent(q < 0 ? url : url.slice(0, q)),
        QUERY_STRING: q < 0 ? '' : url.slice(q + 1),
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let started = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (started) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      started = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        const k = line.slice(0, i).trim();
        const v = line.slice(i + 1).trim();
        if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0]);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    caPem: ca.certificatePem,
    bareRepo,
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
