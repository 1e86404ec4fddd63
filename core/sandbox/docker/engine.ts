import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';
import { identifyEngine, resolveEngineEndpoint, type EngineChoice, type EngineEndpoint, type EngineIdentity, type EngineKind } from './engine-endpoint';

export { candidateSockets, parseDockerHost, resolveEngineEndpoint, type EngineEndpoint } from './engine-endpoint';

async function exists(p: string): Promise<boolean> {
  try {
    await access(p, constants.F_OK);
    return true;
  } catch {
    return false;
  }
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
    const podman = endpoint.description.kind === 'podman';
    const hint = endpoint.description.source === 'DOCKER_HOST' || endpoint.description.source === 'CONTAINER_HOST'
      ? `Check that ${endpoint.description.source} (${where}) points at a running engine, or unset it to use the default socket.`
      : podman
        ? endpoint.description.rootless
          ? 'Start rootless Podman\'s API service: `systemctl --user enable --now podman.socket` (or `podman system service --time=0 &`).'
          : 'Start Podman\'s API service: `sudo systemctl enable --now podman.socket` (or `sudo podman system service --time=0 unix:///run/podman/podman.sock &`).'
        : 'Start Docker (Docker Desktop, `sudo systemctl start docker`, `colima start`, `podman machine start`) or set DOCKER_HOST to your engine\'s socket.';
    return new AirlockError('DOCKER_NOT_RUNNING', `The ${podman ? 'Podman' : 'container'} engine at ${where} is not answering (${code}). ${hint}`, { cause: err });
  }
  return undefined;
}

/** The HTTP status of an engine API error (dockerode sets `statusCode`), if any. */
export function statusCodeOf(err: unknown): number | undefined {
  if (err && typeof err === 'object' && 'statusCode' in err && typeof (err as { statusCode: unknown }).statusCode === 'number') {
    return (err as { statusCode: number }).statusCode;
  }
  return undefined;
}

/** A connected engine client plus the endpoint it talks to. */
export interface Engine {
  docker: Docker;
  endpoint: EngineEndpoint;
}

/**
 * Creates a client for the resolved endpoint (`choice` defaults to `AIRLOCK_ENGINE`, else `auto`).
 * Does not contact the engine; see `pingEngine` and `engineIdentity`.
 */
export async function connectEngine(env: NodeJS.ProcessEnv = process.env, choice?: EngineChoice): Promise<Engine> {
  const endpoint = await resolveEngineEndpoint(env, choice);
  return { docker: new Docker({ ...endpoint.options, timeout: undefined }), endpoint };
}

const identities = new WeakMap<Engine, Promise<EngineIdentity>>();

/** What the engine says it is (Docker or Podman, version, rootless, runtimes); asked once per client. */
export function engineIdentity(engine: Engine): Promise<EngineIdentity> {
  let id = identities.get(engine);
  if (!id) {
    id = Promise.all([engine.docker.version(), engine.docker.info() as Promise<{ SecurityOptions?: string[]; Runtimes?: Record<string, unknown> }>]).then(([v, i]) => identifyEngine(v, i));
    identities.set(engine, id);
    id.catch(() => identities.delete(engine));
  }
  return id;
}

/** Asks the engine for its version; typed errors when it cannot be reached. */
export async function pingEngine(engine: Engine, env: NodeJS.ProcessEnv = process.env, timeoutMs = 10_000): Promise<{ version: string; apiVersion: string; os: string; kind: EngineKind }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const version = await Promise.race([
      engine.docker.version(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })), timeoutMs);
      }),
    ]);
    const id = identifyEngine(version, {});
    return { version: id.version, apiVersion: version.ApiVersion, os: `${version.Os}/${version.Arch}`, kind: id.kind };
  } catch (err) {
    throw (await engineConnectError(err, engine.endpoint, env)) ?? err;
  } finally {
    if (timer) clearTimeout(timer);
  }
}
