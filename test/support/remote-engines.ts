import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile, chmod } from 'node:fs/promises';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { exec } from './run-fixture';

/**
 * Remote engines on loopback for tests, in front of the one local engine (which is never
 * reconfigured): a TLS endpoint with its own CA and client certificate, and an sshd whose sessions
 * run `docker system dial-stdio`. Each lives in its own temp dir and is stopped by `close()`.
 */

const ENGINE_SOCKET = '/var/run/docker.sock';

export interface TlsEngine {
  port: number;
  /** DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH for a client of this endpoint. */
  env: Record<string, string>;
  /** Drops the link: stops listening and cuts every open connection (as a network failure would). */
  kill(): void;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

async function openssl(args: string[], cwd: string): Promise<void> {
  await exec('openssl', args, { cwd });
}

/** A CA, a server certificate for 127.0.0.1 and a client certificate, as `docker` expects them. */
async function makeCertificates(dir: string): Promise<{ server: { key: Buffer; cert: Buffer; ca: Buffer }; clientDir: string }> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  await openssl(['req', '-x509', ...ec, '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=airlock-test-ca'], dir);
  for (const [name, cn, ext] of [
    ['server', '127.0.0.1', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n'],
    ['client', 'airlock-test-client', 'extendedKeyUsage=clientAuth\n'],
  ] as const) {
    await openssl(['req', ...ec, '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`], dir);
    await writeFile(path.join(dir, `${name}.ext`), ext);
    await openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-out', `${name}-cert.pem`, '-days', '2', '-extfile', `${name}.ext`], dir);
  }
  const clientDir = path.join(dir, 'client');
  await mkdir(clientDir);
  await writeFile(path.join(clientDir, 'ca.pem'), await readFile(path.join(dir, 'ca.pem')));
  await writeFile(path.join(clientDir, 'cert.pem'), await readFile(path.join(dir, 'client-cert.pem')));
  await writeFile(path.join(clientDir, 'key.pem'), await readFile(path.join(dir, 'client-key.pem')));
  const [key, cert, ca] = await Promise.all(['server-key.pem', 'server-cert.pem', 'ca.pem'].map((f) => readFile(path.join(dir, f))));
  return { server: { key: key as Buffer, cert: cert as Buffer, ca: ca as Buffer }, clientDir };
}

/** A TLS endpoint on 127.0.0.1 that requires a client certificate and forwards to the local engine's socket. */
export async function startTlsEngine(): Promise<TlsEngine> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-tls-engine-'));
  const { server: creds, clientDir } = await makeCertificates(dir);
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  };
  const makeServer = () =>
    tls.createServer({ ...creds, requestCert: true, rejectUnauthorized: true, allowHalfOpen: true }, (client) => {
      const engine = net.connect({ path: ENGINE_SOCKET, allowHalfOpen: true });
      track(client);
      track(engine);
      client.pipe(engine);
      engine.pipe(client);
      client.on('error', () => engine.destroy());
      engine.on('error', () => client.destroy());
      client.on('close', () => engine.destroy());
      engine.on('close', () => client.destroy());
    });
  let server = makeServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    env: { DOCKER_HOST: `tcp://127.0.0.1:${port}`, DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: clientDir },
    kill() {
      server.close();
      for (const s of sockets) s.destroy();
    },
    async restore() {
      server = makeServer();
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, '127.0.0.1', resolve);
      });
    },
    async close() {
      server.close();
      for (const s of sockets) s.destroy();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface SshEngine {
  port: number;
  /** DOCKER_HOST and the ssh client config (key, known host) for a client of this sshd. */
  env: Record<string, string>;
  /** The same, but ssh does not know the host key (and shares no connection with `env`'s). */
  unknownHostEnv: Record<string, string>;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address() as AddressInfo;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/**
 * An sshd on a loopback port with a throwaway host key and one authorised client key (root), its
 * own config, pid file and keys in a temp dir. The client side is an ssh config file with the
 * known host: nothing of the machine's own ssh setup is used or changed.
 */
export async function startSshEngine(): Promise<SshEngine> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'airlock-sshd-'));
  await chmod(dir, 0o700);
  // sshd's privilege-separation directory (the package's service would make it).
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 });
  for (const key of ['host_key', 'client_key']) await exec('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `airlock-test-${key}`, '-f', path.join(dir, key)]);
  await writeFile(path.join(dir, 'authorized_keys'), await readFile(path.join(dir, 'client_key.pub')), { mode: 0o600 });
  const port = await freePort();
  const config = path.join(dir, 'sshd_config');
  await writeFile(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${path.join(dir, 'host_key')}`,
      `PidFile ${path.join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`,
      'PermitRootLogin prohibit-password',
      'AllowUsers root',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'StrictModes no',
      'LogLevel ERROR',
      '',
    ].join('\n'),
  );
  const hostKey = (await readFile(path.join(dir, 'host_key.pub'), 'utf8')).trim().split(' ').slice(0, 2).join(' ');
  await writeFile(path.join(dir, 'known_hosts'), `[127.0.0.1]:${port} ${hostKey}\n`);
  const clientConfig = path.join(dir, 'ssh_config');
  await writeFile(
    clientConfig,
    ['Host 127.0.0.1', `  Port ${port}`, '  User root', `  IdentityFile ${path.join(dir, 'client_key')}`, '  IdentitiesOnly yes', `  UserKnownHostsFile ${path.join(dir, 'known_hosts')}`, '  StrictHostKeyChecking yes', ''].join('\n'),
  );
  const unknownHostConfig = path.join(dir, 'ssh_config_unknown_host');
  await writeFile(path.join(dir, 'known_hosts_empty'), '');
  await writeFile(unknownHostConfig, (await readFile(clientConfig, 'utf8')).replace(path.join(dir, 'known_hosts'), path.join(dir, 'known_hosts_empty')));
  const sshd: ChildProcess = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  sshd.stderr?.on('data', (b: Buffer) => (log = (log + b.toString()).slice(-4000)));
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (sshd.exitCode !== null) throw new Error(`sshd exited ${sshd.exitCode}: ${log}`);
    const up = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => {
        c.destroy();
        resolve(true);
      });
      c.on('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline) throw new Error(`sshd did not listen on ${port}: ${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    port,
    env: { DOCKER_HOST: `ssh://root@127.0.0.1:${port}`, AIRLOCK_SSH_CONFIG: clientConfig },
    unknownHostEnv: { DOCKER_HOST: `ssh://root@127.0.0.1:${port}`, AIRLOCK_SSH_CONFIG: unknownHostConfig, AIRLOCK_SSH_NO_MUX: '1' },
    async close() {
      sshd.kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
