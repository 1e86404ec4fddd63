import path from 'node:path';
import Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';
import { describeEngine, engineChoiceFrom, identifyEngine, isPodmanVersion, resolveEngineEndpoint, type EngineEndpoint, type EngineIdentity, type EngineInfo, type EngineKind, type EngineSelection } from './engine-endpoint';
import type { LibpodHostInfo } from './engine-limits';
import { pathExists } from '../../common/path-exists';

export { candidateSockets, resolveEngineEndpoint, type EngineChoice, type EngineEndpoint, type EngineIdentity, type EngineKind, type EngineSelection } from './engine-endpoint';


async function dockerCliInstalled(env: NodeJS.ProcessEnv): Promise<boolean> {
  const names = process.platform === 'win32' ? ['docker.exe', 'podman.exe'] : ['docker', 'podman'];
  const dirs = (env.PATH ?? '').split(path.delimiter).filter(Boolean);
  const extra = process.platform === 'darwin' ? ['/Applications/Docker.app/Contents/Resources/bin', '/usr/local/bin', '/opt/homebrew/bin'] : [];
  for (const dir of [...dirs, ...extra]) {
    for (const name of names) {
      if (await pathExists(path.join(dir, name))) return true;
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
 * errors that are not about reaching the engine (the caller rethrows them as they are). `env` is the
 * host's environment the endpoint was resolved from; without it (an engine that built the image
 * already, so one is installed) no "not installed" verdict is given.
 */
export async function engineConnectError(err: unknown, endpoint: EngineEndpoint, env?: NodeJS.ProcessEnv): Promise<AirlockError | undefined> {
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
  if (endpoint.description.remote) {
    const remote = remoteConnectError(code, endpoint, err);
    if (remote) return remote;
  }
  if (code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'ETIMEDOUT' || code === 'EHOSTUNREACH' || code === 'ECONNRESET' || code === 'ENOTFOUND' || code === 'EPIPE' || code === 'ENOTSOCK') {
    if (endpoint.guessed && env && !env.DOCKER_HOST && !(await dockerCliInstalled(env))) {
      return new AirlockError(
        'DOCKER_NOT_INSTALLED',
        'No container engine found. Install Docker (Docker Desktop on macOS/Windows, docker.io or Docker Engine on Linux), Colima, OrbStack or Podman, start it, and run `airlock doctor` again.',
        { cause: err },
      );
    }
    const { source, kind, rootless } = endpoint.description;
    const podman = kind === 'podman';
    const hint = source === 'DOCKER_HOST' || source === 'CONTAINER_HOST'
      ? `Check that ${source} (${where}) points at a running engine, or unset it to use the default socket.`
      : podman
        ? rootless
          ? 'Start rootless Podman\'s API service: `systemctl --user enable --now podman.socket` (or `podman system service --time=0 &`).'
          : 'Start Podman\'s API service: `sudo systemctl enable --now podman.socket` (or `sudo podman system service --time=0 unix:///run/podman/podman.sock &`).'
        : 'Start Docker (Docker Desktop, `sudo systemctl start docker`, `colima start`, `podman machine start`) or set DOCKER_HOST to your engine\'s socket.';
    return new AirlockError('DOCKER_NOT_RUNNING', `The ${podman ? 'Podman' : 'container'} engine at ${where} is not answering (${code}). ${hint}`, { cause: err });
  }
  return undefined;
}

/** Network failures of a remote engine (tcp, TLS, ssh), each with what to do about it. */
function remoteConnectError(code: string | undefined, endpoint: EngineEndpoint, err: unknown): AirlockError | undefined {
  const where = describeEngine(endpoint.description);
  const ssh = endpoint.description.transport === 'ssh';
  const detail = err instanceof Error ? err.message.slice(0, 300) : String(err);
  switch (code) {
    case 'EHOSTKEY':
      return new AirlockError('DOCKER_UNREACHABLE', `${where}: ssh does not know or does not trust the host key (${detail}). Connect once with \`ssh ${endpoint.description.location}\` to check and accept its key, then retry.`, { cause: err });
    case 'EAUTH':
      return new AirlockError('DOCKER_UNREACHABLE', `${where}: ssh could not log in without a prompt (${detail}). Load your key into ssh-agent or name it in ~/.ssh/config (IdentityFile) so \`ssh ${endpoint.description.location} docker version\` works, then retry.`, { cause: err });
    case 'ESSHSESSIONS':
      return new AirlockError('DOCKER_UNREACHABLE', `${where}: the ssh server refused another session on the shared connection (${detail}). Raise MaxSessions in its sshd_config (default 10), or set AIRLOCK_SSH_NO_MUX=1 to open one ssh connection per stream.`, { cause: err });
    case 'ENODOCKER':
      return new AirlockError('DOCKER_UNREACHABLE', `${where}: the remote host has no docker CLI on its PATH for the ssh session (${detail}). Install Docker there (Airlock runs \`docker system dial-stdio\` on it).`, { cause: err });
    case 'ENOTFOUND':
    case 'ECONNREFUSED':
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ECONNRESET':
    case 'EPIPE':
    case 'ERR_SSL_WRONG_VERSION_NUMBER':
      return new AirlockError(
        'DOCKER_UNREACHABLE',
        `Cannot reach the engine ${where} (${code}: ${detail}). Check the network (VPN, Wi-Fi) and that the engine is up${ssh ? ` (\`ssh ${endpoint.description.location} docker version\`)` : ''}, then retry; results already collected are kept, and sandboxes left there are removed the next time Airlock reaches it.`,
        { cause: err },
      );
    default:
      if (/certificate|self[- ]signed|unable to verify|ERR_TLS/i.test(`${code} ${detail}`)) {
        return new AirlockError('DOCKER_UNREACHABLE', `${where}: the TLS handshake failed (${detail}). Check that DOCKER_CERT_PATH (or the context's TLS files) holds the engine's CA and a client certificate it accepts.`, { cause: err });
      }
      return undefined;
  }
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
  /** Ends the transport's connections (the ssh processes of an ssh:// engine); the client is unusable after. */
  dispose(): void;
}

/**
 * Creates a client for the resolved endpoint: the user's explicit choice (`selection`, or
 * `AIRLOCK_ENGINE_HOST` as `--engine-host` sets it), else DOCKER_HOST, the Docker context, the
 * well-known sockets. Does not contact the engine; see `pingEngine`.
 */
export async function connectEngine(env: NodeJS.ProcessEnv, selection: EngineSelection = {}): Promise<Engine> {
  const allowInsecure = selection.allowInsecure || env.AIRLOCK_ENGINE_ALLOW_INSECURE === '1';
  const endpoint = await resolveEngineEndpoint(env, { host: env.AIRLOCK_ENGINE_HOST || selection.host, allowInsecure, choice: engineChoiceFrom(env, selection.choice) });
  const docker = new Docker({ ...endpoint.options, timeout: undefined });
  return { docker, endpoint, dispose: () => endpoint.options.agent?.destroy() };
}

const identities = new WeakMap<Engine, Promise<EngineIdentity>>();

/** What the engine says it is (Docker or Podman, version, rootless, runtimes); asked once per client. */
export function engineIdentity(engine: Engine): Promise<EngineIdentity> {
  let id = identities.get(engine);
  if (!id) {
    id = Promise.all([engine.docker.version(), engine.docker.info() as Promise<EngineInfo>]).then(async ([v, i]) => identifyEngine(v, i, isPodmanVersion(v) ? await libpodHostInfo(engine) : undefined));
    identities.set(engine, id);
    id.catch(() => identities.delete(engine));
  }
  return id;
}

/** Podman's own `GET /libpod/info` host part; undefined when it does not answer (an old Podman). */
async function libpodHostInfo(engine: Engine): Promise<LibpodHostInfo | undefined> {
  const answer = await new Promise<unknown>((resolve) => {
    engine.docker.modem.dial({ path: '/v4.0.0/libpod/info', method: 'GET', statusCodes: { 200: true }, options: {} }, (err: unknown, data: unknown) => resolve(err ? undefined : data));
  });
  const host = (answer as { host?: unknown } | undefined)?.host;
  return host && typeof host === 'object' ? (host as LibpodHostInfo) : undefined;
}

/** Asks the engine for its version; typed errors when it cannot be reached. */
export async function pingEngine(engine: Engine, env: NodeJS.ProcessEnv, timeoutMs = 15_000): Promise<{ version: string; apiVersion: string; os: string; podman: boolean; kind: EngineKind }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const version = await Promise.race([
      engine.docker.version(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })), timeoutMs);
      }),
    ]);
    const id = identifyEngine(version, {});
    return { version: id.version, apiVersion: version.ApiVersion, os: `${version.Os}/${version.Arch}`, podman: id.kind === 'podman', kind: id.kind };
  } catch (err) {
    throw (await engineConnectError(err, engine.endpoint, env)) ?? err;
  } finally {
    if (timer) clearTimeout(timer);
  }
}
