import { access, constants } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';

/** Where a Docker-API engine listens, as resolved from the environment and well-known sockets. */
export interface EngineEndpoint {
  /** Human-readable form for messages: `unix:///var/run/docker.sock`, `tcp://host:2376`, … */
  display: string;
  options: Docker.DockerOptions;
  /** True when nothing was configured and no socket was found (the default path was assumed). */
  guessed: boolean;
}

/** Sockets of the common engines, most common first (Docker Engine, Desktop, Colima, OrbStack, Podman, Rancher). */
export function candidateSockets(env: NodeJS.ProcessEnv = process.env, home = os.homedir()): string[] {
  if (process.platform === 'win32') return ['//./pipe/docker_engine', '//./pipe/podman-machine-default'];
  const uid = typeof process.getuid === 'function' ? process.getuid() : 1000;
  const runtimeDir = env.XDG_RUNTIME_DIR ?? `/run/user/${uid}`;
  return [
    '/var/run/docker.sock',
    path.join(home, '.docker', 'run', 'docker.sock'),
    path.join(home, '.docker', 'desktop', 'docker.sock'),
    path.join(home, '.colima', 'default', 'docker.sock'),
    path.join(home, '.colima', 'docker.sock'),
    path.join(home, '.orbstack', 'run', 'docker.sock'),
    path.join(runtimeDir, 'docker.sock'),
    path.join(runtimeDir, 'podman', 'podman.sock'),
    '/run/podman/podman.sock',
    path.join(home, '.rd', 'docker.sock'),
  ];
}

async function exists(p: string): Promise<boolean> {
  try {
    await access(p, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Resolves the engine endpoint: `DOCKER_HOST` (unix://, tcp://, npipe://) wins; otherwise the first
 * well-known socket that exists. A malformed `DOCKER_HOST` is INVALID_INPUT with the accepted forms.
 */
export async function resolveEngineEndpoint(env: NodeJS.ProcessEnv = process.env): Promise<EngineEndpoint> {
  const host = env.DOCKER_HOST?.trim();
  if (host) return parseDockerHost(host, env);
  for (const socketPath of candidateSockets(env)) {
    if (process.platform === 'win32' || (await exists(socketPath))) {
      return { display: `unix://${socketPath}`, options: { socketPath }, guessed: false };
    }
  }
  const socketPath = process.platform === 'win32' ? '//./pipe/docker_engine' : '/var/run/docker.sock';
  return { display: `unix://${socketPath}`, options: { socketPath }, guessed: true };
}

export function parseDockerHost(host: string, env: NodeJS.ProcessEnv = process.env): EngineEndpoint {
  if (host.startsWith('unix://')) {
    const socketPath = host.slice('unix://'.length);
    return { display: host, options: { socketPath }, guessed: false };
  }
  if (host.startsWith('npipe://')) {
    const socketPath = host.slice('npipe://'.length).replace(/\\/g, '/') || '//./pipe/docker_engine';
    return { display: host, options: { socketPath }, guessed: false };
  }
  const m = /^(tcp|http|https):\/\/([^:/]+|\[[^\]]+\]):(\d+)\/?$/.exec(host);
  if (m) {
    const tls = m[1] === 'https' || (env.DOCKER_TLS_VERIFY !== undefined && env.DOCKER_TLS_VERIFY !== '' && env.DOCKER_TLS_VERIFY !== '0');
    const options: Docker.DockerOptions = { host: m[2], port: Number(m[3]), protocol: tls ? 'https' : 'http' };
    // TLS material is read by docker-modem from DOCKER_CERT_PATH when protocol is https.
    return { display: host, options, guessed: false };
  }
  throw new AirlockError(
    'INVALID_INPUT',
    `DOCKER_HOST='${host}' is not understood. Use unix:///path/to/docker.sock, tcp://host:port or npipe:////./pipe/docker_engine, or unset it to use the default socket.`,
  );
}

async function dockerCliInstalled(env: NodeJS.ProcessEnv): Promise<boolean> {
  const names = process.platform === 'win32' ? ['docker.exe', 'podman.exe'] : ['docker', 'podman'];
  const dirs = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const extra = process.platform === 'darwin' ? ['/Applications/Docker.app/Contents/Resources/bin', '/usr/local/bin', '/opt/homebrew/bin'] : [];
  for (const dir of [...dirs, ...extra]) {
    for (const name of names) {
      if (await exists(path.join(dir, name))) return true;
    }
  }
  return false;
}

function errorCode(err: unknown): string | undefined {
  if (err && typeof err === 'object' && 'code' in err && typeof (err as { code: unknown }).code === 'string') {
    return (err as { code: string }).code;
  }
  return undefined;
}

/**
 * Maps a failure to reach the engine to a typed error that says what to do. Returns undefined for
 * errors that are not about reaching the engine (the caller rethrows them as they are).
 */
export async function engineConnectError(err: unknown, endpoint: EngineEndpoint, env: NodeJS.ProcessEnv = process.env): Promise<AirlockError | undefined> {
  if (err instanceof AirlockError) return err;
  const code = errorCode(err);
  const where = endpoint.display;
  if (code === 'EACCES' || code === 'EPERM') {
    return new AirlockError(
      'DOCKER_PERMISSION_DENIED',
      `Permission denied on the Docker socket ${where}. Add your user to the 'docker' group (sudo usermod -aG docker $USER, then log out and in), or use rootless Docker / Podman and point DOCKER_HOST at its socket.`,
      { cause: err },
    );
  }
  if (code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'ETIMEDOUT' || code === 'EHOSTUNREACH' || code === 'ECONNRESET' || code === 'ENOTFOUND' || code === 'EPIPE' || code === 'ENOTSOCK') {
    if (endpoint.guessed && !env.DOCKER_HOST && !(await dockerCliInstalled(env))) {
      return new AirlockError(
        'DOCKER_NOT_INSTALLED',
        'No container engine found. Install Docker (Docker Desktop on macOS/Windows, docker.io or Docker Engine on Linux), Colima, OrbStack or Podman, start it, and run `airlock doctor` again.',
        { cause: err },
      );
    }
    const hint = env.DOCKER_HOST
      ? `Check that DOCKER_HOST (${where}) points at a running engine, or unset it to use the default socket.`
      : 'Start Docker (Docker Desktop, `sudo systemctl start docker`, `colima start`, `podman machine start`) or set DOCKER_HOST to your engine\'s socket.';
    return new AirlockError('DOCKER_NOT_RUNNING', `The container engine at ${where} is not answering (${code}). ${hint}`, { cause: err });
  }
  return undefined;
}

/** A connected engine client plus the endpoint it talks to. */
/** The HTTP status of an engine API error (dockerode sets `statusCode`), if any. */
export function statusCodeOf(err: unknown): number | undefined {
  if (err && typeof err === 'object' && 'statusCode' in err && typeof (err as { statusCode: unknown }).statusCode === 'number') {
    return (err as { statusCode: number }).statusCode;
  }
  return undefined;
}

export interface Engine {
  docker: Docker;
  endpoint: EngineEndpoint;
}

/** Creates a client for the resolved endpoint. Does not contact the engine; see `pingEngine`. */
export async function connectEngine(env: NodeJS.ProcessEnv = process.env): Promise<Engine> {
  const endpoint = await resolveEngineEndpoint(env);
  return { docker: new Docker({ ...endpoint.options, timeout: undefined }), endpoint };
}

/** Asks the engine for its version; typed errors when it cannot be reached. */
export async function pingEngine(engine: Engine, env: NodeJS.ProcessEnv = process.env, timeoutMs = 10_000): Promise<{ version: string; apiVersion: string; os: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const version = await Promise.race([
      engine.docker.version(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })), timeoutMs);
      }),
    ]);
    return { version: version.Version, apiVersion: version.ApiVersion, os: `${version.Os}/${version.Arch}` };
  } catch (err) {
    throw (await engineConnectError(err, engine.endpoint, env)) ?? err;
  } finally {
    if (timer) clearTimeout(timer);
  }
}
