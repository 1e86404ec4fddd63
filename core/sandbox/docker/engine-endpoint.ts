import { access, constants } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';

/**
 * "Which engine, where": one place that turns the environment, the user's engine choice and the
 * well-known sockets into dockerode options plus a description people can read
 * (docs/architecture.md §2.3, "Engines"). Podman specifics of discovery live here; Podman
 * differences of the API live in the driver.
 */

/** The engines Airlock knows by name. Both speak the Docker Engine API. */
export type EngineKind = 'docker' | 'podman';

/** The user's choice (`--engine`, the `engine` setting, `AIRLOCK_ENGINE`): `auto` takes the first engine found. */
export type EngineChoice = 'auto' | EngineKind;
export const ENGINE_CHOICES: readonly EngineChoice[] = ['auto', 'docker', 'podman'];

/** What an endpoint is, for messages, the doctor and the UI. */
export interface EngineDescription {
  /** The engine this endpoint is expected to be; confirmed by `identifyEngine` once it answers. */
  kind: EngineKind;
  /** `unix:///run/podman/podman.sock`, `tcp://host:2376`, … */
  location: string;
  /** True for a per-user engine (rootless Podman or Docker); undefined when the path does not say. */
  rootless?: boolean;
  /** Where the location came from. */
  source: 'DOCKER_HOST' | 'CONTAINER_HOST' | 'socket' | 'default';
}

/** Where a Docker-API engine listens, as resolved from the environment and well-known sockets. */
export interface EngineEndpoint {
  /** Human-readable form for messages: `unix:///var/run/docker.sock`, `tcp://host:2376`, … */
  display: string;
  options: Docker.DockerOptions;
  /** True when nothing was configured and no socket was found (the default path was assumed). */
  guessed: boolean;
  description: EngineDescription;
}

/** A well-known socket and what is expected behind it. */
export interface CandidateSocket {
  path: string;
  kind: EngineKind;
  rootless?: boolean;
}

function currentUid(): number {
  return typeof process.getuid === 'function' ? process.getuid() : 1000;
}

/** Podman's API sockets: rootful `/run/podman/podman.sock`, rootless `$XDG_RUNTIME_DIR/podman/podman.sock`. */
export function podmanSockets(env: NodeJS.ProcessEnv = process.env, uid = currentUid()): CandidateSocket[] {
  if (process.platform === 'win32') return [{ path: '//./pipe/podman-machine-default', kind: 'podman' }];
  const runtimeDir = env.XDG_RUNTIME_DIR || `/run/user/${uid}`;
  const rootful: CandidateSocket = { path: '/run/podman/podman.sock', kind: 'podman', rootless: false };
  const rootless: CandidateSocket = { path: path.join(runtimeDir, 'podman', 'podman.sock'), kind: 'podman', rootless: true };
  // root uses the system service; everyone else their own (a rootful socket is root-only anyway).
  return uid === 0 ? [rootful, rootless] : [rootless, rootful];
}

/** Docker's sockets (Engine, Desktop, Colima, OrbStack, rootless, Rancher), most common first. */
export function dockerSockets(env: NodeJS.ProcessEnv = process.env, home = os.homedir(), uid = currentUid()): CandidateSocket[] {
  if (process.platform === 'win32') return [{ path: '//./pipe/docker_engine', kind: 'docker' }];
  const runtimeDir = env.XDG_RUNTIME_DIR || `/run/user/${uid}`;
  const d = (p: string, rootless?: boolean): CandidateSocket => ({ path: p, kind: 'docker', ...(rootless === undefined ? {} : { rootless }) });
  return [
    d('/var/run/docker.sock', false),
    d(path.join(home, '.docker', 'run', 'docker.sock')),
    d(path.join(home, '.docker', 'desktop', 'docker.sock')),
    d(path.join(home, '.colima', 'default', 'docker.sock')),
    d(path.join(home, '.colima', 'docker.sock')),
    d(path.join(home, '.orbstack', 'run', 'docker.sock')),
    d(path.join(runtimeDir, 'docker.sock'), true),
    d(path.join(home, '.rd', 'docker.sock')),
  ];
}

/** The sockets tried for a choice, in order (`auto`: Docker's first, then Podman's). */
export function candidateSockets(env: NodeJS.ProcessEnv = process.env, choice: EngineChoice = 'auto', home = os.homedir()): CandidateSocket[] {
  if (choice === 'podman') return podmanSockets(env);
  if (choice === 'docker') return dockerSockets(env, home);
  return [...dockerSockets(env, home), ...podmanSockets(env)];
}

/** The engine choice from `AIRLOCK_ENGINE` (what `--engine` sets), else `fallback` (the setting). */
export function engineChoiceFrom(env: NodeJS.ProcessEnv = process.env, fallback: EngineChoice = 'auto'): EngineChoice {
  const v = env.AIRLOCK_ENGINE?.trim().toLowerCase();
  if (!v) return fallback;
  if ((ENGINE_CHOICES as readonly string[]).includes(v)) return v as EngineChoice;
  throw new AirlockError('INVALID_INPUT', `AIRLOCK_ENGINE='${env.AIRLOCK_ENGINE}' is not an engine; use auto, docker or podman.`);
}

async function exists(p: string): Promise<boolean> {
  try {
    await access(p, constants.F_OK);
    return true;
  } catch {
    return false;
  }
}

/** What a socket path suggests: Podman's sockets are named podman.sock; per-user paths are rootless. */
function describeSocketPath(socketPath: string, uid = currentUid()): Pick<EngineDescription, 'kind' | 'rootless'> {
  const kind: EngineKind = /podman/i.test(path.basename(socketPath)) || /podman-machine/i.test(socketPath) ? 'podman' : 'docker';
  const rootless = socketPath.startsWith('/run/user/') || (uid !== 0 && socketPath.startsWith(os.homedir())) ? true : socketPath.startsWith('/run/podman/') || socketPath === '/var/run/docker.sock' ? false : undefined;
  return { kind, ...(rootless === undefined ? {} : { rootless }) };
}

/**
 * Resolves the engine endpoint.
 * - `auto`: `DOCKER_HOST` wins, then `CONTAINER_HOST` (Podman's variable), then the first well-known
 *   socket that exists (Docker's, then Podman's rootful/rootless).
 * - `docker`: `DOCKER_HOST`, then Docker's sockets.
 * - `podman`: `CONTAINER_HOST`, then `DOCKER_HOST` when it names a podman socket, then Podman's sockets.
 * A malformed `DOCKER_HOST`/`CONTAINER_HOST` is INVALID_INPUT with the accepted forms.
 */
export async function resolveEngineEndpoint(env: NodeJS.ProcessEnv = process.env, choice: EngineChoice = engineChoiceFrom(env)): Promise<EngineEndpoint> {
  const dockerHost = env.DOCKER_HOST?.trim();
  const containerHost = env.CONTAINER_HOST?.trim();
  if (choice !== 'podman' && dockerHost) return parseDockerHost(dockerHost, env, 'DOCKER_HOST');
  if (choice !== 'docker' && containerHost) return parseDockerHost(containerHost, env, 'CONTAINER_HOST', 'podman');
  if (choice === 'podman' && dockerHost && /podman/i.test(dockerHost)) return parseDockerHost(dockerHost, env, 'DOCKER_HOST', 'podman');
  const candidates = candidateSockets(env, choice);
  for (const c of candidates) {
    if (process.platform === 'win32' || (await exists(c.path))) {
      return {
        display: `unix://${c.path}`,
        options: { socketPath: c.path },
        guessed: false,
        description: { kind: c.kind, location: `unix://${c.path}`, ...(c.rootless === undefined ? {} : { rootless: c.rootless }), source: 'socket' },
      };
    }
  }
  const fallback = candidates[0] ?? { path: '/var/run/docker.sock', kind: 'docker' as const };
  return {
    display: `unix://${fallback.path}`,
    options: { socketPath: fallback.path },
    guessed: true,
    description: { kind: fallback.kind, location: `unix://${fallback.path}`, ...(fallback.rootless === undefined ? {} : { rootless: fallback.rootless }), source: 'default' },
  };
}

/** Parses a `DOCKER_HOST`/`CONTAINER_HOST` value (unix://, npipe://, tcp://, http(s)://). */
export function parseDockerHost(host: string, env: NodeJS.ProcessEnv = process.env, source: 'DOCKER_HOST' | 'CONTAINER_HOST' = 'DOCKER_HOST', kindHint?: EngineKind): EngineEndpoint {
  const described = (options: Docker.DockerOptions, socketPath?: string): EngineEndpoint => {
    const fromPath = socketPath ? describeSocketPath(socketPath) : { kind: 'docker' as const };
    return { display: host, options, guessed: false, description: { ...fromPath, kind: kindHint ?? fromPath.kind, location: host, source } };
  };
  if (host.startsWith('unix://')) {
    const socketPath = host.slice('unix://'.length);
    return described({ socketPath }, socketPath);
  }
  if (host.startsWith('npipe://')) {
    const socketPath = host.slice('npipe://'.length).replace(/\\/g, '/') || '//./pipe/docker_engine';
    return described({ socketPath }, socketPath);
  }
  const m = /^(tcp|http|https):\/\/([^:/]+|\[[^\]]+\]):(\d+)\/?$/.exec(host);
  if (m) {
    const tls = m[1] === 'https' || (env.DOCKER_TLS_VERIFY !== undefined && env.DOCKER_TLS_VERIFY !== '' && env.DOCKER_TLS_VERIFY !== '0');
    // TLS material is read by docker-modem from DOCKER_CERT_PATH when protocol is https.
    return described({ host: m[2], port: Number(m[3]), protocol: tls ? 'https' : 'http' });
  }
  throw new AirlockError(
    'INVALID_INPUT',
    `${source}='${host}' is not understood. Use unix:///path/to/docker.sock, tcp://host:port or npipe:////./pipe/docker_engine, or unset it to use the default socket.`,
  );
}

/** What the engine says it is, from its version (and info) answers. */
export interface EngineIdentity {
  kind: EngineKind;
  /** The engine's own version (Podman's, not the API compatibility version). */
  version: string;
  apiVersion: string;
  rootless: boolean;
  /** OCI runtimes the engine knows by name (`runc`, `runsc`, `crun`, …). */
  runtimes: string[];
}

/** One line for people: `podman 4.3.1 (rootless) at unix:///run/user/1000/podman/podman.sock`. */
export function describeEngine(identity: Pick<EngineIdentity, 'kind' | 'version' | 'rootless'>, endpoint: Pick<EngineEndpoint, 'display'>): string {
  return `${identity.kind} ${identity.version} (${identity.rootless ? 'rootless' : 'rootful'}) at ${endpoint.display}`;
}

/** Reads kind/version/rootless/runtimes from `GET /version` and `GET /info` (Podman names itself in Components). */
export function identifyEngine(version: Docker.DockerVersion, info: { SecurityOptions?: string[]; Runtimes?: Record<string, unknown> }): EngineIdentity {
  const components = (version as { Components?: Array<{ Name?: string; Version?: string }> }).Components ?? [];
  const podman = components.find((c) => /podman/i.test(c.Name ?? ''));
  return {
    kind: podman ? 'podman' : 'docker',
    version: podman?.Version ?? version.Version,
    apiVersion: version.ApiVersion,
    rootless: (info.SecurityOptions ?? []).some((o) => /name=rootless/.test(o)),
    runtimes: Object.keys(info.Runtimes ?? {}),
  };
}
