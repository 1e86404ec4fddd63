import { spawn } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Duplex, Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { AirlockError } from '../../../contracts/errors';
import { PROCESS_OWNER } from '../../common/process-alive';
import { PODMAN_ULIMITS } from '../../sandbox/docker/container-config';
import type { EngineKind } from '../../sandbox/docker/engine-endpoint';
import { ExecDemuxer } from '../../sandbox/docker/exec-demux';
import { createContainerWithProfile, seccompSecurityOpt } from '../../sandbox/docker/seccomp-profile';
import { LABEL_INSTALLATION, LABEL_OWNER, runLabels } from '../../sandbox/labels';
import type { McpStdio, ResolvedMcpServer } from './mcp-server-registry';

/**
 * Local (stdio) MCP servers in their own sidecar (docs/architecture.md §20). Such a server is a
 * program of someone else's with the user's secrets in its environment: it never runs on the host.
 * Each runs in a hardened container of its own — no capabilities, Airlock's seccomp profile,
 * no-new-privileges, read-only root, limits, no host mounts or ports — with **no network at all**
 * (`NetworkMode: none`: only its own loopback, so neither the host's loopback nor the agent's sandbox
 * is anywhere it can address). The gateway speaks MCP to it over the engine's exec stream (stdin in,
 * stdout demultiplexed out), the way the channel reaches the sandbox. The container carries the run's
 * labels, so the run's wipe removes it and verifies it gone, and the reaper takes it after a crash.
 */

/** Marks an MCP sidecar (its server's name). */
export const LABEL_MCP_SERVER = 'airlock.mcp-server';
/** Each sidecar's limits: one tool server, not a workload. */
export const MCP_SIDECAR_LIMITS = { memoryBytes: 1024 ** 3, cpus: 1, pids: 256 };
/** Where a package fetched on the host is unpacked in the sidecar (a tmpfs). */
const PACKAGE_ROOT = '/tmp/mcp';
/** The user a server in Airlock's image runs as: nobody, owning nothing in the image. */
const SIDECAR_USER = '65534:65534';
/** Longest line (one JSON-RPC message) the server may send; a longer one ends the connection. */
const MAX_LINE_BYTES = 8 * 1024 * 1024;

export function mcpSidecarName(runId: string, server: string): string {
  return `airlock-${runId}-mcp-${server}`;
}

export interface StdioSidecarHost {
  docker: Docker;
  engine: EngineKind;
  /** Airlock's sandbox image, for servers without an image of their own. */
  airlockImage: () => Promise<string>;
  /** `runsc` when the run is under gVisor: the sidecar gets the run's isolation. */
  runtime?: string;
  installation?: string;
  /** Where fetched packages are kept on the host (one folder per package spec). */
  packageCache: string;
  /** Runs npm on the host (tests and the app give the same); absent: `npm` on the PATH. */
  npm?: string;
}

/** The sidecar's container: hardened as the sandbox, no network, labelled with the run. */
export function stdioSidecarConfig(runId: string, server: string, image: string, o: { ownImage: boolean; engine: EngineKind; runtime?: string; installation?: string }): Docker.ContainerCreateOptions {
  return {
    name: mcpSidecarName(runId, server),
    Image: image,
    // Airlock's image idles and the server starts by exec (after its package is copied in); a
    // server's own image runs its command as the container's process, stdin held open.
    ...(o.ownImage ? { OpenStdin: true, StdinOnce: false, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false } : { Entrypoint: ['sleep'], Cmd: ['infinity'], User: SIDECAR_USER }),
    Env: ['HOME=/tmp', 'NODE_ENV=production', 'npm_config_update_notifier=false'],
    WorkingDir: '/tmp',
    Hostname: `mcp-${server}`,
    Labels: { [LABEL_OWNER]: PROCESS_OWNER, ...(o.installation ? { [LABEL_INSTALLATION]: o.installation } : {}), ...runLabels(runId, 'sidecar'), [LABEL_MCP_SERVER]: server },
    HostConfig: {
      ...(o.runtime ? { Runtime: o.runtime } : {}),
      Init: true,
      Privileged: false,
      CapDrop: ['ALL'],
      CapAdd: [],
      SecurityOpt: ['no-new-privileges', seccompSecurityOpt([])],
      ReadonlyRootfs: true,
      Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=512m,mode=1777' },
      Binds: [],
      Mounts: [],
      PortBindings: {},
      PublishAllPorts: false,
      // No network: the container has its own loopback only (no route, no resolver, no host address).
      NetworkMode: 'none',
      Memory: MCP_SIDECAR_LIMITS.memoryBytes,
      MemorySwap: MCP_SIDECAR_LIMITS.memoryBytes,
      NanoCpus: MCP_SIDECAR_LIMITS.cpus * 1e9,
      PidsLimit: MCP_SIDECAR_LIMITS.pids,
      IpcMode: 'private',
      Ulimits: [{ Name: 'core', Soft: 0, Hard: 0 }, ...(o.engine === 'podman' ? PODMAN_ULIMITS : [])],
      RestartPolicy: { Name: 'no' },
      AutoRemove: false,
      LogConfig: { Type: 'json-file', Config: { 'max-size': '1m', 'max-file': '1' } },
    },
  };
}

/** An npm spec's package name (`@scope/name@1.2.3` → `@scope/name`). */
export function packageName(spec: string): string {
  const at = spec.indexOf('@', 1);
  return at < 0 ? spec : spec.slice(0, at);
}

function run(cmd: string, args: string[], cwd: string): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stderr }));
  });
}

/**
 * Fetches an npm package and its dependencies on the host with every install script off (nothing of
 * the package runs here), into a folder per spec that later runs reuse. Returns that folder (it holds
 * `node_modules`).
 */
export async function fetchPackage(host: Pick<StdioSidecarHost, 'packageCache' | 'npm'>, spec: string): Promise<string> {
  const dir = path.join(host.packageCache, createHash('sha256').update(spec).digest('hex').slice(0, 24));
  const ready = await stat(path.join(dir, 'node_modules', packageName(spec), 'package.json')).then(() => true, () => false);
  if (ready) return dir;
  const tmp = `${dir}.tmp-${randomUUID()}`;
  await mkdir(tmp, { recursive: true });
  try {
    const res = await run(host.npm ?? 'npm', ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--no-save', '--omit=dev', '--no-package-lock', '--prefix', tmp, spec], tmp);
    if (res.code !== 0) throw new AirlockError('UPSTREAM_ERROR', `npm could not fetch ${spec} (exit ${res.code}): ${res.stderr.trim().slice(-600)}. Check the package name and version, or the npm registry settings.`, { field: 'mcpServers' });
    await rm(dir, { recursive: true, force: true });
    await rename(tmp, dir);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  return dir;
}

/** The package's program as it lies in the sidecar, as npx picks it (its only bin, or the one named as the package), then the arguments. */
export async function packageCommand(dir: string, spec: string, args: readonly string[]): Promise<string[]> {
  const name = packageName(spec);
  const base = name.split('/').pop() as string;
  const manifest = JSON.parse(await readFile(path.join(dir, 'node_modules', name, 'package.json'), 'utf8')) as { bin?: string | Record<string, string> };
  const bins: Record<string, string> = typeof manifest.bin === 'string' ? { [base]: manifest.bin } : (manifest.bin ?? {});
  const entries = Object.entries(bins);
  const pick = entries.length === 1 ? entries[0]![1] : bins[base];
  if (!pick) throw new AirlockError('INVALID_INPUT', `${spec} has ${entries.length ? `several programs (${entries.map(([k]) => k).join(', ')}) and none named ${base}` : 'no program (bin)'}; give its image and command instead`, { field: 'stdio' });
  const file = path.posix.normalize(path.posix.join(PACKAGE_ROOT, 'node_modules', name, pick));
  if (!file.startsWith(`${PACKAGE_ROOT}/node_modules/`)) throw new AirlockError('INVALID_INPUT', `${spec}'s bin points outside the package`, { field: 'stdio' });
  return ['node', file, ...args];
}

/**
 * The MCP stdio transport over an engine stream: newline-delimited JSON-RPC, each message checked
 * against the protocol's schema (the server's output is untrusted), lines bounded.
 */
export class EngineStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private closed = false;

  constructor(
    private readonly stream: Duplex,
    private readonly stdout: Readable,
  ) {}

  async start(): Promise<void> {
    this.stdout.on('data', (chunk: Buffer) => this.take(chunk));
    this.stdout.on('end', () => void this.close());
    this.stream.on('error', (err: Error) => this.onerror?.(err));
    this.stream.on('close', () => void this.close());
  }

  private take(chunk: Buffer): void {
    let from = 0;
    for (let nl = chunk.indexOf(10, from); nl >= 0; nl = chunk.indexOf(10, from)) {
      const line = Buffer.concat([...this.pending, chunk.subarray(from, nl)]).toString('utf8');
      this.pending = [];
      this.pendingBytes = 0;
      from = nl + 1;
      this.deliver(line.replace(/\r$/, ''));
    }
    if (from < chunk.length) {
      this.pending.push(chunk.subarray(from));
      this.pendingBytes += chunk.length - from;
      if (this.pendingBytes > MAX_LINE_BYTES) {
        this.onerror?.(new Error(`the server sent a line over ${MAX_LINE_BYTES} bytes`));
        void this.close();
      }
    }
  }

  private deliver(line: string): void {
    if (!line.trim()) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      // A stdio server may print other things on stdout; they are not messages.
      return;
    }
    const msg = JSONRPCMessageSchema.safeParse(parsed);
    if (msg.success) this.onmessage?.(msg.data);
    else this.onerror?.(new Error('the server sent a message that is not JSON-RPC'));
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) throw new Error('the MCP sidecar connection is closed');
    const line = `${JSON.stringify(message)}\n`;
    await new Promise<void>((resolve, reject) => this.stream.write(line, (err) => (err ? reject(err) : resolve())));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stream.destroy();
    this.onclose?.();
  }
}

/** A running sidecar: its transport (for the gateway's SDK client) and its removal. */
export interface StdioSidecar {
  readonly container: string;
  readonly transport: EngineStdioTransport;
  /** Removes the container (the run's wipe also does and verifies it). */
  dispose(): Promise<void>;
}

async function execStream(c: Docker.Container, cmd: string[], env: string[], user?: string): Promise<{ exec: Docker.Exec; stream: Duplex }> {
  const exec = await c.exec({ Cmd: cmd, Env: env, AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false, WorkingDir: '/tmp', ...(user ? { User: user } : {}) });
  const stream = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
  return { exec, stream };
}

/** Streams the package folder's `node_modules` (a tar made on the host) into the sidecar's tmpfs. */
async function copyPackage(c: Docker.Container, dir: string): Promise<void> {
  const { exec, stream } = await execStream(c, ['sh', '-c', `mkdir -p ${PACKAGE_ROOT} && exec tar -x --no-same-owner --no-same-permissions -C ${PACKAGE_ROOT} -f -`], [], SIDECAR_USER);
  let stderr = '';
  const out = new ExecDemuxer(stream as unknown as NodeJS.ReadableStream & { pause(): unknown; resume(): unknown }, (b) => (stderr = (stderr + b.toString()).slice(-2000)));
  out.stdout.resume();
  const done = new Promise<void>((resolve) => out.stdout.once('end', () => resolve()));
  const tar = spawn('tar', ['-c', '-C', dir, 'node_modules'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const tarDone = new Promise<number>((resolve, reject) => {
    tar.on('error', reject);
    tar.on('close', (code) => resolve(code ?? 1));
  });
  tar.stdout.pipe(stream, { end: false });
  const code = await tarDone;
  if (code !== 0) throw new AirlockError('SANDBOX_FAILED', `packing ${dir} on the host failed (tar exit ${code})`);
  // tar stops at the archive's end blocks; half-closing stdin lets it see the end either way.
  (stream as Duplex & { end(): void }).end();
  await done;
  const info = await exec.inspect();
  if (info.ExitCode !== 0) throw new AirlockError('SANDBOX_FAILED', `copying the MCP server's package into its sidecar failed (exit ${info.ExitCode}): ${stderr.trim().slice(-400)}`);
}

/**
 * Starts a stdio server's sidecar for a run and connects its stdin/stdout. On any failure the
 * container is removed before the error is thrown.
 */
export async function openStdioSidecar(host: StdioSidecarHost, runId: string, server: ResolvedMcpServer, onStderr?: (text: string) => void): Promise<StdioSidecar> {
  const stdio = server.entry.stdio as McpStdio;
  const ownImage = stdio.image !== undefined;
  const image = stdio.image ?? (await host.airlockImage());
  const pkgDir = stdio.package ? await fetchPackage(host, stdio.package) : undefined;
  const command = stdio.package && pkgDir ? await packageCommand(pkgDir, stdio.package, stdio.command) : stdio.command;
  const env = [...Object.entries(stdio.env ?? {}).map(([k, v]) => `${k}=${v}`), ...Object.entries(server.secretEnv ?? {}).map(([k, v]) => `${k}=${v.reveal()}`)];
  const config = stdioSidecarConfig(runId, server.entry.name, image, { ownImage, engine: host.engine, ...(host.runtime ? { runtime: host.runtime } : {}), ...(host.installation ? { installation: host.installation } : {}) });
  if (ownImage) {
    // The image's entrypoint is kept; the command (and secrets) are the container's own here.
    config.Cmd = [...command];
    config.Env = [...(config.Env ?? []), ...env];
  }
  const c = await createContainerWithProfile(host.docker, host.engine, config);
  const remove = () => c.remove({ force: true, v: true }).then(() => undefined, () => undefined);
  try {
    let stream: Duplex;
    if (ownImage) {
      stream = (await c.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as Duplex;
      await c.start();
    } else {
      await c.start();
      if (pkgDir) await copyPackage(c, pkgDir);
      ({ stream } = await execStream(c, command, env, SIDECAR_USER));
    }
    const out = new ExecDemuxer(stream as unknown as NodeJS.ReadableStream & { pause(): unknown; resume(): unknown }, (b) => onStderr?.(b.toString()));
    const transport = new EngineStdioTransport(stream, out.stdout);
    return {
      container: config.name as string,
      transport,
      dispose: async () => {
        await transport.close();
        await remove();
      },
    };
  } catch (err) {
    await remove();
    throw err;
  }
}
