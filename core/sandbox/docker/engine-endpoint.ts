import { readFile } from 'node:fs/promises';
import type http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type Docker from 'dockerode';
import { AirlockError } from '../../../contracts/errors';
import { findTool } from '../../common/resolve-tool';
import { SshDialAgent, privateControlDir, type SshTarget } from './ssh-dial';

/**
 * "Which engine, where": one place that turns the user's choice, the environment, Docker contexts
 * and the well-known sockets into dockerode options plus a description people can read
 * (docs/architecture.md §13). Podman and remote-transport specifics of discovery live here;
 * API differences live in the driver.
 */

export { ENGINE_CHOICES, type EngineChoice, type EngineKind } from './engine-choice';
import { ENGINE_CHOICES, type EngineChoice, type EngineKind } from './engine-choice';
import { limitSupportFrom, type EngineInfoLimits, type EngineLimitSupport, type LibpodHostInfo } from './engine-limits';
import { pathExists } from '../../common/path-exists';
import { sha256Hex } from '../../common/sha256';
import { debugLog } from '../../common/debug-log';

/** How the engine's API is reached. */
export type EngineTransport = 'unix' | 'npipe' | 'tcp' | 'tls' | 'ssh';

/** Which engine, where: what the doctor and the UI show, and what the reaper's caution depends on. */
export interface EngineDescription {
  /** Docker-API engine flavour, as far as the address tells (the version answer refines it). */
  kind: EngineKind;
  /** True for a per-user engine (rootless Podman or Docker); undefined when the path does not say. */
  rootless?: boolean;
  /** A socket path, or a host (`build-box`, `10.0.0.5:2376`). */
  location: string;
  transport: EngineTransport;
  /**
   * Reached over a network connection (tcp, tls, ssh): possibly another machine and possibly shared
   * with other users, so only this installation's sandboxes are ever reaped there.
   */
  remote: boolean;
  /** The Docker context it came from, if any. */
  context?: string;
  /** What chose it. */
  source: 'setting' | 'DOCKER_HOST' | 'CONTAINER_HOST' | 'DOCKER_CONTEXT' | 'docker context' | 'socket' | 'default';
}

/** dockerode's options plus the HTTP agent docker-modem accepts (not in its typings). */
export type EngineOptions = Docker.DockerOptions & { agent?: http.Agent };

/** Where a Docker-API engine listens, as resolved from the setting, the environment, contexts and well-known sockets. */
export interface EngineEndpoint {
  /** Human-readable form for messages: `unix:///var/run/docker.sock`, `tcp://host:2376`, `ssh://me@box`. */
  display: string;
  options: EngineOptions;
  /** True when nothing was configured and no socket was found (the default path was assumed). */
  guessed: boolean;
  description: EngineDescription;
}

/** The user's explicit choice (the `engineHost` setting or `--engine-host`), which wins over the environment. */
export interface EngineSelection {
  /** A `DOCKER_HOST`-style address (unix://, npipe://, tcp://, ssh://) or the name of a Docker context. */
  host?: string;
  /**
   * Allow plain, unencrypted tcp:// to a host that is not this machine, and TLS without verifying the
   * engine's certificate. Off by default (see `assertSafeTransport`).
   */
  allowInsecure?: boolean;
  /** Docker or Podman or whichever is found (default: `AIRLOCK_ENGINE`, else `auto`). */
  choice?: EngineChoice;
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
export function podmanSockets(env: NodeJS.ProcessEnv, uid = currentUid()): CandidateSocket[] {
  if (process.platform === 'win32') return [{ path: '//./pipe/podman-machine-default', kind: 'podman' }];
  const runtimeDir = env.XDG_RUNTIME_DIR || `/run/user/${uid}`;
  const rootful: CandidateSocket = { path: '/run/podman/podman.sock', kind: 'podman', rootless: false };
  const rootless: CandidateSocket = { path: path.join(runtimeDir, 'podman', 'podman.sock'), kind: 'podman', rootless: true };
  // root uses the system service; everyone else their own (a rootful socket is root-only anyway).
  return uid === 0 ? [rootful, rootless] : [rootless, rootful];
}

/** Docker's sockets (Engine, Desktop, Colima, OrbStack, rootless, Rancher), most common first. */
export function dockerSockets(env: NodeJS.ProcessEnv, home = os.homedir(), uid = currentUid()): CandidateSocket[] {
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
export function candidateSockets(env: NodeJS.ProcessEnv, choice: EngineChoice = 'auto', home = os.homedir()): CandidateSocket[] {
  if (choice === 'podman') return podmanSockets(env);
  if (choice === 'docker') return dockerSockets(env, home);
  return [...dockerSockets(env, home), ...podmanSockets(env)];
}

/** The engine choice from `AIRLOCK_ENGINE` (what `--engine` sets), else `fallback` (the setting). */
export function engineChoiceFrom(env: NodeJS.ProcessEnv, fallback: EngineChoice = 'auto'): EngineChoice {
  const v = env.AIRLOCK_ENGINE?.trim().toLowerCase();
  if (!v) return fallback;
  if ((ENGINE_CHOICES as readonly string[]).includes(v)) return v as EngineChoice;
  throw new AirlockError('INVALID_INPUT', `AIRLOCK_ENGINE='${env.AIRLOCK_ENGINE}' is not an engine; use auto, docker or podman.`);
}

/** What a socket path suggests: Podman's sockets are named podman.sock; per-user paths are rootless. */
function describeSocketPath(socketPath: string, uid = currentUid()): Pick<EngineDescription, 'kind' | 'rootless'> {
  const kind: EngineKind = /podman/i.test(path.basename(socketPath)) || /podman-machine/i.test(socketPath) ? 'podman' : 'docker';
  const rootless = socketPath.startsWith('/run/user/') || (uid !== 0 && socketPath.startsWith(os.homedir()))
    ? true
    : socketPath.startsWith('/run/podman/') || socketPath === '/var/run/docker.sock'
      ? false
      : undefined;
  return { kind, ...(rootless === undefined ? {} : { rootless }) };
}


/** docker-modem merges its own reading of process.env under ours: every key is set so none leaks in. */
const CLEAN: EngineOptions = { socketPath: undefined, host: undefined, port: undefined, protocol: undefined, ca: undefined, cert: undefined, key: undefined, username: undefined, agent: undefined };

function socketEndpoint(socketPath: string, display: string, source: EngineDescription['source'], guessed = false, context?: string, kindHint?: EngineKind): EngineEndpoint {
  const fromPath = describeSocketPath(socketPath);
  return {
    display,
    options: { ...CLEAN, socketPath },
    guessed,
    description: { ...fromPath, kind: kindHint ?? fromPath.kind, location: socketPath, transport: display.startsWith('npipe:') ? 'npipe' : 'unix', remote: false, source, ...(context ? { context } : {}) },
  };
}

/** TLS material of an endpoint. */
interface TlsMaterial {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

async function readTls(dir: string, what: string): Promise<TlsMaterial> {
  try {
    const [ca, cert, key] = await Promise.all(['ca.pem', 'cert.pem', 'key.pem'].map((f) => readFile(path.join(dir, f))));
    return { ca: ca as Buffer, cert: cert as Buffer, key: key as Buffer };
  } catch (err) {
    throw new AirlockError(
      'INVALID_INPUT',
      `${what} asks for TLS, but ca.pem, cert.pem and key.pem could not be read from ${dir} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'}). Put the engine's CA and your client certificate there, or set DOCKER_CERT_PATH to their folder.`,
      { cause: err },
    );
  }
}

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  // Only `localhost` and literal loopback addresses: `*.localhost` is resolved by whatever the
  // system resolver (or an ssh/proxy in front) says, which need not be this machine.
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return h === '::1';
}

/**
 * Plain tcp:// is the Docker API unencrypted and unauthenticated: anyone on the path reads the
 * workspace and the run token, and anyone who can reach the port is root on that host. Only this
 * machine's loopback is accepted without `allowInsecure`; TLS (DOCKER_TLS_VERIFY) or ssh:// is the way.
 */
function assertSafeTransport(host: string, display: string, tls: 'verify' | 'no-verify' | 'none', selection: EngineSelection): void {
  if (selection.allowInsecure) return;
  if (tls === 'no-verify') {
    throw new AirlockError(
      'INVALID_INPUT',
      `The engine at ${display} would be used over TLS without checking its certificate, so anyone in between could read the project and the run token. Set DOCKER_TLS_VERIFY=1 with the engine's CA in DOCKER_CERT_PATH, use ssh://, or allow it explicitly (setting engineAllowInsecure).`,
    );
  }
  if (tls === 'none' && !isLoopback(host)) {
    throw new AirlockError(
      'INVALID_INPUT',
      `${display} is a remote engine over plain, unencrypted TCP: the project and the run token would cross the network in clear text, and the port gives root on that host to anyone who reaches it. Use ssh://user@${host} or TLS (DOCKER_TLS_VERIFY=1, DOCKER_CERT_PATH), or allow it explicitly (setting engineAllowInsecure).`,
    );
  }
}

/** How the env asks for TLS on tcp://: verify (DOCKER_TLS_VERIFY), encrypt only (DOCKER_TLS), or none. */
function tlsModeOf(env: NodeJS.ProcessEnv): 'verify' | 'no-verify' | 'none' {
  const on = (v: string | undefined) => v !== undefined && v !== '' && v !== '0';
  if (on(env.DOCKER_TLS_VERIFY)) return 'verify';
  if (on(env.DOCKER_TLS)) return 'no-verify';
  return 'none';
}

/** Reads an `ssh://[user@]host[:port]` address; anything else in it (a path, a query) is refused. */
export function parseSshHost(address: string): SshTarget {
  let url: URL;
  try {
    url = new URL(address);
  } catch {
    url = new URL('invalid://');
  }
  const bracketed = /^\[.*\]$/.test(url.hostname);
  const host = safeDecode(url.hostname.replace(/^\[|\]$/g, ''));
  const user = url.username ? safeDecode(url.username) : undefined;
  if (url.protocol !== 'ssh:' || !host || host.startsWith('-') || (url.pathname && url.pathname !== '/') || url.search || url.hash || url.password) {
    throw new AirlockError('INVALID_INPUT', `'${address}' is not an engine address Airlock understands. Use ssh://user@host or ssh://user@host:port.`);
  }
  // ssh hands user and host to the user's ssh config (`%u`, `%h` in ProxyCommand, Match exec…),
  // where older OpenSSH expands them into a shell command line: only plain names get there.
  if (!(bracketed ? SSH_IPV6 : SSH_NAME).test(host) || (user !== undefined && !SSH_NAME.test(user))) {
    throw new AirlockError(
      'INVALID_INPUT',
      `'${address.slice(0, 200)}' has characters that are not allowed in an ssh:// engine's user or host name (letters, digits, '.', '_' and '-' only, not starting with '-'), since ssh may pass them to a shell. Put an alias in your ssh config (Host build-box, with HostName and User) and use ssh://build-box.`,
    );
  }
  return { host, ...(user ? { user } : {}), ...(url.port ? { port: Number(url.port) } : {}) };
}

/** A user or host name ssh may pass to a shell safely. */
const SSH_NAME = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;
const SSH_IPV6 = /^[0-9A-Fa-f:.]+$/;

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return '\0';
  }
}

interface ParseContext {
  env: NodeJS.ProcessEnv;
  selection: EngineSelection;
  source: EngineDescription['source'];
  /** TLS material and mode from a Docker context (instead of DOCKER_TLS_VERIFY/DOCKER_CERT_PATH). */
  contextTls?: { dir: string; skipVerify: boolean; name: string };
  /** What the variable that named it implies (CONTAINER_HOST is Podman's). */
  kindHint?: EngineKind;
}

async function parseAddress(address: string, ctx: ParseContext): Promise<EngineEndpoint> {
  const context = ctx.contextTls?.name;
  if (address.startsWith('unix://')) return socketEndpoint(address.slice('unix://'.length), address, ctx.source, false, context, ctx.kindHint);
  if (address.startsWith('npipe://')) return socketEndpoint(address.slice('npipe://'.length).replace(/\\/g, '/') || '//./pipe/docker_engine', address, ctx.source, false, context, ctx.kindHint);
  if (address.startsWith('ssh://')) {
    const target = parseSshHost(address);
    const sshPath = await findTool('ssh', ctx.env);
    if (!sshPath) throw new AirlockError('INVALID_INPUT', `${address} needs the OpenSSH client (ssh), which is not on PATH. Install it (openssh-client) and retry.`);
    // AIRLOCK_SSH_NO_MUX=1: one ssh connection per stream (a server whose MaxSessions is too low for sharing).
    const controlDir = ctx.env.AIRLOCK_SSH_NO_MUX === '1' ? undefined : await privateControlDir().catch(debugLog.swallow('engine.ssh.controlDir'));
    const agent = new SshDialAgent(sshPath, target, controlDir, ctx.env.AIRLOCK_SSH_CONFIG || undefined, ctx.env);
    const display = `ssh://${target.user ? `${target.user}@` : ''}${target.host}${target.port ? `:${target.port}` : ''}`;
    return {
      display,
      // Plain HTTP over the ssh pipe; the host name only fills the Host header.
      options: { ...CLEAN, protocol: 'http', host: 'docker', agent },
      guessed: false,
      description: { kind: ctx.kindHint ?? 'docker', location: target.host, transport: 'ssh', remote: true, source: ctx.source, ...(context ? { context } : {}) },
    };
  }
  const m = /^(tcp|http|https):\/\/([^:/]+|\[[^\]]+\]):(\d+)\/?$/.exec(address);
  if (!m) {
    if (ctx.source === 'setting') throw badEngineAddress(address);
    throw new AirlockError(
      'INVALID_INPUT',
      `${ctx.source === 'CONTAINER_HOST' ? 'CONTAINER_HOST' : 'DOCKER_HOST'}='${address}' is not understood. Use unix:///path/to/docker.sock, tcp://host:port, ssh://user@host or npipe:////./pipe/docker_engine, or unset it to use the default socket.`,
    );
  }
  const host = m[2] as string;
  const port = Number(m[3]);
  let tls = ctx.contextTls ? (ctx.contextTls.skipVerify ? 'no-verify' : (await pathExists(path.join(ctx.contextTls.dir, 'ca.pem'))) ? 'verify' : 'none') : tlsModeOf(ctx.env);
  if (m[1] === 'https' && tls === 'none') tls = 'verify';
  assertSafeTransport(host, address, tls, ctx.selection);
  const description: EngineDescription = { kind: ctx.kindHint ?? 'docker', location: `${host}:${port}`, transport: tls === 'none' ? 'tcp' : 'tls', remote: true, source: ctx.source, ...(context ? { context } : {}) };
  if (tls === 'none') return { display: address, options: { ...CLEAN, host, port, protocol: 'http' }, guessed: false, description };
  const dir = ctx.contextTls?.dir ?? (ctx.env.DOCKER_CERT_PATH || path.join(dockerConfigDir(ctx.env)));
  const material = await readTls(dir, address);
  const options: EngineOptions = { ...CLEAN, host: host.replace(/^\[|\]$/g, ''), port, protocol: 'https', ...material };
  // Encrypt-only was allowed explicitly: the certificate is not checked.
  if (tls === 'no-verify') Object.assign(options, { ca: undefined, agent: new https.Agent({ rejectUnauthorized: false }) });
  return { display: address, options, guessed: false, description };
}

/** `DOCKER_CONFIG` or `~/.docker`. */
export function dockerConfigDir(env: NodeJS.ProcessEnv): string {
  return env.DOCKER_CONFIG || path.join(env.HOME || os.homedir(), '.docker');
}

/** A Docker context's stored metadata: `contexts/meta/<sha256(name)>/meta.json`. */
interface ContextMeta {
  Name?: string;
  Endpoints?: { docker?: { Host?: string; SkipTLSVerify?: boolean } };
}

/** The current context's name: `DOCKER_CONTEXT`, else `currentContext` in config.json; undefined for `default`. */
async function currentContext(env: NodeJS.ProcessEnv): Promise<{ name: string; source: EngineDescription['source'] } | undefined> {
  if (env.DOCKER_CONTEXT) return env.DOCKER_CONTEXT === 'default' ? undefined : { name: env.DOCKER_CONTEXT, source: 'DOCKER_CONTEXT' };
  try {
    const config = JSON.parse(await readFile(path.join(dockerConfigDir(env), 'config.json'), 'utf8')) as { currentContext?: unknown };
    const name = typeof config.currentContext === 'string' ? config.currentContext : '';
    return name && name !== 'default' ? { name, source: 'docker context' } : undefined;
  } catch {
    return undefined; // No config, or not JSON: the docker CLI would use the default context too.
  }
}

async function contextEndpoint(name: string, source: EngineDescription['source'], env: NodeJS.ProcessEnv, selection: EngineSelection): Promise<EngineEndpoint> {
  const id = sha256Hex(name);
  const base = path.join(dockerConfigDir(env), 'contexts');
  let meta: ContextMeta;
  try {
    meta = JSON.parse(await readFile(path.join(base, 'meta', id, 'meta.json'), 'utf8')) as ContextMeta;
  } catch (err) {
    throw new AirlockError('INVALID_INPUT', `The Docker context '${name}' was not found in ${base} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'}). List them with \`docker context ls\`, or choose another engine.`, { cause: err });
  }
  const host = meta.Endpoints?.docker?.Host;
  if (!host) throw new AirlockError('INVALID_INPUT', `The Docker context '${name}' has no docker endpoint. Check it with \`docker context inspect ${name}\`.`);
  const tlsDir = path.join(base, 'tls', id, 'docker');
  return parseAddress(host, { env, selection, source, contextTls: { dir: tlsDir, skipVerify: meta.Endpoints?.docker?.SkipTLSVerify === true, name } });
}

/** A Docker context's name as the docker CLI accepts it (`docker context create`). */
const CONTEXT_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.+-]*$/;

/** The user's engine address (setting, `--engine-host`) is neither an address nor a context name. */
function badEngineAddress(address: string): AirlockError {
  return new AirlockError(
    'INVALID_INPUT',
    `'${address.slice(0, 200)}' is not an engine address Airlock understands. Use unix:///var/run/docker.sock, ssh://user@host, tcp://host:2376 (with TLS), npipe:////./pipe/docker_engine, or the name of a Docker context (\`docker context ls\`).`,
  );
}

/**
 * Checks an engine choice without contacting the engine: the address parses (the same parser every
 * connection uses), a named context exists, its TLS files are readable, and an insecure transport is
 * allowed. Throws INVALID_INPUT saying what to fix; the Settings screen validates `engineHost` with it.
 */
export async function validateEngineSelection(env: NodeJS.ProcessEnv, selection: EngineSelection): Promise<EngineEndpoint> {
  const endpoint = await resolveEngineEndpoint(env, selection);
  // An ssh:// endpoint holds an agent (no process yet); nothing is kept from a check.
  endpoint.options.agent?.destroy();
  return endpoint;
}

/**
 * Resolves the engine as the docker CLI would, with the user's explicit choice first: the
 * `engineHost` setting / `--engine-host` (an address or a context name); then, by engine choice
 * (`auto` unless `--engine`/`AIRLOCK_ENGINE`/the setting says docker or podman): `DOCKER_HOST`,
 * `CONTAINER_HOST` (Podman's variable), `DOCKER_CONTEXT` and the current context in
 * `~/.docker/config.json`, and finally the first well-known socket that exists (Docker's, then
 * Podman's rootful/rootless). Bad input is INVALID_INPUT saying what to fix.
 */
export async function resolveEngineEndpoint(env: NodeJS.ProcessEnv, selection: EngineSelection = {}): Promise<EngineEndpoint> {
  const chosen = selection.host?.trim();
  if (chosen) {
    if (chosen.includes('://')) {
      if (!/^(unix|npipe|ssh|tcp|http|https):\/\//.test(chosen)) throw badEngineAddress(chosen);
      return parseAddress(chosen, { env, selection, source: 'setting' });
    }
    if (!CONTEXT_NAME.test(chosen)) throw badEngineAddress(chosen);
    return contextEndpoint(chosen, 'setting', env, selection);
  }
  const choice = selection.choice ?? engineChoiceFrom(env);
  const dockerHost = env.DOCKER_HOST?.trim();
  const containerHost = env.CONTAINER_HOST?.trim();
  if (choice !== 'podman' && dockerHost) return parseAddress(dockerHost, { env, selection, source: 'DOCKER_HOST' });
  if (choice !== 'docker' && containerHost) return parseAddress(containerHost, { env, selection, source: 'CONTAINER_HOST', kindHint: 'podman' });
  if (choice === 'podman' && dockerHost && /podman/i.test(dockerHost)) return parseAddress(dockerHost, { env, selection, source: 'DOCKER_HOST', kindHint: 'podman' });
  if (choice !== 'podman') {
    const context = await currentContext(env);
    if (context) return contextEndpoint(context.name, context.source, env, selection);
  }
  const candidates = candidateSockets(env, choice);
  for (const c of candidates) {
    if (process.platform === 'win32' || (await pathExists(c.path))) return socketEndpoint(c.path, `unix://${c.path}`, 'socket', false, undefined, c.kind);
  }
  const fallback = candidates[0] ?? { path: '/var/run/docker.sock', kind: 'docker' as const };
  return socketEndpoint(fallback.path, `unix://${fallback.path}`, 'default', true, undefined, fallback.kind);
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
  /** Whether it applies a sandbox's memory, CPU and process limits (engine-limits.ts). */
  limits: EngineLimitSupport;
}

/** The parts of `GET /info` that `identifyEngine` reads. */
export type EngineInfo = EngineInfoLimits & { SecurityOptions?: string[]; Runtimes?: Record<string, unknown> };

/** Whether `GET /version` names Podman (in its Components). */
export function isPodmanVersion(version: Docker.DockerVersion): boolean {
  return podmanComponent(version) !== undefined;
}

function podmanComponent(version: Docker.DockerVersion): { Name?: string; Version?: string } | undefined {
  const components = (version as { Components?: Array<{ Name?: string; Version?: string }> }).Components ?? [];
  return components.find((c) => /podman/i.test(c.Name ?? ''));
}

/**
 * Reads kind/version/rootless/runtimes/limits from `GET /version` and `GET /info`, and for Podman its
 * own `GET /libpod/info` (rootless and the cgroup controllers are only told truly there).
 */
export function identifyEngine(version: Docker.DockerVersion, info: EngineInfo, libpod?: LibpodHostInfo): EngineIdentity {
  const podman = podmanComponent(version);
  const rootless = (info.SecurityOptions ?? []).some((o) => /name=rootless/.test(o)) || libpod?.security?.rootless === true;
  return {
    kind: podman ? 'podman' : 'docker',
    version: podman?.Version ?? version.Version,
    apiVersion: version.ApiVersion,
    rootless,
    runtimes: Object.keys(info.Runtimes ?? {}),
    limits: limitSupportFrom(info, rootless, libpod),
  };
}

/** "Docker 28.2 over SSH at build-box": one line for the doctor and the UI. */
export function describeEngine(d: EngineDescription, version?: string): string {
  const name = `${d.rootless ? 'rootless ' : ''}${d.kind === 'podman' ? 'Podman' : 'Docker'}${version ? ` ${version}` : ''}`;
  const via: Record<EngineTransport, string> = { unix: 'on the local socket', npipe: 'on the local pipe', tcp: 'over plain TCP at', tls: 'over TLS at', ssh: 'over SSH at' };
  return `${name} ${via[d.transport]} ${d.location}${d.context ? ` (context ${d.context})` : ''}`;
}
